"""Log compaction (``cleanup.policy=compact``): keep only the newest record of each key in the sealed segments.

Semantics follow Kafka's cleaner (``LogCleaner``):

- Only sealed segments are cleaned, and of those only the ones older than ``min.compaction.lag.ms``: the
  *cleanable* range ends at the first uncleanable offset. Records keep their offsets; removed records leave gaps.
- The *dirty* part is what was appended since the last cleaning (a per-partition checkpoint file). A map from
  key to its newest offset is built over the dirty part only; the older, already clean part holds at most one
  record per key, so a record is kept iff its key is absent from the map or it is the newest one in the map.
- Cleaning starts when dirty bytes reach ``min.cleanable.dirty.ratio`` of the cleanable range.
- A tombstone (null value) is removed once its batch's max timestamp is older than ``delete.retention.ms``
  (Kafka 3.1+ stamps a delete horizon into the batch instead; a timestamp works for every client, including
  those that predate that flag). Records without a key are removed, as Kafka's cleaner does.
- A batch is copied byte for byte unless it loses records; then it is re-encoded with the same codec, base
  offset, last offset delta, producer id, epoch and base sequence, so sequence numbers and offsets still add
  up. A batch that loses all its records disappears, except when it is one of the last five batches of an
  idempotent producer (its header is kept as an empty batch, so the producer state rebuilt on the next open
  is the one in memory now) or the last batch of a group of merged segments (see `groupstream.storage.swap`).
- Control batches are never touched. A batch whose records cannot be decoded is kept as it is.
- Transactions (issue 17), as Kafka's cleaner treats them: cleaning stops below the last stable offset (an
  undecided transaction's records are neither removed nor allowed to displace older ones), and the records of
  aborted transactions (from the aborted-transaction index) are removed and never enter the key map, so an
  aborted write cannot erase the committed value before it. Their markers stay.
- Consecutive segments are merged while their original sizes fit ``segment.bytes``.

The work splits in three steps so a broker can run the expensive middle one on another thread:
`plan_cleaning` (owner thread: picks segments, duplicates their file descriptors), `CleanPlan.build` (any
thread: reads through the duplicates, writes and fsyncs ``.cleaned`` files) and `commit_cleaning` (owner
thread: swaps each rewritten group in if its segments are still there, else discards it).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from groupstream.protocol.errors import PeerProtocolError
from groupstream.protocol.records.batch_header import (
    COMPRESSION_MASK,
    DELETE_HORIZON_BIT,
    HEADER_SIZE,
    LOG_OVERHEAD,
    NO_PRODUCER_ID,
    TIMESTAMP_TYPE_BIT,
    BatchHeader,
    encode_header,
    patch_crc,
)
from groupstream.protocol.records.compression import compress, decompress
from groupstream.protocol.records.record import Record, decode_records, encode_record
from groupstream.storage.checkpoint import CLEANER_OFFSET_FILE, read_offset, write_offset
from groupstream.storage.config import INT32_MAX, CleanupPolicy, LogConfig
from groupstream.storage.errors import CorruptRangeError
from groupstream.storage.fileio import datasync, open_rw, pread_upto, pwrite_all
from groupstream.storage.log import PartitionLog
from groupstream.storage.scan import VerifiedScan
from groupstream.storage.segment import Segment
from groupstream.storage.swap import cleaned_path

DEFAULT_DELETE_RETENTION_MS = 24 * 3600 * 1000
DEFAULT_MIN_CLEANABLE_DIRTY_RATIO = 0.5
_MAX_DECOMPRESSED = 1 << 31  # our own log: the producer's batch was accepted, this only guards against bugs


@dataclass(frozen=True, slots=True)
class CompactionSettings:
    delete_retention_ms: int = DEFAULT_DELETE_RETENTION_MS
    min_cleanable_dirty_ratio: float = DEFAULT_MIN_CLEANABLE_DIRTY_RATIO
    min_compaction_lag_ms: int = 0

    @classmethod
    def from_config(cls, config: LogConfig) -> CompactionSettings:
        """From the topic's Kafka properties (validated when the config was built)."""
        props = dict(config.passthrough)
        return cls(
            delete_retention_ms=int(props.get("delete.retention.ms", DEFAULT_DELETE_RETENTION_MS)),
            min_cleanable_dirty_ratio=float(
                props.get("min.cleanable.dirty.ratio", DEFAULT_MIN_CLEANABLE_DIRTY_RATIO)
            ),
            min_compaction_lag_ms=int(props.get("min.compaction.lag.ms", 0)),
        )


def compacts(config: LogConfig) -> bool:
    return CleanupPolicy.COMPACT in config.cleanup_policy


