"""Run the broker inside this process, on an asyncio loop in a background thread, for the demo.

The calling thread stays free for blocking client code; the broker's handlers still run only on its loop
thread, as they expect. ``start`` returns once the broker listens (or re-raises why it could not start).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from types import TracebackType

from groupstream.broker.config import BrokerConfig
from groupstream.broker.node import Broker


class EmbeddedBroker:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None

    @property
    def bootstrap(self) -> str:
        host, port = self.config.advertised
        return f"{host}:{port}"

    def start(self, timeout_s: float = 30.0) -> EmbeddedBroker:
        thread = threading.Thread(target=self._run, name="groupstream-embedded-broker", daemon=True)
        thread.start()
        if not self._ready.wait(timeout_s):
            raise RuntimeError(f"the embedded broker did not start within {timeout_s:g}s")
        if self._error is not None:
            thread.join()
            raise self._error
        self._thread = thread
        return self

    def _run(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as e:  # reported to start(); the thread must not die silently
            self._error = e
            self._ready.set()

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        broker = Broker(self.config)
        await broker.start()  # sets config.port when it was 0
        self._ready.set()
        try:
            await self._stop.wait()
        finally:
            await broker.stop()

    def stop(self, timeout_s: float = 30.0) -> None:
        thread, loop, stop = self._thread, self._loop, self._stop
        if thread is None:
            return
        self._thread = None
        if loop is not None and stop is not None and thread.is_alive():
            with contextlib.suppress(RuntimeError):  # the loop closed in between: the broker already stopped
                loop.call_soon_threadsafe(stop.set)
        thread.join(timeout_s)
        if thread.is_alive():
            raise RuntimeError(f"the embedded broker did not stop within {timeout_s:g}s")
        if self._error is not None:  # a failure while shutting down must not pass unnoticed
            raise self._error

    def __enter__(self) -> EmbeddedBroker:
        return self if self._thread is not None else self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
