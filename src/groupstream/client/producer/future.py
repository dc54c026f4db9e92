"""What ``produce`` returns: a handle on one record's delivery that costs about what a 3-tuple costs.

A record goes into its partition's batch, and its fate is the batch's: every record of a batch is written at
consecutive offsets or none is. So the producer keeps one `BatchOutcome` per batch (one
``concurrent.futures.Future`` resolving to the batch's base offset and log-append time, or failing with the
batch's error) and no object per record. ``produce`` returns a `DeliveryHandle`, a tuple of (outcome, index
in the batch, timestamp), from which a record's `RecordMetadata` is computed when someone asks. A caller that
drops the handle (fire and forget, then ``flush``) has paid for a small tuple and nothing else: no lock, no
condition variable, nothing the garbage collector has to follow while the batch is in flight.

The handle answers what callers ask a Future: ``result``, ``exception``, ``done``, ``add_done_callback``,
``cancelled``/``cancel`` (a produced record cannot be taken back: ``cancel`` returns False, as for a running
future). Code that needs a real ``concurrent.futures.Future`` (``wait``, ``as_completed``) gets one from
``as_future()``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from groupstream.client.producer.record_metadata import RecordMetadata

_new = tuple.__new__


class BatchOutcome:
    """How one batch ended: ``future`` resolves to ``(base_offset, log_append_time)`` (-1 when the broker did not
    say: acks=0, or CreateTime) or fails with the batch's error. A record that never reached a batch (refused
    before, or waiting for metadata) has an outcome of its own, resolved with its own offset."""

    __slots__ = ("future", "partition", "topic")

    def __init__(self, topic: str, partition: int) -> None:
        self.topic = topic
        self.partition = partition
        self.future: Future[tuple[int, int]] = Future()

    def succeed(self, base_offset: int, log_append_time: int) -> None:
        if not self.future.done():
            self.future.set_result((base_offset, log_append_time))

    def fail(self, error: BaseException) -> None:
        if not self.future.done():
            self.future.set_exception(error)


class DeliveryHandle(tuple[BatchOutcome, int, int]):
    """One record's delivery: ``(outcome, index in its batch, timestamp)``. See the module docstring."""

    __slots__ = ()

    @staticmethod
    def make(outcome: BatchOutcome, index: int, timestamp: int) -> DeliveryHandle:
        handle: DeliveryHandle = _new(DeliveryHandle, (outcome, index, timestamp))
        return handle

    def _metadata(self, base_offset: int, log_append_time: int) -> RecordMetadata:
        outcome, index, timestamp = self
        offset = base_offset + index if base_offset >= 0 else -1
        md: RecordMetadata = _new(
            RecordMetadata,
            (
                outcome.topic,
                outcome.partition,
                offset,
                log_append_time if log_append_time >= 0 else timestamp,
            ),
        )
        return md

    def result(self, timeout: float | None = None) -> RecordMetadata:
        """Where the record was written; waits up to ``timeout`` seconds (None: forever) for the broker's
        answer, raising the error the record failed with, or TimeoutError."""
        base, append_time = self[0].future.result(timeout)
        return self._metadata(base, append_time)

    def exception(self, timeout: float | None = None) -> BaseException | None:
        return self[0].future.exception(timeout)

    def done(self) -> bool:
        return self[0].future.done()

    def running(self) -> bool:
        return not self[0].future.done()

    def cancelled(self) -> bool:
        return False

    def cancel(self) -> bool:
        """A record handed to the producer is not taken back: always False."""
        return False

    def add_done_callback(self, fn: Callable[[DeliveryHandle], Any]) -> None:
        """Call ``fn(handle)`` once the record is delivered or failed: at once if it is, else on the producer's
        network thread (keep it short), as ``Future.add_done_callback`` does."""
        self[0].future.add_done_callback(lambda _f: fn(self))

    def as_future(self) -> Future[RecordMetadata]:
        """A ``concurrent.futures.Future`` that settles with this record (for ``wait`` and ``as_completed``)."""
        out: Future[RecordMetadata] = Future()
        out.set_running_or_notify_cancel()

        def settle(f: Future[tuple[int, int]]) -> None:
            error = f.exception()
            if error is not None:
                out.set_exception(error)
            else:
                out.set_result(self._metadata(*f.result()))

        self[0].future.add_done_callback(settle)
        return out

    def __repr__(self) -> str:
        outcome, index, _ts = self
        f = outcome.future
        state = "pending" if not f.done() else ("failed" if f.exception() is not None else "delivered")
        return f"<DeliveryHandle {outcome.topic}-{outcome.partition} #{index} {state}>"


def failed_handle(topic: str, partition: int, timestamp: int, error: BaseException) -> DeliveryHandle:
    """The handle of a record refused before it reached a batch."""
    outcome = BatchOutcome(topic, partition)
    outcome.fail(error)
    return DeliveryHandle.make(outcome, 0, timestamp)


class BulkDelivery:
    """The delivery of the records of one ``produce_batch`` or ``produce_arrow`` call: the outcomes of the
    batches they went into (a handful per call, not one object per record)."""

    __slots__ = ("_outcomes", "count")

    def __init__(self, count: int, outcomes: list[BatchOutcome]) -> None:
        self.count = count
        self._outcomes = outcomes

    def done(self) -> bool:
        return all(o.future.done() for o in self._outcomes)

    def result(self, timeout: float | None = None) -> int:
        """Wait up to ``timeout`` seconds (None: forever) until every record is delivered; returns how many
        there were, or raises the first error a batch of them failed with (or TimeoutError)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for o in self._outcomes:
            o.future.result(None if deadline is None else max(0.0, deadline - time.monotonic()))
        return self.count

    def exception(self, timeout: float | None = None) -> BaseException | None:
        """The first error a batch of these records failed with, or None once all are delivered."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for o in self._outcomes:
            error = o.future.exception(None if deadline is None else max(0.0, deadline - time.monotonic()))
            if error is not None:
                return error
        return None

    def __repr__(self) -> str:
        return f"<BulkDelivery {self.count} records in {len(self._outcomes)} batches{' done' if self.done() else ''}>"
