"""Run the real ``groupstream`` console script in a subprocess, as a user would, and check how it fails."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from support.brokers import groupstream_command


def run_cli(
    *args: str, stdin: bytes | None = None, cwd: Path | None = None, timeout: float = 60.0
) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, COLUMNS="200", NO_COLOR="1", PYTHONUNBUFFERED="1")
    proc = subprocess.run(
        [*groupstream_command(), *args],
        input=stdin,
        capture_output=True,
        cwd=cwd,
        env=env,
        timeout=timeout,
        check=False,
    )
    return subprocess.CompletedProcess(proc.args, proc.returncode, proc.stdout.decode(), proc.stderr.decode())


def ok(*args: str, stdin: bytes | None = None, cwd: Path | None = None, timeout: float = 60.0) -> str:
    """Stdout of a command that must succeed; the failure message carries its stderr."""
    proc = run_cli(*args, stdin=stdin, cwd=cwd, timeout=timeout)
    assert proc.returncode == 0, f"groupstream {' '.join(args)} exited {proc.returncode}\n{proc.stderr}"
    assert "Traceback" not in proc.stderr
    return proc.stdout


def user_error(*args: str, stdin: bytes | None = None) -> str:
    """The one-line error of a command that must fail as a user mistake: exit 2, no traceback."""
    proc = run_cli(*args, stdin=stdin)
    assert proc.returncode == 2, f"expected exit 2, got {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    assert "Traceback" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if "error:" in line]
    assert len(lines) == 1, proc.stderr
    return lines[0]