@dataclass(slots=True)
class CleanStats:
    segments_in: int = 0
    segments_out: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    records_in: int = 0
    records_removed: int = 0
    tombstones_removed: int = 0
    batches_reencoded: int = 0
    empty_batches_kept: int = 0
    undecodable_batches: int = 0
    groups_discarded: int = 0  # rewritten, but the log changed underneath before the swap


@dataclass(slots=True)
class _Source:
    """One segment to clean, as the building thread sees it: a private fd and the state at planning time."""

    segment: Segment
    base_offset: int
    fd: int
    size: int
    next_offset: int
    largest_timestamp: int


@dataclass(slots=True)
class _Built:
    sources: list[_Source]
    path: Path
    changed: bool


@dataclass(slots=True)
class CleanPlan:
    directory: Path
    groups: list[list[_Source]]
    first_dirty: int
    first_uncleanable: int
    retained_batches: frozenset[tuple[int, int]]  # (producer id, base offset) the producer state needs
    settings: CompactionSettings
    now_ms: int
    truncation_generation: int
    # producer id -> (first offset, marker offset) of its aborted transactions in the cleanable range
    aborted: dict[int, list[tuple[int, int]]] = field(default_factory=dict)
    stats: CleanStats = field(default_factory=CleanStats)
    built: list[_Built] = field(default_factory=list)
    _closed: bool = False

    def sources(self) -> Iterator[_Source]:
        for group in self.groups:
            yield from group

    def build(self) -> None:
        """Write one ``.cleaned`` file per group (fsynced). Touches only the duplicated fds and new files, so
        it may run on any thread while the owner keeps appending and serving reads."""
        try:
            offset_map = self._build_offset_map()
            for group in self.groups:
                self.built.append(self._clean_group(group, offset_map))
        except BaseException:
            self.discard()
            raise

    def _build_offset_map(self) -> dict[bytes, int]:
        newest: dict[bytes, int] = {}
        for src in self.sources():
            if src.next_offset <= self.first_dirty:
                continue
            for _, h, records in _batches(src):
                if records is None or self._aborted(h):
                    continue
                for r in records:
                    if r.key is not None and r.offset >= self.first_dirty:
                        newest[r.key] = r.offset
        return newest

    def _aborted(self, h: BatchHeader) -> bool:
        """Whether a data batch belongs to an aborted transaction."""
        if not h.is_transactional:
            return False
        ranges = self.aborted.get(h.producer_id)
        return ranges is not None and any(first <= h.base_offset <= last for first, last in ranges)

    def _clean_group(self, group: list[_Source], newest: dict[bytes, int]) -> _Built:
        path = cleaned_path(self.directory, group[0].base_offset)
        stats = self.stats
        changed = len(group) > 1
        fd = open_rw(path, truncate=True)
        try:
            position = 0
            last = group[-1]
            for src in group:
                stats.segments_in += 1
                stats.bytes_in += src.size
                for raw, h, records in _batches(src):
                    out = self._filter_batch(raw, h, records, src, newest, src is last)
                    if out is not raw:
                        changed = True
                    if out:
                        pwrite_all(fd, out, position)
                        position += len(out)
            datasync(fd)
        finally:
            os.close(fd)
        stats.segments_out += 1
        stats.bytes_out += position
        return _Built(group, path, changed)

    def _filter_batch(
        self,
        raw: bytes,
        h: BatchHeader,
        records: list[Record] | None,
        src: _Source,
        newest: dict[bytes, int],
        in_last_segment: bool,
    ) -> bytes:
        """The bytes to write for one batch: ``raw`` itself when it stays, b"" when it goes."""
        stats = self.stats
        if h.is_control:
            return raw
        if records is None:
            stats.undecodable_batches += 1
            return raw
        stats.records_in += len(records)
        if self._aborted(h):
            stats.records_removed += len(records)
            return self._emptied(h, src, in_last_segment)
        horizon_ts = h.max_timestamp if h.max_timestamp >= 0 else src.largest_timestamp
        tombstones_expire = self.now_ms - horizon_ts > self.settings.delete_retention_ms
        kept: list[Record] = []
        for r in records:
            key = r.key
            if key is None:
                continue
            latest = newest.get(key)
            if latest is not None and r.offset < latest:
                continue
            if r.value is None and tombstones_expire:
                stats.tombstones_removed += 1
                continue
            kept.append(r)
        if len(kept) == len(records):
            return raw
        stats.records_removed += len(records) - len(kept)
        if kept:
            stats.batches_reencoded += 1
            return _reencode(h, kept)
        return self._emptied(h, src, in_last_segment)

    def _emptied(self, h: BatchHeader, src: _Source, in_last_segment: bool) -> bytes:
        """A batch that lost every record: gone, or its header kept (see the module docstring)."""
        stats = self.stats
        ends_group = in_last_segment and h.next_offset == src.next_offset
        if ends_group or (h.producer_id != NO_PRODUCER_ID and (h.producer_id, h.base_offset) in self.retained_batches):
            stats.empty_batches_kept += 1
            return _empty_batch(h)
        return b""

    def discard(self) -> None:
        """Remove every ``.cleaned`` file not yet swapped in and release the fds."""
        for built in self.built:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(built.path)
        self.built.clear()
        for group in self.groups:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(cleaned_path(self.directory, group[0].base_offset))
        self.close()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for src in self.sources():
            with contextlib.suppress(OSError):
                os.close(src.fd)


