"""Idempotent and transactional producer state of one partition: per producer id, its epoch, its last five
batches and the first offset of its open transaction; the partition's ongoing transactions give its last
stable offset (LSO).

The broker asks ``check`` before an append, appends, then calls ``update`` with the assigned offsets
(``PartitionLog.append_checked`` does the three in order). The log is the only source of truth: an open
rebuilds the state from the batch headers in the log, except after a clean shutdown, when a clean close
left a snapshot of it taken at the log end (`write_snapshot`; Kafka keeps ``<offset>.snapshot`` files for
the same reason: so an open need not read every segment). A snapshot is used only if it is intact (version,
CRC) and was taken at exactly the log end the open found; otherwise the headers are scanned as before.

Rules, as Kafka applies them to client produce requests:

- a batch without a producer id (-1) is not idempotent and always accepted;
- an epoch lower than the producer's current one is fenced: ``InvalidEpoch``;
- a higher epoch starts over: its first batch must have sequence 0, else ``OutOfOrder(expected=0)``;
- at the same epoch, a batch whose (first, last) sequence equals one of the last five is a ``Duplicate``
  carrying the offsets the original got; otherwise its base sequence must be the last sequence + 1,
  wrapping from int32 max to 0, else ``OutOfOrder(expected)``;
- a producer id with no state must start at sequence 0; anything else is ``UnknownProducer``.

Transactions (KIP-98, as Kafka's ProducerStateManager keeps them): a producer's first transactional data batch
opens its transaction at that batch's base offset; a COMMIT or ABORT marker (a control batch, no sequence) of
the same or a newer epoch ends it (a newer epoch also fences the older one: its entry starts over at the
marker's epoch); a marker of an older epoch is ``InvalidEpoch``, and one whose coordinator epoch is older than
the last marker's is ``StaleCoordinator``. The ongoing transactions are kept in order of their first offsets,
so the first undecided offset is the first of them; an ended transaction comes back as a `CompletedTxn`, from
which the log indexes the aborted ones (`groupstream.storage.txn_index`).

Decision for a producer whose state was removed by retention (all its batches deleted, so it is unknown
again): also ``UnknownProducer``. The broker answers UNKNOWN_PRODUCER_ID together with the partition's log
start offset, from which the Java client and librdkafka recognise the case and restart the sequence (or
bump the epoch). Accepting any sequence, as newer Kafka brokers do, would hide a real gap; restarting at 0
is always accepted.
"""

from __future__ import annotations

import contextlib
import os
import struct
from collections import deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import crc32c

from groupstream.protocol.records.batch_header import (
    CONTROL_BIT,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    TRANSACTIONAL_BIT,
    BatchHeader,
    iter_batches,
)
from groupstream.storage.checkpoint import PRODUCER_SNAPSHOT_FILE
from groupstream.storage.fileio import atomic_write

INT32_MAX = 2**31 - 1
BATCHES_RETAINED = 5


@dataclass(frozen=True, slots=True)
class Accept:
    pass


@dataclass(frozen=True, slots=True)
class Duplicate:
    base_offset: int
    last_offset: int


@dataclass(frozen=True, slots=True)
class OutOfOrder:
    expected: int


@dataclass(frozen=True, slots=True)
class InvalidEpoch:
    current_epoch: int


@dataclass(frozen=True, slots=True)
class UnknownProducer:
    pass


@dataclass(frozen=True, slots=True)
class StaleCoordinator:
    """A marker from a transaction coordinator older than the one that wrote this producer's last marker
    (Kafka: TRANSACTION_COORDINATOR_FENCED)."""

    current_coordinator_epoch: int


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    """A transaction ended by a marker: its producer, first offset, the marker's offset and outcome."""

    producer_id: int
    first_offset: int
    last_offset: int
    aborted: bool


CheckResult = Accept | Duplicate | OutOfOrder | InvalidEpoch | UnknownProducer
ACCEPT = Accept()


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    first_sequence: int
    last_sequence: int
    first_offset: int
    last_offset: int


@dataclass(slots=True)
class ProducerEntry:
    producer_id: int
    epoch: int
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=BATCHES_RETAINED))
    # Last offset of this producer's latest batch, data or control: retention forgets the producer once
    # the log start passes it.
    last_offset: int = -1
    # Coordinator epoch of the last marker written for this producer (-1: none yet); older ones are refused.
    coordinator_epoch: int = -1
    # Max timestamp of its latest batch or marker (-1: unknown): DescribeProducers answers it, and Kafka's
    # ``kafka-transactions.sh find-hanging`` measures an open transaction's age from it.
    last_timestamp: int = -1

    def copy(self) -> ProducerEntry:
        return ProducerEntry(self.producer_id, self.epoch, deque(self.batches, maxlen=BATCHES_RETAINED), self.last_offset,
                             self.coordinator_epoch, self.last_timestamp)  # fmt: skip

    def snapshot(self) -> tuple[int, int, tuple[BatchMetadata, ...], int, int, int]:
        return (self.producer_id, self.epoch, tuple(self.batches), self.last_offset, self.coordinator_epoch,
                self.last_timestamp)  # fmt: skip


