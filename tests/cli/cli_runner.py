"""Run the real ``groupstream`` console script in a subprocess, as a user would, and check how it fails."""

from __future__ import annotations

import os
import re
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


_HEADER_NAME = re.compile(r"^[A-Z0-9#][A-Z0-9#()\- ]*$")


def plain_tables(output: str) -> list[list[dict[str, str]]]:
    """The tables of a command's piped output (``groupstream.cli.tables``' plain format: a header of capitals,
    columns two spaces apart, rows until a blank line), each as rows of cells by header; cells are cut at the
    header's column starts, so a value may hold single spaces."""
    tables: list[list[dict[str, str]]] = []
    columns: list[tuple[str, int]] | None = None
    for line in output.splitlines():
        if columns is not None:
            if not line.strip():
                columns = None
                continue
            starts = [s for _, s in columns] + [len(line) + 1]
            tables[-1].append({name: line[starts[i]:starts[i + 1]].strip() for i, (name, _) in enumerate(columns)})
            continue
        names = re.split(r"\s{2,}", line.strip())
        if len(names) >= 2 and all(_HEADER_NAME.match(n) for n in names):
            found, at = [], 0
            for n in names:
                at = line.index(n, at)
                found.append((n, at))
                at += len(n)
            columns = found
            tables.append([])
    return tables
