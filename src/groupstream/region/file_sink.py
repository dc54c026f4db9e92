"""A Parquet sink that takes part in the region's checkpoints, so the region's output is exactly-once.

Rows a member writes between two checkpoints are buffered. When the member checkpoints, they are written to a
*prepared* file named after the checkpoint and the member (fsynced, then renamed into place). They become part
of the table only once the whole region's checkpoint is complete: ``commit`` renames the prepared files of
that checkpoint and older ones into the table directory. A reset goes back to a complete checkpoint: prepared
files up to it are committed (the member may have died before it heard the checkpoint complete), later ones
and the buffer are discarded, because the records behind them will be processed again.

The table is the ``part-*.parquet`` files of the directory; ``_prepared`` is invisible to readers that skip
names starting with ``_`` (Spark, pyarrow).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

__all__ = ["CheckpointedParquetSink"]

PREPARED = "_prepared"


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class CheckpointedParquetSink:
    def __init__(self, root: Path, member: str) -> None:
        if "-" in member or "/" in member:
            raise ValueError(f"member name {member!r} cannot contain '-' or '/' (it names files)")
        self.root = Path(root)
        self.member = member
        self.prepared_dir = self.root / PREPARED
        self.prepared_dir.mkdir(parents=True, exist_ok=True)
        self._rows: list[Mapping[str, Any]] = []

    def write(self, rows: Iterable[Mapping[str, Any]]) -> None:
        self._rows.extend(rows)

    @property
    def buffered(self) -> int:
        return len(self._rows)

    def prepare(self, checkpoint_id: int) -> None:
        """The member checkpoints: make its rows since the last checkpoint durable, not yet visible."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        rows, self._rows = self._rows, []
        if not rows:
            return
        final = self.prepared_dir / f"{checkpoint_id:012d}-{self.member}.parquet"
        tmp = self.prepared_dir / f".{final.name}.tmp"
        pq.write_table(pa.Table.from_pylist(rows), tmp)
        with tmp.open("rb") as f:
            os.fsync(f.fileno())
        tmp.replace(final)
        _fsync_dir(self.prepared_dir)

    def _prepared(self) -> list[tuple[int, Path]]:
        out = []
        for path in self.prepared_dir.glob("*.parquet"):
            cid, _, member = path.stem.partition("-")
            if member == self.member and cid.isdigit():
                out.append((int(cid), path))
        return sorted(out)

    def has_prepared(self) -> bool:
        """Whether this member has prepared files that are neither published nor discarded yet."""
        return bool(self._prepared())

    def commit(self, upto_checkpoint_id: int) -> int:
        """The region's checkpoint ``upto_checkpoint_id`` is complete: publish this member's prepared files of it
        and older ones. Returns how many files were published."""
        published = 0
        for cid, path in self._prepared():
            if cid <= upto_checkpoint_id:
                path.replace(self.root / f"part-{cid:012d}-{self.member}.parquet")
                published += 1
        if published:
            _fsync_dir(self.root)
        return published

    def reset(self, to_checkpoint_id: int | None) -> None:
        """The region resets to ``to_checkpoint_id`` (None: its initial state): keep what that checkpoint
        covers, drop everything after it."""
        self._rows = []
        if to_checkpoint_id is not None:
            self.commit(to_checkpoint_id)
        for cid, path in self._prepared():
            if to_checkpoint_id is None or cid > to_checkpoint_id:
                path.unlink()
        for tmp in self.prepared_dir.glob(f".*-{self.member}.parquet.tmp"):
            tmp.unlink()
        _fsync_dir(self.prepared_dir)

    def files(self) -> list[Path]:
        """The published files of every member, in checkpoint order."""
        return sorted(self.root.glob("part-*.parquet"))
