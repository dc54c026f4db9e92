"""flush() on a worker thread while the owner appends, rolls, retains and deletes records."""

from __future__ import annotations

import random
import shutil
import threading
from pathlib import Path

from storagekit import read_all, sized_batch

from groupstream.storage import LogConfig, PartitionLog


def test_flush_while_appending_loses_nothing(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=4000, index_interval_bytes=100, retention_bytes=60_000, retention_ms=-1)
    log = PartitionLog.open(tmp_path / "t-0", config, 0)
    stop = threading.Event()
    errors: list[BaseException] = []
    observed: list[int] = []
    progressed = threading.Event()

    def flusher() -> None:
        try:
            last = 0
            while not stop.is_set():
                flushed = log.flush()
                assert flushed >= last, "flushed offset went backwards"
                assert flushed <= log.log_end_offset
                observed.append(flushed)
                progressed.set()
                last = flushed
        except BaseException as exc:  # reported to the main thread
            errors.append(exc)

    worker = threading.Thread(target=flusher)
    worker.start()
    rng = random.Random(7)
    written: dict[int, tuple[int, bytes]] = {}
    try:
        for i in range(3000):
            b = sized_batch(rng.randint(61, 400), last_offset_delta=rng.randint(0, 3), timestamp=i, fill=65 + i % 26)
            info = log.append(b, now_ms=i)
            written[info.base_offset] = (info.last_offset, bytes(b))
            if i % 97 == 0:
                log.enforce_retention(now_ms=i)
            if i % 1000 == 999:
                log.delete_records(log.log_end_offset - 50)
            if i % 300 == 150:
                # Make sure flushes really interleave with appends, however slow fsync is here.
                progressed.clear()
                assert progressed.wait(timeout=60)
            if errors:
                break
    finally:
        stop.set()
        worker.join()
    assert not errors, errors
    assert len(observed) > 10, "the flusher should have run many times"
    assert len(log.segment_base_offsets()) < 3000 * 61 // 4000, "retention should have deleted segments"
    assert log.flush() == log.log_end_offset

    first_base = log.segment_base_offsets()[0]
    expected = [
        (base, raw) for base, (last, raw) in sorted(written.items()) if base >= first_base and last >= log.log_start_offset
    ]
    got = [(s, raw) for s, _, raw in read_all(log)]
    assert got == expected
    assert got[-1][0] == max(written)

    # An unclean copy taken now holds exactly the same; so does a clean reopen.
    copy = shutil.copytree(log.directory, tmp_path / "c-0")
    log.close()
    for directory in (log.directory, copy):
        reopened = PartitionLog.open(directory, config, 0)
        assert [(s, raw) for s, _, raw in read_all(reopened)] == got
        assert reopened.recovery_report.truncations == []
        reopened.close()
