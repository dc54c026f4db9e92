"""Our broker running in this process on a background event loop: for tests that poke its sockets directly."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from groupstream.broker.config import BrokerConfig
from groupstream.broker.node import Broker


@contextmanager
def running_broker(data_dir: Path, **props: str) -> Iterator[Broker]:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="test-broker", daemon=True)
    thread.start()
    config = BrokerConfig(data_dir=data_dir, host="127.0.0.1", port=0)
    config.apply(props)
    broker = Broker(config)
    asyncio.run_coroutine_threadsafe(broker.start(), loop).result(10)
    try:
        yield broker
    finally:
        asyncio.run_coroutine_threadsafe(broker.stop(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()
