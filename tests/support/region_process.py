"""A ``groupstream region`` command (member or controller) run as a process of its own, its output in a log file
next to the test's data, numbered per start (``b-0.log``, ``b-1.log`` after a restart), so a test can kill,
restart and read what each incarnation printed."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from support.brokers import groupstream_command


class RegionProcess:
    def __init__(self, name: str, args: list[str], cwd: Path) -> None:
        self.name = name
        self.log = cwd / f"{name}-{len(list(cwd.glob(name + '-*.log')))}.log"
        with self.log.open("w") as out:
            self.proc = subprocess.Popen([*groupstream_command(), "region", *args], cwd=cwd, stdout=out,
                                         stderr=subprocess.STDOUT, env=dict(os.environ))  # fmt: skip

    def events(self) -> list[dict[str, Any]]:
        """The JSON lines it logged (its events and the controller's commands)."""
        return [json.loads(line) for line in self.log.read_text().splitlines() if line.startswith("{")]

    def text(self) -> str:
        return self.log.read_text()