def next_sequence(sequence: int) -> int:
    return 0 if sequence == INT32_MAX else sequence + 1


class ProducerStateManager:
    def __init__(self) -> None:
        self._producers: dict[int, ProducerEntry] = {}
        # producer id -> first offset of its open transaction. Insertion order is first-offset order: a
        # transaction opens at the log end, above every open one (rebuilds re-observe the log in order).
        self._ongoing: dict[int, int] = {}

    def __len__(self) -> int:
        return len(self._producers)

    def __iter__(self) -> Iterator[int]:
        return iter(self._producers)

    def get(self, producer_id: int) -> ProducerEntry | None:
        return self._producers.get(producer_id)

    @property
    def producers(self) -> Mapping[int, ProducerEntry]:
        return self._producers

    def snapshot(self) -> dict[int, tuple[int, int, tuple[BatchMetadata, ...], int, int, int, int]]:
        """A value copy, for comparing a live state with a rebuilt one (the last field: the first offset of
        the producer's open transaction, -1 if none)."""
        return {pid: (*e.snapshot(), self._ongoing.get(pid, -1)) for pid, e in self._producers.items()}

    @property
    def ongoing_transactions(self) -> Mapping[int, int]:
        """producer id -> first offset of its open transaction, in order of first offset."""
        return self._ongoing

    def first_unstable_offset(self) -> int | None:
        """The first offset of the oldest open transaction (None when none is open): the last stable offset
        is the smaller of it and the high watermark."""
        for first in self._ongoing.values():
            return first
        return None

    def txn_first_offset(self, producer_id: int) -> int | None:
        return self._ongoing.get(producer_id)

    # -- the rules ---------------------------------------------------------------------------------------

    def check_marker(self, producer_id: int, epoch: int, coordinator_epoch: int) -> Accept | InvalidEpoch | StaleCoordinator:
        """May a COMMIT/ABORT marker of ``epoch`` from coordinator epoch ``coordinator_epoch`` be written?"""
        entry = self._producers.get(producer_id)
        if entry is None:
            return ACCEPT
        if epoch < entry.epoch:
            return InvalidEpoch(entry.epoch)
        if coordinator_epoch < entry.coordinator_epoch:
            return StaleCoordinator(entry.coordinator_epoch)
        return ACCEPT

    def check(self, producer_id: int, epoch: int, base_sequence: int, last_sequence: int) -> CheckResult:
        if producer_id == NO_PRODUCER_ID:
            return ACCEPT
        entry = self._producers.get(producer_id)
        if base_sequence == NO_SEQUENCE:
            # Not sequenced (e.g. a transaction marker): only fencing applies.
            if entry is not None and epoch < entry.epoch:
                return InvalidEpoch(entry.epoch)
            return ACCEPT
        if entry is None:
            return ACCEPT if base_sequence == 0 else UnknownProducer()
        if epoch < entry.epoch:
            return InvalidEpoch(entry.epoch)
        if epoch > entry.epoch:
            return ACCEPT if base_sequence == 0 else OutOfOrder(0)
        for b in entry.batches:
            if b.first_sequence == base_sequence and b.last_sequence == last_sequence:
                return Duplicate(b.first_offset, b.last_offset)
        expected = next_sequence(entry.batches[-1].last_sequence) if entry.batches else 0
        return ACCEPT if base_sequence == expected else OutOfOrder(expected)

    def update(
        self,
        producer_id: int,
        epoch: int,
        base_sequence: int,
        last_sequence: int,
        base_offset: int,
        last_offset: int,
        timestamp: int = -1,
    ) -> None:
        """Record an appended batch (``timestamp``: its max timestamp). Trusts the caller: ``check`` accepted
        it, or it is already in the log."""
        if producer_id == NO_PRODUCER_ID:
            return
        entry = self._entry_at(producer_id, epoch)
        if base_sequence != NO_SEQUENCE:
            entry.batches.append(BatchMetadata(base_sequence, last_sequence, base_offset, last_offset))
        entry.last_offset = max(entry.last_offset, last_offset)
        entry.last_timestamp = timestamp

    def _entry_at(self, producer_id: int, epoch: int) -> ProducerEntry:
        """The producer's entry, started over at a newer ``epoch`` (its last coordinator epoch is kept)."""
        entry = self._producers.get(producer_id)
        if entry is None or epoch > entry.epoch:
            coordinator_epoch = -1 if entry is None else entry.coordinator_epoch
            entry = ProducerEntry(producer_id, epoch, coordinator_epoch=coordinator_epoch)
            self._producers[producer_id] = entry
        return entry

    def update_txn(self, producer_id: int, base_offset: int) -> None:
        """A transactional data batch at ``base_offset`` opens its producer's transaction if none is open."""
        if producer_id not in self._ongoing:
            self._ongoing[producer_id] = base_offset

    def complete_txn(
        self, producer_id: int, epoch: int, coordinator_epoch: int, commit: bool, marker_offset: int,
        timestamp: int = -1,
    ) -> CompletedTxn | None:
        """Record a marker at ``marker_offset`` (trusted: ``check_marker`` accepted it, or it is in the log).
        Ends the producer's open transaction, if any, and returns it."""
        entry = self._entry_at(producer_id, epoch)
        entry.last_offset = max(entry.last_offset, marker_offset)
        entry.last_timestamp = timestamp
        entry.coordinator_epoch = max(entry.coordinator_epoch, coordinator_epoch)
        first = self._ongoing.pop(producer_id, None)
        if first is None:
            return None
        return CompletedTxn(producer_id, first, marker_offset, not commit)

    # -- batch-level conveniences ------------------------------------------------------------------------

    def check_header(self, h: BatchHeader) -> CheckResult:
        return self.check(h.producer_id, h.producer_epoch, h.base_sequence, h.last_sequence)

    def observe(self, h: BatchHeader) -> None:
        """``update`` from a header whose offsets are final (a data batch in the log; a marker needs its
        record read: `complete_txn`)."""
        self.update(h.producer_id, h.producer_epoch, h.base_sequence, h.last_sequence, h.base_offset, h.last_offset,
                    h.max_timestamp)  # fmt: skip
        if h.attributes & TRANSACTIONAL_BIT and not h.attributes & CONTROL_BIT:
            self.update_txn(h.producer_id, h.base_offset)

    def check_batches(self, batches: bytes | bytearray | memoryview) -> CheckResult:
        """Check every batch of a produce request in order, each against the state the earlier ones would
        leave; returns the first verdict that is not ``Accept``."""
        headers = [h for _, h in iter_batches(batches, validate_crc=False)]
        if len(headers) == 1:
            return self.check_header(headers[0])
        staged = ProducerStateManager()
        for h in headers:
            pid = h.producer_id
            if pid != NO_PRODUCER_ID and pid not in staged._producers and pid in self._producers:
                staged._producers[pid] = self._producers[pid].copy()
            verdict = staged.check_header(h)
            if not isinstance(verdict, Accept):
                return verdict
            staged.observe(h)
        return ACCEPT

    def update_from_batches(self, batches: bytes | bytearray | memoryview) -> None:
        """``update`` for every batch of an append, after ``PartitionLog.append`` patched the offsets in."""
        for _, h in iter_batches(batches, validate_crc=False):
            self.observe(h)

    def truncate_head(self, log_start_offset: int) -> None:
        """Forget producers none of whose batches remain at or above the log start offset, with their open
        transactions (as Kafka evicts them: nothing of such a transaction is left to read)."""
        gone = [pid for pid, e in self._producers.items() if e.last_offset < log_start_offset]
        for pid in gone:
            del self._producers[pid]
            self._ongoing.pop(pid, None)

    def clear(self) -> None:
        self._producers.clear()
        self._ongoing.clear()


