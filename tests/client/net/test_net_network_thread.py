"""`NetworkThread`: events in, futures out, managers polled, deadlines enforced, closing clean."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future
from typing import Any

import pytest
from net_peers import unused_port
from net_wire import config

from groupstream.client.net.metadata import MetadataCache
from groupstream.client.net.network_client import NetworkClient
from groupstream.client.net.network_thread import (
    ApplicationEvent,
    ClientClosedError,
    CompletableEvent,
    EventTimeoutError,
    NetworkThread,
    monotonic_ms,
)
from groupstream.client.net.requests import ClientResponse, PollResult, UnsentRequest
from groupstream.protocol.messages import by_name
from support.brokers import BrokerProcess
from support.waiting import wait_until

METADATA = by_name("Metadata")


class Echo(CompletableEvent):
    __slots__ = ("value",)

    def __init__(self, value: Any, deadline_ms: int | None = None) -> None:
        super().__init__(deadline_ms)
        self.value = value


class Ignored(CompletableEvent):
    """An event the processor never completes: only its deadline ends it."""


class Boom(ApplicationEvent):
    pass


def processor(event: ApplicationEvent, now_ms: int) -> None:
    if isinstance(event, Echo):
        event.future.set_result((event.value, threading.current_thread().name))
    elif isinstance(event, Boom):
        raise RuntimeError("processor bug")


class AskOnce:
    """A request manager that sends one Metadata request when told to, and records the answer."""

    def __init__(self) -> None:
        self.wanted = False
        self.answer: Future[ClientResponse] = Future()
        self.polls = 0

    def poll(self, now_ms: int) -> PollResult:
        self.polls += 1
        if not self.wanted:
            return PollResult()
        self.wanted = False

        def handle(response: ClientResponse) -> None:
            self.answer.set_result(response)

        return PollResult((UnsentRequest(METADATA, METADATA.Request(topics=[]), handle),), None)


def make_thread(port: int, managers: list[Any] | None = None) -> NetworkThread:
    client = NetworkClient(config(bootstrap_servers=(("127.0.0.1", port),)), MetadataCache(), monotonic_ms)
    return NetworkThread(client, managers or [], processor, name="test-network")


@pytest.fixture
def idle_thread() -> Iterator[NetworkThread]:
    """A thread whose only broker does not exist: after its first metadata attempt it has nothing to do."""
    t = make_thread(unused_port())
    t.start()
    yield t
    t.close(0)


def test_events_are_processed_on_the_network_thread(idle_thread: NetworkThread) -> None:
    value, thread = idle_thread.submit(Echo(42)).result(5)
    assert (value, thread) == (42, "test-network")


def test_a_new_event_wakes_a_loop_that_would_otherwise_sleep(idle_thread: NetworkThread) -> None:
    wait_until(lambda: idle_thread.client.sleeping, 5, "the loop to settle into its wait", interval_s=0.001)
    started = time.monotonic()
    idle_thread.submit(Echo(1)).result(5)
    assert (
        time.monotonic() - started < 1.0
    )  # the refused broker backs off for 1 s at most: this was the wakeup


def test_overdue_events_fail_with_a_timeout(idle_thread: NetworkThread) -> None:
    event = Ignored(deadline_ms=monotonic_ms() + 200)
    start = time.monotonic()
    with pytest.raises(EventTimeoutError, match="Ignored did not complete in time"):
        idle_thread.submit(event).result(5)
    assert time.monotonic() - start >= 0.19


def test_a_processor_error_fails_that_events_future_only(idle_thread: NetworkThread) -> None:
    class Bad(CompletableEvent):
        pass

    def failing(event: ApplicationEvent, now_ms: int) -> None:
        raise ValueError("nope")

    idle_thread._processor = failing
    with pytest.raises(ValueError, match="nope"):
        idle_thread.submit(Bad()).result(5)
    idle_thread._processor = processor
    assert idle_thread.submit(Echo(2)).result(5)[0] == 2


def test_close_fails_waiting_events_and_refuses_new_ones() -> None:
    t = make_thread(unused_port())
    t.start()
    pending = t.submit(Ignored())
    t.close(0)
    assert not t.alive
    with pytest.raises(ClientClosedError):
        pending.result(5)
    with pytest.raises(ClientClosedError):
        t.submit(Echo(3)).result(5)


def test_a_broken_loop_stops_and_says_why() -> None:
    t = make_thread(unused_port())
    t.start()
    waiting = t.submit(Ignored())
    t.add_event(Boom())
    with pytest.raises(ClientClosedError, match="processor bug"):
        waiting.result(5)
    assert isinstance(t.failure, RuntimeError)
    t.close(0)


def test_managers_are_polled_and_their_requests_answered(broker: BrokerProcess) -> None:
    manager = AskOnce()
    t = make_thread(broker.port, [manager])
    t.start()
    try:
        manager.wanted = True
        t.wakeup()
        response = manager.answer.result(15)
        assert response.error is None and response.body.brokers
        assert manager.polls >= 1
    finally:
        t.close(1000)


def test_close_waits_for_managers_with_pending_work(groupstream_broker: BrokerProcess) -> None:
    class Drains(AskOnce):
        def __init__(self) -> None:
            super().__init__()
            self.closing_at: int | None = None

        def begin_close(self, now_ms: int) -> None:
            self.closing_at = now_ms
            self.wanted = True  # one last request that closing must let finish

        def has_pending_work(self) -> bool:
            return not self.answer.done()

        def fail_pending(self, error: BaseException) -> None:
            if not self.answer.done():
                self.answer.set_exception(error)

    manager = Drains()
    t = make_thread(groupstream_broker.port, [manager])
    t.start()
    t.close(10_000)
    assert manager.closing_at is not None
    assert manager.answer.result(0).error is None