def _batches(src: _Source) -> Iterator[tuple[bytes, BatchHeader, list[Record] | None]]:
    """Every batch of a source segment with its decoded records (None for control batches and for records
    that do not decode). Damage the segment was not known to have (a clean open does not scan sealed
    segments) fails the cleaning: a rewrite must never drop what lies after it."""
    scan = VerifiedScan(src.fd, 0, src.size, expected=src.base_offset, upper=src.next_offset)
    for pos, h in scan:
        raw = pread_upto(src.fd, h.size, pos)
        if h.is_control:
            yield raw, h, None
            continue
        try:
            section = raw[HEADER_SIZE:]
            data = decompress(h.compression, section, _MAX_DECOMPRESSED) if h.compression else section
            records: list[Record] | None = decode_records(data, h.records_count, h.base_offset, h.base_timestamp)
        except PeerProtocolError:
            records = None
        yield raw, h, records
    if scan.damage is not None:
        at, offset, why = scan.damage
        raise CorruptRangeError(
            src.segment.directory.name, offset, src.next_offset - 1, src.next_offset,
            f"found while cleaning {src.segment.log_path.name} at byte {at}: {why}; the segment is left as it is",
        )  # fmt: skip


def _reencode(h: BatchHeader, kept: list[Record]) -> bytes:
    """The batch with only ``kept``: same codec, offsets, producer fields; timestamps as Kafka recomputes them."""
    base_ts = kept[0].timestamp
    log_append = bool(h.attributes & TIMESTAMP_TYPE_BIT)
    max_ts = h.max_timestamp if log_append else max(r.timestamp for r in kept)
    base = h.base_offset
    body = b"".join(encode_record(r.offset - base, r.timestamp - base_ts, r.key, r.value, r.headers) for r in kept)
    payload = compress(h.compression, body) if h.compression else body
    header = h._replace(
        batch_length=HEADER_SIZE - LOG_OVERHEAD + len(payload),
        crc=0,
        attributes=h.attributes & ~DELETE_HORIZON_BIT,
        base_timestamp=base_ts,
        max_timestamp=max_ts,
        records_count=len(kept),
    )
    out = bytearray(encode_header(header))
    out += payload
    patch_crc(out, 0, len(out))
    return bytes(out)


def _empty_batch(h: BatchHeader) -> bytes:
    """A header-only batch that keeps the offset range and producer fields (Kafka's retained empty batch)."""
    header = h._replace(
        batch_length=HEADER_SIZE - LOG_OVERHEAD,
        crc=0,
        attributes=h.attributes & ~(COMPRESSION_MASK | DELETE_HORIZON_BIT),
        base_timestamp=h.max_timestamp,
        records_count=0,
    )
    out = bytearray(encode_header(header))
    patch_crc(out, 0, len(out))
    return bytes(out)


# -- planning (owner thread) -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CleanableRange:
    first_dirty: int
    first_uncleanable: int
    clean_bytes: int
    dirty_bytes: int

    @property
    def dirty_ratio(self) -> float:
        total = self.clean_bytes + self.dirty_bytes
        return self.dirty_bytes / total if total else 0.0


def _cleanable_segments(log: PartitionLog, now_ms: int, settings: CompactionSettings) -> list[Segment]:
    sealed = log.segments[:-1]
    stable = log.last_stable_offset
    out: list[Segment] = []
    for seg in sealed:
        if seg.holes:  # a rewrite would drop the damaged bytes and what the hole hides: never clean past one
            break
        if seg.next_offset > stable:  # holds part of an undecided transaction
            break
        if settings.min_compaction_lag_ms > 0 and now_ms - seg.largest_timestamp() < settings.min_compaction_lag_ms:
            break
        out.append(seg)
    return out


