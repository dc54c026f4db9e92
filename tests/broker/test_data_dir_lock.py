"""One broker per data dir (issue 12, part 3): a second broker on a live broker's data dir must refuse to
start (exit 2, one line naming the dir and the holder) instead of saying "ready" and overwriting the first
one's acknowledged records. kill -9 of the holder releases the lock (the kernel drops it with the process)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from support.brokers import BrokerFactory, BrokerKind, free_port, groupstream_command

pytestmark = pytest.mark.broker_ours


def _second_broker(data_dir: Path) -> subprocess.CompletedProcess[str]:
    cmd = [*groupstream_command(), "broker", "--data-dir", str(data_dir), "--listen", f"127.0.0.1:{free_port()}"]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)


def test_a_second_broker_on_a_live_data_dir_exits_2(broker_factory: BrokerFactory, tmp_path: Path) -> None:
    data = tmp_path / "data"
    first = broker_factory(BrokerKind.GROUPSTREAM, name="first", data_dir=data)
    before = sorted(p.name for p in data.iterdir())
    second = _second_broker(data)
    assert second.returncode == 2, (second.returncode, second.stdout, second.stderr)
    lines = second.stderr.strip().splitlines()
    assert len(lines) == 1, second.stderr
    assert str(data) in lines[0] and f"pid {first.pid}" in lines[0], lines[0]
    assert "ready" not in second.stdout and "Traceback" not in second.stderr
    assert sorted(p.name for p in data.iterdir()) == before  # the refused broker created nothing
    assert first.running

    first.kill9()
    first.start()  # the lock died with the killed process: the same dir starts again
    assert first.running


def test_the_lock_is_released_by_a_clean_stop(broker_factory: BrokerFactory, tmp_path: Path) -> None:
    data = tmp_path / "data"
    first = broker_factory(BrokerKind.GROUPSTREAM, name="first", data_dir=data)
    first.stop()
    again = broker_factory(BrokerKind.GROUPSTREAM, name="again", data_dir=data)
    assert again.running