# -- snapshot file -------------------------------------------------------------------------------------------
#
# Big-endian: magic "GSPS", version u16, CRC-32C u32 of everything after it; then the log end offset the state
# belongs to (i64), [v2: the number of aborted-transaction index entries of the log (i64)], the number of
# producers (i32), and per producer: id i64, epoch i16, last offset i64, [v2: coordinator epoch of its last
# marker i32, first offset of its open transaction i64 (-1: none), last timestamp i64], the number of retained batches i8, and per
# batch: first sequence i32, last sequence i32, first offset i64, last offset i64. Version 1 (no transactions)
# is still read; any other version is refused by name, and the open then scans the log instead.

_MAGIC = b"GSPS"
_SNAPSHOT_VERSION = 2
_READABLE_VERSIONS = (1, 2)
_PREFIX = struct.Struct(">4sHI")
_HEAD_V1 = struct.Struct(">qi")
_HEAD = struct.Struct(">qqi")
_PRODUCER_V1 = struct.Struct(">qhqb")
_PRODUCER = struct.Struct(">qhqiqqb")
_BATCH = struct.Struct(">iiqq")


@dataclass(frozen=True, slots=True)
class Snapshot:
    log_end_offset: int
    state: ProducerStateManager
    # How many entries the aborted-transaction indexes held at the clean close (-1: not recorded, version 1):
    # the open trusts the .txnindex files only when they add up to it.
    aborted_entries: int


