"""``groupstream console``: the web console for any Kafka cluster, read through the Admin API and
``__consumer_offsets`` (our broker serves the same pages itself with ``groupstream broker --http``)."""

from __future__ import annotations

import argparse
import asyncio
import signal
from typing import TYPE_CHECKING

from groupstream.broker.config import parse_hostport
from groupstream.broker.http import HttpServer
from groupstream.cli.common import add_bootstrap, client_config, stderr
from groupstream.cli.errors import UserError
from groupstream.client.errors import ClientError
from groupstream.console.lag_history import SAMPLE_EVERY_S

if TYPE_CHECKING:
    from groupstream.console.cluster import ClusterConsole

HTML = "text/html; charset=utf-8"


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("console", help="a web console (topics, groups, lag, rebalance timelines) for any Kafka cluster")
    p.add_argument("--http", default="127.0.0.1:9400", metavar="HOST:PORT",
                   help="where to serve it (default 127.0.0.1:9400; port 0 picks a free one)")  # fmt: skip
    add_bootstrap(p)
    p.set_defaults(func=run, command_name="console")


def run(args: argparse.Namespace) -> int:
    from groupstream.console.cluster import ClusterConsole

    host, port = parse_hostport(args.http, "--http")
    console = ClusterConsole({**client_config(args), "client.id": "groupstream-console"})
    try:
        asyncio.run(_serve(console, host, port, args.bootstrap_server))
    finally:
        console.close()
    return 0


async def _serve(console: ClusterConsole, host: str, port: int, bootstrap: str) -> None:
    def group(name: str) -> tuple[str, bytes] | None:
        page = console.group(name)
        return None if page is None else (HTML, page.encode())

    server = HttpServer({"/": lambda _: (HTML, console.front().encode()), "/groups/": group})
    try:
        bound = await server.start(host, port)
    except OSError as e:
        raise UserError(f"cannot listen on {host}:{port} (--http): {e.strerror or e}") from None
    print(f"console for {bootstrap} on http://{bound[0]}:{bound[1]}/", flush=True)
    stderr.print("Ctrl-C stops it")
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()

    async def sample_forever() -> None:
        while True:
            await asyncio.sleep(SAMPLE_EVERY_S)  # the sampling period of the lag charts
            try:
                console.front()  # samples the groups' lags and the topics' end offsets
            except ClientError as e:  # a cluster that went away for a while: the next sample tries again
                stderr.print(f"sampling lag failed: {e}")

    sampler = asyncio.create_task(sample_forever())
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        sampler.cancel()
        await server.close()
