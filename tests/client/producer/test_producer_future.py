"""`DeliveryHandle` answers what callers ask a ``concurrent.futures.Future``, computed from its batch's outcome;
`BulkDelivery` covers the batches of one bulk call."""

from __future__ import annotations

import threading
from concurrent.futures import FIRST_COMPLETED, Future, as_completed, wait

import pytest

from groupstream.client.producer import RecordMetadata
from groupstream.client.producer.future import BatchOutcome, BulkDelivery, DeliveryHandle, failed_handle


def later(fn: object, *args: object) -> threading.Thread:
    t = threading.Thread(target=fn, args=args)  # type: ignore[arg-type]
    t.start()
    return t


def test_each_record_of_a_batch_gets_its_own_offset_and_timestamp() -> None:
    outcome = BatchOutcome("t", 3)
    handles = [DeliveryHandle.make(outcome, i, 1_000 + i) for i in range(3)]
    assert not any(h.done() for h in handles) and all(h.running() for h in handles)
    outcome.succeed(40, -1)
    assert [h.result(0) for h in handles] == [RecordMetadata("t", 3, 40 + i, 1_000 + i) for i in range(3)]
    assert all(h.done() and h.exception(0) is None for h in handles)


def test_log_append_time_and_acks_zero() -> None:
    appended = BatchOutcome("t", 0)
    appended.succeed(7, 5_555)  # the broker's time replaces every record's own
    assert DeliveryHandle.make(appended, 1, 1).result(0) == RecordMetadata("t", 0, 8, 5_555)
    unknown = BatchOutcome("t", 0)
    unknown.succeed(-1, -1)  # acks=0: the broker says nothing
    assert DeliveryHandle.make(unknown, 2, 9).result(0) == RecordMetadata("t", 0, -1, 9)


def test_a_waiting_thread_is_woken_and_a_timeout_raises() -> None:
    outcome = BatchOutcome("t", 0)
    handle = DeliveryHandle.make(outcome, 0, 1)
    with pytest.raises(TimeoutError):
        handle.result(0.01)
    ready = threading.Event()
    got: list[RecordMetadata] = []

    def waiter() -> None:
        ready.set()
        got.append(handle.result(10))

    t = later(waiter)
    ready.wait(5)
    outcome.succeed(0, -1)  # whether or not the waiter already blocked, it must see this
    t.join(10)
    assert got == [RecordMetadata("t", 0, 0, 1)]


def test_failures_callbacks_and_helpers() -> None:
    outcome = BatchOutcome("t", 1)
    handle = DeliveryHandle.make(outcome, 0, 1)
    seen: list[object] = []
    handle.add_done_callback(lambda h: seen.append((h, h.exception())))
    err = ValueError("x")
    t = later(outcome.fail, err)
    with pytest.raises(ValueError):
        handle.result(10)
    t.join()
    assert seen == [(handle, err)] and handle.exception(0) is err
    outcome.succeed(5, -1)  # a second verdict is ignored
    assert handle.exception(0) is err
    late: list[object] = []
    handle.add_done_callback(late.append)  # already done: runs at once
    assert late == [handle]
    refused = failed_handle("t", -1, 3, KeyError("k"))
    assert refused.done() and isinstance(refused.exception(0), KeyError)


def test_as_future_for_wait_and_as_completed() -> None:
    slow, fast = BatchOutcome("t", 0), BatchOutcome("t", 1)
    g, h = DeliveryHandle.make(slow, 0, 1).as_future(), DeliveryHandle.make(fast, 2, 1).as_future()
    assert isinstance(g, Future)
    t = later(fast.succeed, 10, -1)
    done, _ = wait([g, h], 10, return_when=FIRST_COMPLETED)
    t.join()
    assert done == {h} and h.result(0).offset == 12
    slow.fail(RuntimeError("gone"))
    assert {type(x.exception()) for x in as_completed([g, h], 10)} == {RuntimeError, type(None)}


def test_a_produced_record_cannot_be_cancelled() -> None:
    handle = DeliveryHandle.make(BatchOutcome("t", 0), 0, 1)
    assert not handle.cancel() and not handle.cancelled() and not handle.done()


def test_bulk_delivery_waits_for_every_batch_and_reports_the_first_error() -> None:
    a, b = BatchOutcome("t", 0), BatchOutcome("t", 1)
    bulk = BulkDelivery(5, [a, b])
    a.succeed(0, -1)
    assert not bulk.done()
    with pytest.raises(TimeoutError):
        bulk.result(0.01)
    b.fail(OSError("disk"))
    assert bulk.done() and isinstance(bulk.exception(0), OSError)
    with pytest.raises(OSError):
        bulk.result(0)
    ok = BulkDelivery(2, [a])
    assert ok.result(0) == 2 and ok.exception(0) is None
    assert BulkDelivery(0, []).result(0) == 0
