"""What every benchmark records with its figures: the machine they ran on, and its own section of RESULTS.md."""

from __future__ import annotations

import datetime as dt
import os
import platform
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"


def machine() -> str:
    cpu = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return (
        f"{dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC; {os.cpu_count()} cores ({cpu}); "
        f"Python {platform.python_version()}"
    )


def confluent_versions() -> str:
    import confluent_kafka

    return f"confluent-kafka {confluent_kafka.__version__} (librdkafka {confluent_kafka.libversion()[0]})"


def write_section(name: str, text: str) -> None:
    """Replace (or append) the section between ``<!-- name:begin -->`` and ``<!-- name:end -->``."""
    begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
    section = f"{begin}\n{text}\n{end}"
    old = RESULTS.read_text() if RESULTS.exists() else "# Benchmark results\n"
    if begin in old and end in old:
        head, rest = old.split(begin, 1)
        _, tail = rest.split(end, 1)
        RESULTS.write_text(head + section + tail)
    else:
        RESULTS.write_text(old.rstrip("\n") + "\n\n" + section + "\n")
