"""``groupstream demo`` end to end: embedded broker, 50k events produced, read back and checked, in well under
a minute."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from cli_runner import run_cli

pytestmark = pytest.mark.slow


def test_demo_end_to_end(tmp_path: Path) -> None:
    started = time.monotonic()
    proc = run_cli("demo", cwd=tmp_path, timeout=120)
    elapsed = time.monotonic() - started
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    assert "check passed: all 50,000 records read back exactly as produced" in proc.stdout
    assert (tmp_path / "data" / "demo").is_dir()  # the default data directory, under the working directory
    assert elapsed < 45, f"the demo took {elapsed:.1f}s"

    # a second run reuses the data directory: the topic is recreated, so the check still holds
    again = run_cli("demo", "--events", "2000", "--compression", "zstd", cwd=tmp_path, timeout=120)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "check passed: all 2,000 records read back exactly as produced" in again.stdout
