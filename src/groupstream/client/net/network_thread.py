"""The background network thread of the Producer and the Consumer, generic over what each client needs.

The thread rule: a `NetworkClient`, its metadata cache and the request managers polled with it belong to one
thread. Here that is this network thread; application threads hand it events through a thread-safe queue
(``add_event``/``submit``) and wait on futures, and a wakeup byte makes a new event interrupt the selector wait.
Two things are shared on purpose and guarded by their own lock: the producer's accumulator, into which
application threads append records themselves (as Java's ``RecordAccumulator`` does), and the consumer's fetch
buffer, from which ``poll`` takes. A blocking caller that has nothing else to do while it waits (the Admin, the
CLI) drives its own `NetworkClient` on its own thread instead (`SyncClient`): the same rule, another owner.
One loop iteration:

1. drain the application event queue, handing each event to the client's processor;
2. poll every request manager (``poll(now_ms) -> PollResult``) and send what they return;
3. run the network I/O until the earliest deadline any manager, connection or event asked for;
4. fail the completable events whose deadline passed (Java's ``CompletableEventReaper``).

Closing gives managers that implement ``begin_close``/``has_pending_work``/``fail_pending`` the time asked
for to finish (a producer sends what it holds), then fails what is left and closes every socket. Requests
unsent or in flight count as pending work too, except while no bootstrap server can be reached: then none can
be sent, and waiting for them would only make ``close`` wait out its whole timeout (or their request timeout)
for nothing. A manager's own pending work (a producer's records) is still waited for, up to the deadline: the
broker may come back.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any

from groupstream.client.errors import ClientError
from groupstream.client.net.network_client import NetworkClient
from groupstream.client.net.requests import RequestManager, min_delay

log = logging.getLogger("groupstream.client.net")


def monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000


class ClientClosedError(ClientError):
    """The client was closed (or its network thread stopped) before the operation could complete."""


class EventTimeoutError(ClientError, TimeoutError):
    """An operation handed to the network thread did not complete before its deadline."""


class ApplicationEvent:
    """Base of what application threads hand to the network thread."""

    __slots__ = ()


class CompletableEvent(ApplicationEvent):
    """An event a caller waits on: the network thread completes ``future``, or fails it at ``deadline_ms``."""

    __slots__ = ("deadline_ms", "future")

    def __init__(self, deadline_ms: int | None = None) -> None:
        self.future: Future[Any] = Future()
        self.deadline_ms = deadline_ms


EventProcessor = Callable[[ApplicationEvent, int], None]


class NetworkThread:
    """Runs a `NetworkClient` and request managers on one daemon thread."""

    def __init__(
        self,
        client: NetworkClient,
        managers: Sequence[RequestManager],
        processor: EventProcessor,
        *,
        name: str = "groupstream-network",
        clock: Callable[[], int] = monotonic_ms,
    ) -> None:
        self.client = client
        self._managers = list(managers)
        self._processor = processor
        self._clock = clock
        self._events: queue.SimpleQueue[ApplicationEvent] = queue.SimpleQueue()
        self._awaited: list[CompletableEvent] = []
        self._closing = False
        self._finishing = False
        self._close_deadline_ms = 0
        self._close_error: BaseException | Callable[[], BaseException] = ClientClosedError(
            "the client closed before this completed"
        )
        self._stopped = threading.Event()
        self.failure: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    # --- application side (any thread) ------------------------------------------------------------------------

    def start(self) -> None:
        self._thread.start()

    @property
    def alive(self) -> bool:
        return not self._stopped.is_set()

    def add_event(self, event: ApplicationEvent) -> None:
        if self._stopped.is_set():
            if isinstance(event, CompletableEvent):
                event.future.set_exception(self._closed_error())
            return
        self._events.put(event)
        if self._stopped.is_set():  # the thread stopped between the check and the put: fail it here
            self._drain_events_after_stop(self._closed_error())
            return
        self.client.wakeup()

    def submit(self, event: CompletableEvent) -> Future[Any]:
        """Hand ``event`` over; its future completes on the network thread."""
        self.add_event(event)
        return event.future

    def wakeup(self) -> None:
        """Make the loop run now (an application thread added work elsewhere, such as a producer's records)."""
        self.client.wakeup()

    def close(self, timeout_ms: int, error: BaseException | Callable[[], BaseException] | None = None) -> None:
        """Let managers finish within ``timeout_ms``, then stop the thread and close the connections; what is
        left fails with ``error`` (a ClientClosedError by default), or with what ``error()`` returns at that
        moment (so the error can say why, such as no broker being reachable)."""
        if error is not None:
            self._close_error = error
        if not self._thread.is_alive():
            if not self._stopped.is_set():  # never started
                self._shutdown(self._final_error())
            return
        self._close_deadline_ms = self._clock() + max(0, timeout_ms)
        self._closing = True
        self.client.wakeup()
        if threading.current_thread() is not self._thread:
            self._thread.join()

    def _final_error(self) -> BaseException:
        error = self._close_error
        return error if isinstance(error, BaseException) else error()

    def _closed_error(self) -> BaseException:
        if self.failure is not None:
            return ClientClosedError(f"the network thread failed: {self.failure!r}")
        return ClientClosedError("the client is closed")

    # --- the loop (network thread) ---------------------------------------------------------------------------

    def _has_events(self) -> bool:
        """Whether the loop must not sleep now (checked just before it would wait for I/O)."""
        if not self._events.empty():
            return True
        if self._finishing:
            # closing (``_run_until_done``): sleep only while there is something to wait for, as the last
            # responses; when nothing is left the loop ends now instead of waiting out the close timeout
            return not self._has_pending_work()
        return self._closing  # a close asked for ends the main loop's wait

    def _run(self) -> None:
        try:
            while not self._closing:
                self.run_once()
            self._run_until_done()
            self._shutdown(self._final_error())
        except BaseException as e:
            log.exception("the network thread failed")
            self.failure = e
            self._shutdown(ClientClosedError(f"the network thread failed: {e!r}"))

    def run_once(self, max_wait_ms: int | None = None) -> None:
        now = self._clock()
        self._process_events(now)
        delay = max_wait_ms
        for manager in self._managers:
            result = manager.poll(now)
            for request in result.unsent_requests:
                self.client.send(request, now)
            delay = min_delay(delay, result.next_poll_delay_ms)
        delay = min_delay(delay, self._next_event_deadline(now))
        now = self.client.poll(delay, now, self._has_events)
        self._expire_events(now)

    def _run_until_done(self) -> None:
        self._finishing = True
        now = self._clock()
        for manager in self._managers:
            begin = getattr(manager, "begin_close", None)
            if begin is not None:
                begin(now)
        while now < self._close_deadline_ms and self._has_pending_work():
            self.run_once(self._close_deadline_ms - now)
            now = self._clock()

    def _has_pending_work(self) -> bool:
        if not self._events.empty():
            return True
        if self.client.pending_requests and self.client.unreachable is None:  # see the module docstring
            return True
        return any(getattr(m, "has_pending_work", lambda: False)() for m in self._managers)

    def _shutdown(self, error: BaseException) -> None:
        try:
            for manager in self._managers:
                fail = getattr(manager, "fail_pending", None)
                if fail is not None:
                    fail(error)
            self.client.close()
        finally:
            self._stopped.set()
            self._drain_events_after_stop(error)
            for event in self._awaited:
                if not event.future.done():
                    event.future.set_exception(error)
            self._awaited.clear()

    def _drain_events_after_stop(self, error: BaseException) -> None:
        while True:
            try:
                event = self._events.get_nowait()
            except queue.Empty:
                return
            if isinstance(event, CompletableEvent) and not event.future.done():
                event.future.set_exception(error)

    def _process_events(self, now_ms: int) -> None:
        events = self._events
        while True:
            try:
                event = events.get_nowait()
            except queue.Empty:
                return
            if isinstance(event, CompletableEvent):
                if event.future.done():
                    continue  # cancelled by its caller
                self._awaited.append(event)  # failed at its deadline, or when the thread stops
            try:
                self._processor(event, now_ms)
            except Exception as e:
                if isinstance(event, CompletableEvent) and not event.future.done():
                    event.future.set_exception(e)
                else:
                    raise

    def _next_event_deadline(self, now_ms: int) -> int | None:
        soonest: int | None = None
        for event in self._awaited:
            if event.deadline_ms is not None and not event.future.done():
                delay = max(0, event.deadline_ms - now_ms)
                soonest = delay if soonest is None else min(soonest, delay)
        return soonest

    def _expire_events(self, now_ms: int) -> None:
        if not self._awaited:
            return
        keep: list[CompletableEvent] = []
        for event in self._awaited:
            if event.future.done():
                continue
            if event.deadline_ms is not None and now_ms >= event.deadline_ms:
                event.future.set_exception(
                    EventTimeoutError(f"{type(event).__name__} did not complete in time")
                )
                continue
            keep.append(event)
        self._awaited = keep
