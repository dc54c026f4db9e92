"""Our broker with listeners of its own beside the PLAINTEXT one the harness probes for readiness."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from support.brokers import BrokerKind, BrokerProcess


class SecureBrokerProcess(BrokerProcess):
    def __init__(self, workdir: Path, listeners: list[str], **kwargs: Any) -> None:
        super().__init__(BrokerKind.GROUPSTREAM, workdir, **kwargs)
        self.listeners = listeners

    def command(self) -> list[str]:
        cmd = super().command()
        for listener in self.listeners:
            cmd += ["--listen", listener]
        return cmd
