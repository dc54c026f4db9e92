"""``groupstream demo`` end to end: embedded broker, a live page-view feed, the Spark Structured Streaming
pipeline into a Delta table, and its exactly-once check, in under two minutes on this 2-core machine."""

from __future__ import annotations

import re
import time
from pathlib import Path

import deltalake
import pytest
from cli_runner import run_cli

pytestmark = pytest.mark.slow


def test_demo_end_to_end(tmp_path: Path) -> None:
    started = time.monotonic()
    proc = run_cli("demo", cwd=tmp_path, timeout=180)
    elapsed = time.monotonic() - started
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    assert "check passed: all 60,000 page views counted exactly once" in proc.stdout
    assert "consumer group groupstream-demo" in proc.stdout
    assert re.search(r"console: http://127\.0\.0\.1:\d+/groups/groupstream-demo while the demo runs", proc.stdout)
    assert re.search(r"lag of groupstream-demo: 0 records behind across \d+ partitions", proc.stdout), proc.stdout
    assert elapsed < 120, f"the demo took {elapsed:.1f}s"
    table = deltalake.DeltaTable(str(tmp_path / "data" / "demo" / "pipeline" / "output")).to_pyarrow_table()
    assert sum(table.column("views").to_pylist()) == 60_000  # the Delta table itself, read without Spark

    # a second run reuses the data directory: topic, group and output start afresh, so the check still holds
    again = run_cli("demo", "--events", "5000", "--seed", "7", cwd=tmp_path, timeout=180)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "check passed: all 5,000 page views counted exactly once" in again.stdout


def test_demo_names_a_broker_it_cannot_reach(tmp_path: Path) -> None:
    proc = run_cli("demo", "--bootstrap-server", "127.0.0.1:1", "--timeout", "20", cwd=tmp_path, timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    assert "127.0.0.1:1" in proc.stderr
