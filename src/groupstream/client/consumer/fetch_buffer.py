"""The one structure the application thread and the network thread share (seed 002's fetch buffer).

It holds, per assigned partition, the records fetched and not yet returned, the position (the offset of the
next record ``poll`` returns), the fetch position (where the next fetch starts: the position plus what is
buffered), and whether the application paused it. The network thread fills it and changes the assignment; the
application thread drains it in ``poll`` and moves positions (``seek``). Everything is under one lock, and
the rules that keep records from being returned wrongly live here, in one place:

- a fetch is kept only if it starts exactly at the partition's fetch position when it arrives, so a fetch sent
  before a ``seek``, a reset or a reassignment is dropped;
- records of a partition no longer assigned are gone with it (revoked or lost partitions are removed before
  their rebalance callback runs), and records of a paused partition stay buffered but are not returned until it
  is resumed (KIP-822: a partition that stays assigned across a rebalance keeps its pause and its buffer);
- ``poll`` returns the records of one partition in offset order and moves its position past them.

Records are decoded by ``poll``, not by the network thread: a fetch arrives as its checked batches (header and
CRC, transactions filtered) and ``drain`` decodes them as it needs records, as Java's fetch collector does. So the
network thread sends the next fetch as soon as a response is in, and the broker prepares it while the
application decodes. A batch that does not decode stops ``drain`` there: the records before it are returned,
the error is raised by the next ``poll``, and the partition is fetched again from its position. ``poll_arrow``
(``drain_arrow``) decodes a fetch once, whole, into an Arrow record batch and hands out slices of it, so its
cost per call does not depend on how small ``max.poll.records`` cuts the fetch.

A drain that makes a partition fetchable again wakes the network thread (``on_room``), which sends the next
fetch while the application works on what it got: waiting for the next ``poll`` to say so left the connection
idle for the length of one application step per fetch.

Application-thread tasks (rebalance callbacks, commit callbacks) and errors for the application are queued
here too, so a ``poll`` that waits for records wakes for them.
"""

from __future__ import annotations

import threading
import time
from bisect import bisect_right
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from groupstream.assignment.types import TopicPartition
from groupstream.client.consumer.records import ConsumerRecord, batch_records
from groupstream.protocol.records import RecordBatch

__all__ = ["AppTask", "CompletedFetch", "FetchBuffer"]

AppTask = Callable[[], None]
JOIN_MAX_BYTES = 256 * 1024


@dataclass(slots=True)
class CompletedFetch:
    """One partition's share of a Fetch response from ``fetch_offset`` on: ``records`` decoded (from ``index``
    on), then ``batches`` that ``drain`` decodes when it gets to them (from ``batch_index`` on). ``poll_arrow``
    decodes what is left of it at once into ``arrow`` (an Arrow record batch, handed out in slices from
    ``arrow_index`` on, ``arrow_offsets`` being its offset column), so that what a call costs follows the
    rows it returns, not the calls: one column build per fetch, however many slices ``max.poll.records`` cuts."""

    tp: TopicPartition
    fetch_offset: int
    records: list[ConsumerRecord]
    next_offset: int
    index: int = 0
    batches: Sequence[RecordBatch] = ()
    batch_index: int = 0
    pending: int = 0
    """Records in the batches not decoded yet (by their headers: those below ``fetch_offset`` count too)."""
    arrow: Any = None
    arrow_offsets: Sequence[int] = ()
    arrow_ends: Sequence[int] = ()
    """Where each batch's rows end in ``arrow`` (increasing, the last is ``arrow_rows``)."""
    arrow_index: int = 0
    arrow_rows: int = 0
    arrow_bytes: int = 0

    def remaining(self) -> int:
        return len(self.records) - self.index + self.pending + self.arrow_rows - self.arrow_index

    def has_more(self) -> bool:
        return self.arrow_index < self.arrow_rows or self.undecoded()

    def undecoded(self) -> bool:
        """Whether records or batches are left that are not in ``arrow``."""
        return self.index < len(self.records) or self.batch_index < len(self.batches)

    def decode_next(self) -> None:
        """Replace the (used up) records by those of the next batch."""
        batch = self.batches[self.batch_index]
        self.batch_index += 1
        self.pending -= batch.header.records_count
        self.records = batch_records(self.tp.topic, self.tp.partition, batch, self.fetch_offset)
        self.index = 0

    def started(self) -> bool:
        """Whether a drain took some of it already."""
        return self.index > 0 or self.batch_index > 0 or self.arrow_index > 0

    def set_arrow(self, rows: Any, offsets: Sequence[int], ends: Sequence[int]) -> None:
        self.arrow, self.arrow_offsets, self.arrow_ends = rows, offsets, ends
        self.arrow_index, self.arrow_rows = 0, len(offsets)
        self.arrow_bytes = rows.get_total_buffer_size() if rows is not None else 0

    def arrow_end(self, budget: int, first: bool) -> int:
        """Where the next slice of at most ``budget`` rows ends: at a batch's end (a batch is not cut: the
        old rule of ``poll_arrow``, which a caller's per-call work makes worth keeping), or, for the ``first``
        slice of a call, at the end of the batch it starts in if that one alone is more than ``budget``.
        Returns ``arrow_index`` when nothing fits."""
        i = self.arrow_index
        end = i + budget
        if end >= self.arrow_rows:
            return self.arrow_rows
        ends = self.arrow_ends
        k = bisect_right(ends, end)
        if k and ends[k - 1] > i:
            return ends[k - 1]
        return ends[k] if first else i

    def arrow_to_records(self) -> None:
        """``poll`` after ``poll_arrow`` decoded this fetch (an application that mixes them): the rows not
        returned yet become records again, ahead of the batches not decoded."""
        from groupstream.client.consumer.arrow import arrow_records

        rest = arrow_records(self.arrow.slice(self.arrow_index))
        self.records, self.index = rest + self.records[self.index :], 0
        self.set_arrow(None, (), ())


