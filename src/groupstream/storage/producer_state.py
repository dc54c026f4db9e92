"""Idempotent-producer state of one partition: per producer id, its epoch and its last five batches.

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

from groupstream.protocol.records.batch_header import NO_PRODUCER_ID, NO_SEQUENCE, BatchHeader, iter_batches
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

    def copy(self) -> ProducerEntry:
        return ProducerEntry(self.producer_id, self.epoch, deque(self.batches, maxlen=BATCHES_RETAINED), self.last_offset)

    def snapshot(self) -> tuple[int, int, tuple[BatchMetadata, ...], int]:
        return (self.producer_id, self.epoch, tuple(self.batches), self.last_offset)


def next_sequence(sequence: int) -> int:
    return 0 if sequence == INT32_MAX else sequence + 1


class ProducerStateManager:
    def __init__(self) -> None:
        self._producers: dict[int, ProducerEntry] = {}

    def __len__(self) -> int:
        return len(self._producers)

    def __iter__(self) -> Iterator[int]:
        return iter(self._producers)

    def get(self, producer_id: int) -> ProducerEntry | None:
        return self._producers.get(producer_id)

    @property
    def producers(self) -> Mapping[int, ProducerEntry]:
        return self._producers

    def snapshot(self) -> dict[int, tuple[int, int, tuple[BatchMetadata, ...], int]]:
        """A value copy, for comparing a live state with a rebuilt one."""
        return {pid: e.snapshot() for pid, e in self._producers.items()}

    # -- the rules ---------------------------------------------------------------------------------------

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
    ) -> None:
        """Record an appended batch. Trusts the caller: ``check`` accepted it, or it is already in the log."""
        if producer_id == NO_PRODUCER_ID:
            return
        entry = self._producers.get(producer_id)
        if entry is None or epoch > entry.epoch:
            entry = ProducerEntry(producer_id, epoch)
            self._producers[producer_id] = entry
        if base_sequence != NO_SEQUENCE:
            entry.batches.append(BatchMetadata(base_sequence, last_sequence, base_offset, last_offset))
        entry.last_offset = max(entry.last_offset, last_offset)

    # -- batch-level conveniences ------------------------------------------------------------------------

    def check_header(self, h: BatchHeader) -> CheckResult:
        return self.check(h.producer_id, h.producer_epoch, h.base_sequence, h.last_sequence)

    def observe(self, h: BatchHeader) -> None:
        """``update`` from a header whose offsets are final (a batch in the log)."""
        self.update(h.producer_id, h.producer_epoch, h.base_sequence, h.last_sequence, h.base_offset, h.last_offset)

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
        """Forget producers none of whose batches remain at or above the log start offset."""
        gone = [pid for pid, e in self._producers.items() if e.last_offset < log_start_offset]
        for pid in gone:
            del self._producers[pid]

    def clear(self) -> None:
        self._producers.clear()


# -- snapshot file -------------------------------------------------------------------------------------------
#
# Big-endian: magic "GSPS", version u16, CRC-32C u32 of everything after it; then the log end offset the state
# belongs to (i64), the number of producers (i32), and per producer: id i64, epoch i16, last offset i64, the
# number of retained batches i8, and per batch: first sequence i32, last sequence i32, first offset i64, last
# offset i64.

_MAGIC = b"GSPS"
_SNAPSHOT_VERSION = 1
_PREFIX = struct.Struct(">4sHI")
_HEAD = struct.Struct(">qi")
_PRODUCER = struct.Struct(">qhqb")
_BATCH = struct.Struct(">iiqq")


def encode_snapshot(state: ProducerStateManager, log_end_offset: int) -> bytes:
    parts = [_HEAD.pack(log_end_offset, len(state.producers))]
    for entry in state.producers.values():
        parts.append(_PRODUCER.pack(entry.producer_id, entry.epoch, entry.last_offset, len(entry.batches)))
        parts.extend(_BATCH.pack(b.first_sequence, b.last_sequence, b.first_offset, b.last_offset) for b in entry.batches)
    body = b"".join(parts)
    return _PREFIX.pack(_MAGIC, _SNAPSHOT_VERSION, crc32c.crc32c(body)) + body


def decode_snapshot(data: bytes) -> tuple[int, ProducerStateManager]:
    """``(log end offset, state)``; ValueError saying what is wrong with anything else."""
    if len(data) < _PREFIX.size + _HEAD.size:
        raise ValueError(f"{len(data)} bytes are too short for a snapshot")
    magic, version, crc = _PREFIX.unpack_from(data)
    if magic != _MAGIC or version != _SNAPSHOT_VERSION:
        raise ValueError(f"not a version {_SNAPSHOT_VERSION} producer-state snapshot (magic {magic!r}, version {version})")
    body = memoryview(data)[_PREFIX.size :]
    if crc32c.crc32c(body) != crc:
        raise ValueError("the snapshot fails its CRC check")
    try:
        log_end, count = _HEAD.unpack_from(body)
        pos = _HEAD.size
        state = ProducerStateManager()
        for _ in range(count):
            pid, epoch, last_offset, n = _PRODUCER.unpack_from(body, pos)
            pos += _PRODUCER.size
            entry = ProducerEntry(pid, epoch, last_offset=last_offset)
            for _ in range(n):
                entry.batches.append(BatchMetadata(*_BATCH.unpack_from(body, pos)))
                pos += _BATCH.size
            state._producers[pid] = entry
    except struct.error as exc:
        raise ValueError(f"the snapshot is cut short: {exc}") from exc
    if pos != len(body):
        raise ValueError(f"{len(body) - pos} bytes follow the last producer")
    return log_end, state


def write_snapshot(directory: Path, state: ProducerStateManager, log_end_offset: int) -> None:
    """Atomically, like the checkpoint files; a clean close writes it before the clean-shutdown marker."""
    atomic_write(directory / PRODUCER_SNAPSHOT_FILE, encode_snapshot(state, log_end_offset))


def read_snapshot(directory: Path) -> tuple[int, ProducerStateManager] | str:
    """The snapshot in ``directory`` as ``(log end offset, state)``, or why there is none to use."""
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
