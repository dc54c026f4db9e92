"""Run a broker in the foreground until SIGTERM or SIGINT, then shut down cleanly."""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Callable

from groupstream.broker.config import BrokerConfig
from groupstream.broker.descriptors import raise_nofile_limit
from groupstream.broker.node import Broker

log = logging.getLogger("groupstream.broker")


async def serve(config: BrokerConfig, ready: Callable[[Broker], None] | None = None) -> None:
    """Run until SIGTERM or SIGINT. The soft descriptor limit is raised first (the logs opened by the broker
    count against it too); signals are handled on the loop, which never blocks on a connection storm, so the
    stop begins at once."""
    nofile = raise_nofile_limit()
    broker = Broker(config)
    log.info("%s", nofile)
    await broker.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()

    def on_signal(sig: signal.Signals) -> None:
        if not stop.is_set():
            log.info("%s received: stopping", sig.name)
        stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal, sig)
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
