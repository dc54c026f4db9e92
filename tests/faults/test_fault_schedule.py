"""The short fault schedule of ``make test``: every kind of fault at least once against the whole workload
(see `tests.faults`), about two and a half minutes. Every run must end with no anomaly: nothing acknowledged
lost, no two owners at once, no duplicate beyond the at-least-once window, offsets monotonic.

The seed is random unless ``FAULTS_SEED`` is set; a failure prints it with the schedule, the checker's report
and the command that replays it. The disk-full fault mounts a tmpfs: as root this runs in-process; anyone
else runs ``python -m tests.faults --short`` in a user and mount namespace of their own (``unshare``).
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .runner import run, short_config

pytestmark = [pytest.mark.broker_ours, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]


def test_short_fault_schedule(tmp_path: Path) -> None:
    seed = int(os.environ.get("FAULTS_SEED") or random.randrange(1 << 32))
    if os.geteuid() != 0 and shutil.which("unshare"):
        cmd = [sys.executable, "-m", "tests.faults", "--short", "--seed", str(seed), "--workdir", str(tmp_path / "run")]
        done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=540)
        print(done.stdout[-20000:], done.stderr[-5000:])
        assert done.returncode == 0, f"seed {seed}: {done.stdout[-20000:]}"
        return
    result = run(short_config(seed, tmp_path / "run"))
    assert result.ok, result.failure_text()
