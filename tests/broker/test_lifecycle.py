"""`groupstream broker` as users run it: clear errors for mistakes, clean shutdown on SIGTERM and SIGINT."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from support.brokers import free_port

GROUPSTREAM = [str(Path(sys.executable).parent / "groupstream")]


def _start(tmp_path: Path, *extra: str) -> tuple[subprocess.Popen[str], int]:
    port = free_port()
    proc = subprocess.Popen(
        [*GROUPSTREAM, "broker", "--data-dir", str(tmp_path / "d"), "--listen", f"127.0.0.1:{port}", *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.stdout is not None
    for line in proc.stdout:  # blocks until the ready line (or EOF if it died)
        if "ready on" in line:
            return proc, port
    raise AssertionError(f"broker exited with {proc.wait()} before it was ready")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_stops_the_broker_cleanly(tmp_path, sig):
    proc, _ = _start(tmp_path)
    proc.send_signal(sig)
    out, _ = proc.communicate(timeout=20)
    assert proc.returncode == 0, out
    assert "stopped cleanly" in out
    assert "Traceback" not in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--listen", "localhost"], "--listen must be HOST:PORT"),
        (["--listen", "127.0.0.1:http"], "port that is not a number"),
        (["--set", "num.partitions=zero"], "num.partitions must be an integer"),
        (["--set", "no.such.property=1"], "unknown broker property 'no.such.property'"),
        (["--set", "log.flush.policy=sometimes"], "flush.policy"),
    ],
)
def test_user_mistakes_print_one_clear_line(tmp_path, args, message):
    proc = subprocess.run(
        [*GROUPSTREAM, "broker", "--data-dir", str(tmp_path / "d"), *args],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 2
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout


def test_port_in_use_is_a_clear_error(tmp_path):
    first, port = _start(tmp_path)
    try:
        second = subprocess.run(
            [*GROUPSTREAM, "broker", "--data-dir", str(tmp_path / "other"), "--listen", f"127.0.0.1:{port}"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert second.returncode == 2
        assert f"cannot listen on 127.0.0.1:{port}" in second.stderr
        assert "Traceback" not in second.stderr
    finally:
        first.terminate()
        first.communicate(timeout=20)
