"""Run a broker in the foreground until SIGTERM or SIGINT, then shut down cleanly."""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Callable

from groupstream.broker.config import BrokerConfig
from groupstream.broker.node import Broker


async def serve(config: BrokerConfig, ready: Callable[[Broker], None] | None = None) -> None:
    broker = Broker(config)
    await broker.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    if ready is not None:
        ready(broker)
    try:
        await stop.wait()
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
        await broker.stop()


def run(config: BrokerConfig, ready: Callable[[Broker], None] | None = None) -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    asyncio.run(serve(config, ready))
