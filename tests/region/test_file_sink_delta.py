"""The checkpointed Parquet sink as a Delta table (issue 15): a region checkpoint's files enter the Delta log when
the checkpoint completes, exactly once, also when the member died between publishing its files and the Delta
commit; DuckDB, reading through the log, never sees a prepared or discarded file."""

from __future__ import annotations

from pathlib import Path

import deltalake
import duckdb

from groupstream.region.file_sink import CheckpointedParquetSink


def delta_rows(root: Path) -> list[int]:
    if not (root / "_delta_log").is_dir():
        return []
    dataset = deltalake.DeltaTable(str(root)).to_pyarrow_dataset()  # noqa: F841 (DuckDB finds it by name)
    return sorted(n for (n,) in duckdb.sql("SELECT n FROM dataset").fetchall())


def test_checkpoints_enter_the_delta_log_once_through_a_crash(tmp_path: Path) -> None:
    a, b = CheckpointedParquetSink(tmp_path, "a", delta=True), CheckpointedParquetSink(tmp_path, "b", delta=True)
    a.write({"n": i} for i in range(3))
    b.write({"n": i} for i in range(10, 12))
    a.prepare(1)
    b.prepare(1)
    assert delta_rows(tmp_path) == []  # prepared, not published
    a.commit(1)
    b.commit(1)
    assert delta_rows(tmp_path) == [0, 1, 2, 10, 11]
    a.write([{"n": 3}])
    a.prepare(2)
    CheckpointedParquetSink(tmp_path, "a").commit(2)  # files published, then the member died before the Delta commit
    assert delta_rows(tmp_path) == [0, 1, 2, 10, 11]
    a.write([{"n": 4}])
    a.prepare(3)  # checkpoint 3 never completes
    restarted = CheckpointedParquetSink(tmp_path, "a", delta=True)
    restarted.reset(2)  # the region goes back to checkpoint 2: its file enters the log, checkpoint 3's is dropped
    assert delta_rows(tmp_path) == [0, 1, 2, 3, 10, 11]
    restarted.commit(2)  # heard again: nothing twice
    b.commit(2)
    assert delta_rows(tmp_path) == [0, 1, 2, 3, 10, 11]
