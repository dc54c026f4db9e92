"""The checkpointed Parquet sink: rows become visible only when the region's checkpoint is complete, and a
reset keeps exactly what the checkpoint it goes back to covers."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from groupstream.region.file_sink import CheckpointedParquetSink


def table_rows(root: Path) -> list[int]:
    files = sorted(root.glob("part-*.parquet"))
    return sorted(v for f in files for v in pq.read_table(f).column("n").to_pylist())


def test_rows_appear_when_the_region_checkpoint_completes(tmp_path: Path) -> None:
    a, b = CheckpointedParquetSink(tmp_path, "a"), CheckpointedParquetSink(tmp_path, "b")
    a.write({"n": i} for i in range(3))
    b.write({"n": i} for i in range(10, 12))
    a.prepare(1)
    b.prepare(1)
    assert table_rows(tmp_path) == []  # prepared, not published: member b might still fail
    assert (a.commit(1), b.commit(1)) == (1, 1)
    assert table_rows(tmp_path) == [0, 1, 2, 10, 11]
    a.prepare(2)  # nothing written since: no file
    assert a.commit(2) == 0


def test_a_reset_keeps_its_checkpoint_and_discards_what_came_after(tmp_path: Path) -> None:
    a = CheckpointedParquetSink(tmp_path, "a")
    a.write([{"n": 1}])
    a.prepare(1)  # checkpoint 1 completed, but this member died before it heard so
    a.write([{"n": 2}])
    a.prepare(2)  # checkpoint 2 never completed
    a.write([{"n": 3}])  # not even prepared
    restarted = CheckpointedParquetSink(tmp_path, "a")
    assert restarted.has_prepared()  # its fate is the region's next resume or reset
    assert not CheckpointedParquetSink(tmp_path, "b").has_prepared()
    restarted.reset(1)
    assert table_rows(tmp_path) == [1]
    assert list((tmp_path / "_prepared").iterdir()) == []
    assert not restarted.has_prepared()
    restarted.write([{"n": 2}])
    restarted.prepare(3)
    restarted.commit(3)
    assert table_rows(tmp_path) == [1, 2]  # record 2 is in the table once, from the replay


def test_reset_to_the_initial_state_discards_everything_unpublished(tmp_path: Path) -> None:
    a = CheckpointedParquetSink(tmp_path, "a")
    a.write([{"n": 1}])
    a.prepare(1)
    a.reset(None)
    assert table_rows(tmp_path) == [] and a.buffered == 0
    with pytest.raises(ValueError, match="cannot contain"):
        CheckpointedParquetSink(tmp_path, "a-b")
