"""`DeliveryFuture` behaves as a ``concurrent.futures.Future`` in every way callers use one."""

from __future__ import annotations

import threading
from concurrent.futures import FIRST_COMPLETED, CancelledError, Future, InvalidStateError, as_completed, wait

import pytest

from groupstream.client.producer.future import DeliveryFuture


def later(fn: object, *args: object) -> threading.Thread:
    t = threading.Thread(target=fn, args=args)  # type: ignore[arg-type]
    t.start()
    return t


def test_is_a_future_and_settles_without_waiters() -> None:
    f: DeliveryFuture[int] = DeliveryFuture()
    assert isinstance(f, Future) and not f.done()
    f.set_result(3)
    assert f.done() and f.result(0) == 3 and f.exception(0) is None
    with pytest.raises(InvalidStateError):
        f.set_result(4)
    with pytest.raises(InvalidStateError):
        f.set_exception(ValueError())


def test_a_waiting_thread_is_woken() -> None:
    f: DeliveryFuture[int] = DeliveryFuture()
    ready = threading.Event()
    got: list[int] = []

    def waiter() -> None:
        ready.set()
        got.append(f.result(10))

    t = later(waiter)
    ready.wait(5)
    f.set_result(5)  # whether or not the waiter already blocked, it must see this
    t.join(10)
    assert got == [5]


def test_exceptions_callbacks_and_helpers() -> None:
    f: DeliveryFuture[int] = DeliveryFuture()
    seen: list[object] = []
    f.add_done_callback(lambda fut: seen.append(fut.exception()))
    err = ValueError("x")
    t = later(f.set_exception, err)
    with pytest.raises(ValueError):
        f.result(10)
    t.join()
    assert seen == [err]
    g: DeliveryFuture[int] = DeliveryFuture()
    h: DeliveryFuture[int] = DeliveryFuture()
    t = later(h.set_result, 1)
    done, _ = wait([g, h], 10, return_when=FIRST_COMPLETED)
    t.join()
    assert done == {h}
    g.set_result(2)
    assert {x.result() for x in as_completed([g, h], 10)} == {1, 2}
    late: list[int] = []
    g.add_done_callback(lambda fut: late.append(fut.result()))  # already done: runs at once
    assert late == [2]


def test_cancel() -> None:
    f: DeliveryFuture[int] = DeliveryFuture()
    assert f.cancel() and f.cancelled()
    with pytest.raises(CancelledError):
        f.result(0)
    with pytest.raises(InvalidStateError):
        f.set_result(1)
    g: DeliveryFuture[int] = DeliveryFuture()
    g.set_result(1)
    assert not g.cancel()
