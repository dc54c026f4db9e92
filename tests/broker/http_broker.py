"""Our broker with its HTTP port (``--http``): metrics and the console."""

from __future__ import annotations

import urllib.error
import urllib.request
from pathlib import Path

from support.brokers import BrokerKind, BrokerProcess, free_port


class HttpBroker(BrokerProcess):
    def __init__(self, workdir: Path) -> None:
        super().__init__(BrokerKind.GROUPSTREAM, workdir, settings={"group.initial.rebalance.delay.ms": "0"})
        self.http_port = free_port()

    @property
    def http(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    def command(self) -> list[str]:
        return [*super().command(), "--http", f"127.0.0.1:{self.http_port}"]

    def get(self, path: str) -> tuple[int, str, str]:
        try:
            with urllib.request.urlopen(f"{self.http}{path}", timeout=10) as answer:
                return answer.status, answer.headers["Content-Type"], answer.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.headers["Content-Type"], e.read().decode()