@dataclass(slots=True)
class _Partition:
    position: int | None = None
    fetch_position: int | None = None
    paused: bool = False
    in_flight: bool = False
    fetches: deque[CompletedFetch] = field(default_factory=deque)

    def buffered(self) -> int:
        return sum(f.remaining() for f in self.fetches)


class FetchBuffer:
    PREFETCH_FETCHES = 2
    """A partition is fetched again while it holds fewer completed fetches than this (or fewer records than
    ``fetchable`` is given): one to drain, one arriving meanwhile, so that a fetch carries most partitions
    and not only the one just emptied (at most two fetches' bytes a partition in memory, as Java's consumer
    with one buffered and one in flight)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._parts: dict[TopicPartition, _Partition] = {}
        self._tasks: deque[AppTask] = deque()
        self._errors: deque[BaseException] = deque()
        self._woken = False
        self._wakeup_deferred = False
        self._rotation = 0
        self._resume: _Partition | None = None
        self._resume_at = 0
        self._prefetch_below = 1
        self.on_room: Callable[[], None] | None = None
        """Called (outside the lock) when a drain made a partition fetchable again: wakes the network thread."""

    # --- assignment (network thread) ---------------------------------------------------------------------

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Own exactly ``partitions``: those that stay keep position, buffer and pause; new ones start with no
        position; the rest are dropped with their buffered records."""
        wanted = set(partitions)
        with self._cond:
            self._parts = {tp: self._parts.get(tp) or _Partition() for tp in sorted(wanted)}

    def remove(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """Drop ``partitions`` (revoked or lost); returns their positions, what a revocation commits."""
        out: dict[TopicPartition, int] = {}
        with self._cond:
            for tp in partitions:
                part = self._parts.pop(tp, None)
                if part is not None and part.position is not None:
                    out[tp] = part.position
        return out

    def assignment(self) -> frozenset[TopicPartition]:
        with self._cond:
            return frozenset(self._parts)

    # --- positions -------------------------------------------------------------------------------------------

    def seek(self, tp: TopicPartition, offset: int, expected: int | None = None, only_unset: bool = False) -> bool:
        """Move ``tp`` to ``offset`` and drop its buffered records. With ``only_unset`` only a partition with
        no position yet moves; with ``expected`` only one whose fetch position is still that (an offset reset
        that a ``seek`` overtook must not undo it). Returns whether it moved."""
        with self._cond:
            part = self._parts.get(tp)
            if part is None or (only_unset and part.position is not None):
                return False
            if expected is not None and part.fetch_position != expected:
                return False
            part.position = part.fetch_position = offset
            part.fetches.clear()
            self._cond.notify_all()
            return True

    def positions(self, partitions: Iterable[TopicPartition] | None = None) -> dict[TopicPartition, int]:
        with self._cond:
            items = self._parts.items() if partitions is None else ((tp, self._parts.get(tp)) for tp in partitions)
            return {tp: p.position for tp, p in items if p is not None and p.position is not None}

    def position(self, tp: TopicPartition) -> int | None:
        with self._cond:
            part = self._parts.get(tp)
            return None if part is None else part.position

    def missing_positions(self) -> list[TopicPartition]:
        with self._cond:
            return [tp for tp, p in self._parts.items() if p.position is None]

    # --- pause (application thread) ------------------------------------------------------------------------

    def set_paused(self, partitions: Iterable[TopicPartition], paused: bool) -> list[TopicPartition]:
        """Returns the partitions given that are not assigned (an error for the caller)."""
        unknown = []
        with self._cond:
            for tp in partitions:
                part = self._parts.get(tp)
                if part is None:
                    unknown.append(tp)
                else:
                    part.paused = paused
            self._cond.notify_all()
        return unknown

    def paused(self) -> frozenset[TopicPartition]:
        with self._cond:
            return frozenset(tp for tp, p in self._parts.items() if p.paused)

    # --- fetching (network thread) -------------------------------------------------------------------------

    def fetchable(
        self,
        max_buffered_records: int,
        hold: Callable[[list[tuple[TopicPartition, int]], list[TopicPartition]], set[TopicPartition]] | None = None,
    ) -> list[tuple[TopicPartition, int]]:
        """Partitions to fetch now, with their fetch positions: assigned, not paused, with a position, no fetch
        in flight, and fewer than ``max_buffered_records`` buffered (prefetch). They are marked in flight.
        ``hold(candidates, full)`` may leave some candidates for later, knowing which partitions are left out
        because their buffer is full."""
        out = []
        full = []
        with self._cond:
            self._prefetch_below = max_buffered_records
            for tp, p in self._parts.items():
                if p.paused or p.in_flight or p.fetch_position is None:
                    continue
                if self._full(p):
                    full.append(tp)
                    continue
                out.append((tp, p.fetch_position))
            if hold is not None and full and out:
                held = hold(out, full)
                out = [c for c in out if c[0] not in held]
            for tp, _ in out:
                self._parts[tp].in_flight = True
        return out

    def fetch_done(self, fetch: CompletedFetch, *, defer_wakeup: bool = False) -> bool:
        """A fetch came back: keep it if it still starts at the partition's fetch position. With
        ``defer_wakeup`` a waiting ``poll`` is woken by the next ``wake_pollers`` instead of now: the network
        thread sends its next fetch first, so the application thread, which then takes the GIL to decode, does
        not hold that fetch back."""
        with self._cond:
            part = self._parts.get(fetch.tp)
            if part is None:
                return False
            part.in_flight = False
            if part.fetch_position != fetch.fetch_offset:
                return False
            part.fetch_position = fetch.next_offset
            if fetch.has_more():
                part.fetches.append(fetch)
                if defer_wakeup:
                    self._wakeup_deferred = True
                else:
                    self._cond.notify_all()
            elif fetch.next_offset > fetch.fetch_offset:  # only control records or a gap: no record for poll
                if part.fetches:
                    part.fetches.append(fetch)  # drain moves the position past it once it gets there
                elif part.position == fetch.fetch_offset:
                    part.position = fetch.next_offset
            return True

    def wake_pollers(self) -> None:
        """Wake a ``poll`` waiting for the records that ``fetch_done(defer_wakeup=True)`` kept."""
        if self._wakeup_deferred:
            with self._cond:
                self._wakeup_deferred = False
                self._cond.notify_all()

    def fetch_failed(self, tp: TopicPartition) -> None:
        with self._cond:
            part = self._parts.get(tp)
            if part is not None:
                part.in_flight = False

    def fetch_position(self, tp: TopicPartition) -> int | None:
        with self._cond:
            part = self._parts.get(tp)
            return None if part is None else part.fetch_position

    # --- tasks and errors for the application thread ---------------------------------------------------------

    def add_task(self, task: AppTask) -> None:
        with self._cond:
            self._tasks.append(task)
            self._cond.notify_all()

    def add_error(self, error: BaseException) -> None:
        with self._cond:
            self._errors.append(error)
            self._cond.notify_all()

    def take_tasks(self) -> list[AppTask]:
        with self._cond:
            tasks = list(self._tasks)
            self._tasks.clear()
            return tasks

    def take_error(self) -> BaseException | None:
        with self._cond:
            return self._errors.popleft() if self._errors else None

    def wakeup(self) -> None:
        """Make a waiting ``poll`` return (``Consumer.wakeup``, close)."""
        with self._cond:
            self._woken = True
            self._cond.notify_all()

    # --- draining (application thread) -----------------------------------------------------------------------

    def wait(self, timeout_s: float) -> bool:
        """Wait until records, a task or an error are there, or a wakeup, at most ``timeout_s``. Returns whether
        it was woken by ``wakeup`` (and clears that)."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while not (self._woken or self._tasks or self._errors or self._has_records()):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._cond.wait(remaining)
            woken, self._woken = self._woken, False
            return woken

    def nudge(self) -> None:
        """Wake waiters to look again (a blocking call's result arrived); unlike ``wakeup`` it makes no
        ``poll`` raise."""
        with self._cond:
            self._cond.notify_all()

    def wait_tasks(self, timeout_s: float, done: Callable[[], bool]) -> None:
        """Wait (at most ``timeout_s``) until ``done()``, or a task or an error is there, not for records: how a
        blocking call waits for its result while it keeps running callbacks."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while not (done() or self._tasks or self._errors):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return
                self._cond.wait(remaining)

    def wait_position(self, tp: TopicPartition, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while not self._tasks and not self._errors:
                part = self._parts.get(tp)
                if part is None or part.position is not None:
                    return
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return
                self._cond.wait(remaining)

    def _has_records(self) -> bool:
        return any(p.fetches and not p.paused for p in self._parts.values())

    def has_work(self) -> bool:
        with self._cond:
            return bool(self._tasks or self._errors or self._has_records())

    def drain(self, max_records: int) -> list[ConsumerRecord]:
        """Up to ``max_records`` records, partition by partition (in the order of ``_rotated``), moving each
        partition's position past what it returns. Batches
        are decoded here, as far as needed; one that does not decode ends the drain (see the module doc)."""
        out: list[ConsumerRecord] = []
        room = failed = False
        taken = 0
        with self._cond:
            for part, was_full in self._drainable():
                while part.fetches and taken < max_records:
                    fetch = part.fetches[0]
                    if fetch.arrow_index < fetch.arrow_rows:
                        fetch.arrow_to_records()
                    records, index = fetch.records, fetch.index
                    if index >= len(records) and fetch.batch_index < len(fetch.batches):
                        try:
                            fetch.decode_next()
                        except Exception as e:  # a corrupt batch: what came before it is returned, then e
                            self._corrupt(part, e)
                            failed = True
                            break
                        continue
                    take = min(max_records - taken, len(records) - index)
                    if take:
                        out.extend(records if index == 0 and take == len(records) else records[index : index + take])
                        taken += take
                        fetch.index = index = index + take
                    if index >= len(records) and fetch.batch_index >= len(fetch.batches):
                        part.fetches.popleft()
                        part.position = fetch.next_offset  # past trailing control records and gaps too
                    elif take:
                        part.position = records[index - 1].offset + 1
                room = room or self._made_room(part, was_full)
                if taken >= max_records or failed:
                    break
            self._finish_drain()
        if room and self.on_room is not None:
            self.on_room()
        return out

    def drain_arrow(self, max_records: int, decode: Callable[[CompletedFetch], None]) -> list[Any]:
        """Up to ``max_records`` rows as Arrow record batches (slices of each fetch's ``arrow``, which
        ``decode`` builds once per fetch), partition by partition as ``drain`` goes, moving positions past
        exactly the rows returned. A batch is not cut: the drain stops before one that does not fit, or
        takes it whole when it is the first (so ``max_records`` may be passed by less than one batch, as
        before; at 500 records a call, the default, cutting 100-byte records' batches cost a third of the
        throughput in calls). It stops before a second slice once it holds half of ``max_records`` or
        ``JOIN_MAX_BYTES``: one slice is handed out as it is, several are copied into one batch (pyarrow's
        ``concat_batches`` copied 10 KB values at about 225 MB/s here). ``decode`` raises for a batch that
        does not decode when no row came before it; rows before such a batch are returned first, and the
        error is raised by the next ``poll`` (as ``drain`` does)."""
        out: list[Any] = []
        room = failed = False
        taken = joined = 0
        half = (max_records + 1) // 2
        with self._cond:
            for part, was_full in self._drainable():
                while part.fetches and taken < half and joined < JOIN_MAX_BYTES:
                    fetch = part.fetches[0]
                    if fetch.arrow_index >= fetch.arrow_rows and fetch.undecoded():
                        try:
                            decode(fetch)
                        except Exception as e:
                            self._corrupt(part, e)
                            failed = True
                            break
                    i, rows = fetch.arrow_index, fetch.arrow_rows
                    take = fetch.arrow_end(max_records - taken, not out) - i
                    if not take and i < rows:
                        break  # the next batch does not fit
                    if take:
                        out.append(fetch.arrow if take == rows else fetch.arrow.slice(i, take))
                        taken += take
                        joined += fetch.arrow_bytes * take // rows
                        fetch.arrow_index = i = i + take
                    if i >= rows and not fetch.undecoded():
                        part.fetches.popleft()
                        part.position = fetch.next_offset  # past trailing control records and gaps too
                    elif take:
                        part.position = fetch.arrow_offsets[i - 1] + 1
                room = room or self._made_room(part, was_full)
                if taken >= half or joined >= JOIN_MAX_BYTES or failed:
                    break
            self._finish_drain()
        if room and self.on_room is not None:
            self.on_room()
        return out

    def _rotated(self) -> list[_Partition]:
        """The partitions in the order a drain visits them: from the one whose fetch the last drain left
        part-way (Java's "next in line" fetch), else from one further on than last time. So one busy
        partition cannot starve the others, and partitions run dry one after another, each fetched again
        while the next is drained, not all at once (as taking a slice of each in turn would have them)."""
        items = list(self._parts.values())
        if not items:
            return items
        start = self._rotation if self._resume is not None else self._rotation + 1
        self._rotation = start % len(items)
        self._resume = None
        return items[self._rotation :] + items[: self._rotation]

    def _drainable(self) -> Iterator[tuple[_Partition, bool]]:
        """The partitions a drain takes from, in ``_rotated`` order (paused and empty ones left out), each with
        whether its buffer was full before the drain (for ``_made_room``)."""
        for k, part in enumerate(self._rotated()):
            if part.paused or not part.fetches:
                continue
            was_full = self._full(part)
            self._stay_at(k, part)
            yield part, was_full

    def _stay_at(self, k: int, part: _Partition) -> None:
        """Called with the ``k``-th partition of ``_rotated`` as a drain takes from it: the next drain starts
        there again if this one leaves its first fetch part-way (see ``_finish_drain``)."""
        self._resume = part
        self._resume_at = self._rotation + k

    def _finish_drain(self) -> None:
        part = self._resume
        if part is not None and part.fetches and part.fetches[0].started():
            self._rotation = self._resume_at
        else:
            self._resume = None

    def _corrupt(self, part: _Partition, error: Exception) -> None:
        """A batch that does not decode: the rest of the fetch is dropped, the partition is fetched again from
        its position, and the next ``poll`` raises ``error``."""
        part.fetches.clear()
        part.fetch_position = part.position
        self._errors.append(error)

    def _full(self, part: _Partition) -> bool:
        """Whether ``part`` holds enough not to be fetched now: ``PREFETCH_FETCHES`` fetches or more, with at
        least ``max_buffered_records`` (as ``fetchable`` was last called) among them."""
        return len(part.fetches) >= self.PREFETCH_FETCHES and part.buffered() >= self._prefetch_below

    def _made_room(self, part: _Partition, was_full: bool) -> bool:
        """Whether this drain made ``part`` fetchable again: then the network thread is woken to send its
        next fetch now, while the application works on what it got, not at the next ``poll`` (Java's
        consumer, too, sends its next fetches before ``poll`` returns)."""
        return was_full and not part.in_flight and part.fetch_position is not None and not self._full(part)