def encode_snapshot(state: ProducerStateManager, log_end_offset: int, aborted_entries: int = 0) -> bytes:
    parts = [_HEAD.pack(log_end_offset, aborted_entries, len(state.producers))]
    ongoing = state.ongoing_transactions
    for entry in state.producers.values():
        parts.append(_PRODUCER.pack(entry.producer_id, entry.epoch, entry.last_offset, entry.coordinator_epoch,
                                    ongoing.get(entry.producer_id, -1), entry.last_timestamp, len(entry.batches)))  # fmt: skip
        parts.extend(_BATCH.pack(b.first_sequence, b.last_sequence, b.first_offset, b.last_offset) for b in entry.batches)
    body = b"".join(parts)
    return _PREFIX.pack(_MAGIC, _SNAPSHOT_VERSION, crc32c.crc32c(body)) + body


def decode_snapshot(data: bytes) -> Snapshot:
    """The snapshot in ``data``; ValueError saying what is wrong with anything else."""
    if len(data) < _PREFIX.size + _HEAD_V1.size:
        raise ValueError(f"{len(data)} bytes are too short for a snapshot")
    magic, version, crc = _PREFIX.unpack_from(data)
    if magic != _MAGIC:
        raise ValueError(f"not a producer-state snapshot (magic {magic!r})")
    if version not in _READABLE_VERSIONS:
        raise ValueError(f"producer-state snapshot version {version} is unknown (this broker reads versions "
                         f"{', '.join(map(str, _READABLE_VERSIONS))})")  # fmt: skip
    body = memoryview(data)[_PREFIX.size :]
    if crc32c.crc32c(body) != crc:
        raise ValueError("the snapshot fails its CRC check")
    starts: list[tuple[int, int]] = []
    try:
        if version == 1:
            log_end, count = _HEAD_V1.unpack_from(body)
            aborted_entries = -1
            pos = _HEAD_V1.size
        else:
            log_end, aborted_entries, count = _HEAD.unpack_from(body)
            pos = _HEAD.size
        state = ProducerStateManager()
        for _ in range(count):
            if version == 1:
                pid, epoch, last_offset, n = _PRODUCER_V1.unpack_from(body, pos)
                coordinator_epoch, txn_first, last_ts = -1, -1, -1
                pos += _PRODUCER_V1.size
            else:
                pid, epoch, last_offset, coordinator_epoch, txn_first, last_ts, n = _PRODUCER.unpack_from(body, pos)
                pos += _PRODUCER.size
            entry = ProducerEntry(pid, epoch, last_offset=last_offset, coordinator_epoch=coordinator_epoch,
                                  last_timestamp=last_ts)  # fmt: skip
            for _ in range(n):
                entry.batches.append(BatchMetadata(*_BATCH.unpack_from(body, pos)))
                pos += _BATCH.size
            state._producers[pid] = entry
            if txn_first >= 0:
                starts.append((txn_first, pid))
    except struct.error as exc:
        raise ValueError(f"the snapshot is cut short: {exc}") from exc
    if pos != len(body):
        raise ValueError(f"{len(body) - pos} bytes follow the last producer")
    for first, pid in sorted(starts):
        state._ongoing[pid] = first
    return Snapshot(log_end, state, aborted_entries)


def write_snapshot(directory: Path, state: ProducerStateManager, log_end_offset: int, aborted_entries: int = 0) -> None:
    """Atomically, like the checkpoint files; a clean close writes it before the clean-shutdown marker."""
    atomic_write(directory / PRODUCER_SNAPSHOT_FILE, encode_snapshot(state, log_end_offset, aborted_entries))


def read_snapshot(directory: Path) -> Snapshot | str:
    """The snapshot in ``directory``, or why there is none to use."""
    try:
        data = (directory / PRODUCER_SNAPSHOT_FILE).read_bytes()
    except FileNotFoundError:
        return "no snapshot"
    try:
        return decode_snapshot(data)
    except ValueError as exc:
        return f"unusable snapshot: {exc}"


def remove_snapshot(directory: Path) -> None:
    """An open removes the snapshot once read: the log changes from then on, and only the next clean close
    may leave a new one. Not fsynced here: the clean marker's removal right after syncs the directory."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(directory / PRODUCER_SNAPSHOT_FILE)
