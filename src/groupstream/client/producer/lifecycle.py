"""The end of producing: ``flush`` makes every batch sendable now and waits for the records produced so far;
``close`` refuses new records, delivers what is pending within its timeout, fails the rest and stops the
network thread."""

from __future__ import annotations

import time

from groupstream.client.closing import ClosesOnExit
from groupstream.client.net.network_thread import ApplicationEvent
from groupstream.client.producer.deliveries import Deliveries
from groupstream.client.producer.errors import ProducerClosedError


class _Flush(ApplicationEvent):
    """Make every batch sendable now (``begin``), or stop doing so (the flush returned)."""

    __slots__ = ("begin",)

    def __init__(self, begin: bool) -> None:
        self.begin = begin


class Lifecycle(Deliveries, ClosesOnExit):
    def _process_event(self, event: ApplicationEvent, now_ms: int) -> None:
        """An event from the application thread, on the network thread."""
        if isinstance(event, _Flush):
            if event.begin:
                self._acc.begin_flush()
            else:
                self._acc.end_flush()

    def flush(self, timeout: float | None = None) -> int:
        """Send everything now (no linger) and wait up to ``timeout`` seconds (None: until done) for every
        record produced so far to be delivered or failed, running delivery callbacks meanwhile. Returns the
        number of records still outstanding (0 when all are done)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        self._thread.add_event(_Flush(True))
        try:
            seen = 0
            while True:
                self._serve_deliveries()
                left = self._acc.outstanding()
                if left == 0:
                    break
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    break
                if not self._thread.alive:
                    break
                seen = self._memory.wait_release(
                    seen, 0.5 if remaining is None else min(remaining, 0.5), False
                )
        finally:
            self._thread.add_event(_Flush(False))
        self._serve_deliveries()
        return self._acc.outstanding()

    def close(self, timeout: float | None = None) -> None:
        """Deliver what is pending within ``timeout`` seconds (None: up to ``delivery.timeout.ms``), fail the
        rest with ProducerClosedError, stop the network thread and run the last delivery callbacks. Returns
        as soon as nothing is pending; with records pending it waits for them at most ``timeout``, even when no
        broker can be reached (one may come back meanwhile), and their error then says that none could be."""
        if self._closed:
            return
        self._closed = True
        with self._acc.lock:
            self._acc.refuse(ProducerClosedError("produce() after close()"))
        timeout_ms = self.config.delivery_timeout_ms if timeout is None else max(0, int(timeout * 1000))

        def undelivered() -> ProducerClosedError:
            text = f"the producer closed before this record was delivered (close timeout {timeout_ms} ms)"
            why = self._client.unreachable
            return ProducerClosedError(f"{text}: {why}" if why is not None else text)

        self._thread.close(timeout_ms, undelivered)
        self._serve_deliveries()