def first_dirty_offset(log: PartitionLog) -> int:
    saved = read_offset(log.directory, CLEANER_OFFSET_FILE) or 0
    return min(max(saved, log.log_start_offset), log.log_end_offset)


def cleanable_range(log: PartitionLog, now_ms: int, settings: CompactionSettings | None = None) -> CleanableRange:
    """Where the clean and dirty parts of the cleanable range lie, for the dirty-ratio trigger."""
    settings = settings or CompactionSettings.from_config(log.config)
    segments = _cleanable_segments(log, now_ms, settings)
    first_dirty = first_dirty_offset(log)
    first_uncleanable = segments[-1].next_offset if segments else first_dirty
    clean = sum(s.size for s in segments if s.next_offset <= first_dirty)
    dirty = sum(s.size for s in segments if s.next_offset > first_dirty)
    return CleanableRange(first_dirty, max(first_uncleanable, first_dirty), clean, dirty)


def _group_by_size(segments: list[Segment], max_bytes: int) -> list[list[Segment]]:
    groups: list[list[Segment]] = []
    current: list[Segment] = []
    size = 0
    for seg in segments:
        fits = current and size + seg.size <= max_bytes and seg.next_offset - 1 - current[0].base_offset <= INT32_MAX
        if current and not fits:
            groups.append(current)
            current, size = [], 0
        current.append(seg)
        size += seg.size
    if current:
        groups.append(current)
    return groups


def plan_cleaning(log: PartitionLog, now_ms: int, *, force: bool = False) -> CleanPlan | None:
    """A plan when the log compacts and its dirty ratio calls for cleaning (``force``: whenever anything is
    cleanable, e.g. to drop tombstones that expired); None otherwise. The caller must ``build`` and then
    ``commit_cleaning`` it, or ``discard`` it."""
    if log.closed or not compacts(log.config):
        return None
    settings = CompactionSettings.from_config(log.config)
    segments = _cleanable_segments(log, now_ms, settings)
    if not segments:
        return None
    rng = cleanable_range(log, now_ms, settings)
    if not force and (rng.dirty_bytes == 0 or rng.dirty_ratio < settings.min_cleanable_dirty_ratio):
        return None
    retained = frozenset(
        (pid, b.first_offset) for pid, entry in log.producer_state.producers.items() for b in entry.batches
    )
    groups: list[list[_Source]] = []
    try:
        for group in _group_by_size(segments, log.config.segment_bytes):
            groups.append([])
            for seg in group:
                groups[-1].append(
                    _Source(seg, seg.base_offset, os.dup(seg.log_fd), seg.size, seg.next_offset, seg.largest_timestamp())
                )
    except OSError:
        for g in groups:
            for src in g:
                os.close(src.fd)
        raise
    aborted: dict[int, list[tuple[int, int]]] = {}
    for txn in log.aborted_transactions(segments[0].base_offset, segments[-1].next_offset):
        aborted.setdefault(txn.producer_id, []).append((txn.first_offset, txn.last_offset))
    return CleanPlan(
        aborted=aborted,
        directory=log.directory,
        groups=groups,
        first_dirty=rng.first_dirty,
        first_uncleanable=rng.first_uncleanable,
        retained_batches=retained,
        settings=settings,
        now_ms=now_ms,
        truncation_generation=log.truncation_generation,
    )


def commit_cleaning(log: PartitionLog, plan: CleanPlan) -> CleanStats:
    """Swap every rewritten group into ``log`` whose segments are all still there (retention, truncation or
    deletion may have removed some meanwhile; those groups are discarded). Advances the cleaner checkpoint
    when every group made it."""
    stats = plan.stats
    try:
        all_in = True
        for built in plan.built:
            old = [src.segment for src in built.sources]
            if log.closed or log.truncation_generation != plan.truncation_generation or not log.holds(old):
                stats.groups_discarded += 1
                all_in = False
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(built.path)
                continue
            if not built.changed:
                os.unlink(built.path)
                continue
            log.replace_segments(old, built.path)
        plan.built.clear()
        if all_in and not log.closed:
            write_offset(log.directory, CLEANER_OFFSET_FILE, plan.first_uncleanable)
    finally:
        plan.discard()
    return stats


def clean(log: PartitionLog, now_ms: int, *, force: bool = False) -> CleanStats | None:
    """Plan, build and commit on the calling thread: for tests, tools and single-threaded owners."""
    plan = plan_cleaning(log, now_ms, force=force)
    if plan is None:
        return None
    try:
        plan.build()
    except BaseException:
        plan.discard()
        raise
    return commit_cleaning(log, plan)
