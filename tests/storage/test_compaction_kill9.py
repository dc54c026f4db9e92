"""Compaction under kill -9: a child appends keyed records and cleans its log over and over; it is killed at
random moments (so some kills land inside a cleaning or a swap) and the reopened log must hold, for every key,
the newest acknowledged value or a newer one, and no leftover ``.cleaned``/``.swap`` file."""

from __future__ import annotations

import random
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from groupstream.protocol.records import iter_record_batches
from groupstream.storage import LogConfig, PartitionLog

KEYS = 300

_CHILD = textwrap.dedent(
    """
    import sys
    from groupstream.protocol.records import BatchBuilder
    from groupstream.storage import LogConfig, PartitionLog
    from groupstream.storage.compaction import clean
    config = LogConfig.from_properties(
        {"cleanup.policy": "compact", "segment.bytes": "20000"})
    log = PartitionLog.open(sys.argv[1], config, 0)
    start = int(sys.argv[2])
    i = start
    while True:
        b = BatchBuilder()
        b.append(0, b"k%d" % (i % %(keys)d), b"%d" % i, [("pad", bytes(100))])
        log.append(bytearray(b.build()), now_ms=0)
        print(i, flush=True)  # acknowledged: in the file, so it survives the process
        i += 1
        if i % 50 == 0:
            clean(log, now_ms=0, force=True)
    """.replace("%(keys)d", str(KEYS))
)


def latest_values(log: PartitionLog) -> dict[bytes, int]:
    out: dict[bytes, int] = {}
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        got = log.read(offset, 1 << 20)
        for batch in iter_record_batches(got.records):
            for r in batch:
                assert r.key is not None and r.value is not None
                out[r.key] = int(r.value)
        offset = got.next_offset
    return out


@pytest.mark.slow
def test_kill_9_during_compaction_keeps_every_acknowledged_newest_value(tmp_path: Path) -> None:
    config = LogConfig.from_properties({"cleanup.policy": "compact", "segment.bytes": "20000"})
    directory = tmp_path / "t-0"
    rng = random.Random(7)
    acked: dict[bytes, int] = {}
    next_i = 0
    interrupted = 0
    for _ in range(8):
        child = subprocess.Popen(
            [sys.executable, "-c", _CHILD, str(directory), str(next_i)], stdout=subprocess.PIPE, text=True
        )
        assert child.stdout is not None
        deadline = time.monotonic() + rng.uniform(0.3, 1.0)
        while time.monotonic() < deadline:
            line = child.stdout.readline()
            if not line:
                break
            i = int(line)
            acked[b"k%d" % (i % KEYS)] = i
        child.kill()
        child.wait()
        log = PartitionLog.open(directory, config, 0)
        interrupted += sum(n.endswith((".cleaned", ".swap")) for n in log.recovery_report.removed_files)
        assert not any(p.name.endswith((".cleaned", ".swap")) for p in directory.iterdir())
        latest = latest_values(log)
        for key, value in acked.items():
            assert latest[key] >= value, f"{key!r}: newest acknowledged {value}, log has {latest[key]}"
        next_i = max(latest.values()) + 1
        log.close()
    assert len(acked) == KEYS
    print(f"{interrupted} kills interrupted a cleaning")
