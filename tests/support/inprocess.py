"""Our broker running in this process on a background event loop: for tests that poke its sockets directly."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

from groupstream.broker.config import BrokerConfig
from groupstream.broker.node import Broker

T = TypeVar("T")


class OnLoop:
    """Our broker in this process; ``run`` calls a function on its event loop (the owner of its logs)."""

    def __init__(self, broker: Broker, loop: asyncio.AbstractEventLoop) -> None:
        self.broker = broker
        self.loop = loop

    def run(self, fn: Callable[[], T]) -> T:
        async def call() -> T:
            return fn()

        return asyncio.run_coroutine_threadsafe(call(), self.loop).result(10)


@contextmanager
def broker_on_loop(data_dir: Path, **props: str) -> Iterator[OnLoop]:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="test-broker", daemon=True)
    thread.start()
    config = BrokerConfig(data_dir=data_dir, host="127.0.0.1", port=0)
    config.apply(props)
    broker = Broker(config)
    asyncio.run_coroutine_threadsafe(broker.start(), loop).result(10)
    try:
        yield OnLoop(broker, loop)
    finally:
        asyncio.run_coroutine_threadsafe(broker.stop(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


@contextmanager
def running_broker(data_dir: Path, **props: str) -> Iterator[Broker]:
    with broker_on_loop(data_dir, **props) as on_loop:
        yield on_loop.broker
