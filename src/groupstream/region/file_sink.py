"""A Parquet sink that takes part in the region's checkpoints, so the region's output is exactly-once.

Rows a member writes between two checkpoints are buffered. When the member checkpoints, they are written to a
*prepared* file named after the checkpoint and the member (fsynced, then renamed into place). They become part
of the table only once the whole region's checkpoint is complete: ``commit`` renames the prepared files of
that checkpoint and older ones into the table directory. A reset goes back to a complete checkpoint: prepared
files up to it are committed (the member may have died before it heard the checkpoint complete), later ones
and the buffer are discarded, because the records behind them will be processed again.

The table is the ``part-*.parquet`` files of the directory; ``_prepared`` is invisible to readers that skip
names starting with ``_`` (Spark, pyarrow).

With ``delta=True`` the directory is also a Delta table: each commit then adds the member's newly published files
to the Delta log in one entry carrying the application transaction (``groupstream-region-<member>``, the newest
checkpoint id it covers). Published files are named by checkpoint, so a member that died between the rename and
the Delta commit adds exactly the files the log lacks at its next commit or reset, never one twice.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from groupstream.storage.fileio import fsync_directory

__all__ = ["CheckpointedParquetSink"]

PREPARED = "_prepared"


class CheckpointedParquetSink:
    def __init__(self, root: Path, member: str, delta: bool = False) -> None:
        if "-" in member or "/" in member:
            raise ValueError(f"member name {member!r} cannot contain '-' or '/' (it names files)")
        self.root = Path(root)
        self.member = member
        self.prepared_dir = self.root / PREPARED
        self.prepared_dir.mkdir(parents=True, exist_ok=True)
        self._rows: list[Mapping[str, Any]] = []
        self.delta = delta

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
        fsync_directory(self.prepared_dir)

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
            fsync_directory(self.root)
        if self.delta:
            self._commit_delta(upto_checkpoint_id)
        return published

    @property
    def delta_app_id(self) -> str:
        return f"groupstream-region-{self.member}"

    def _commit_delta(self, upto_checkpoint_id: int) -> None:
        """Add this member's published files up to ``upto_checkpoint_id`` that the Delta log lacks."""
        from groupstream.spark.delta_table import commit_files, committed_version

        done = committed_version(self.root, self.delta_app_id)
        new = [(cid, path) for cid, path in self._published() if (done is None or cid > done) and cid <= upto_checkpoint_id]
        if new:
            commit_files(self.root, [path for _cid, path in new], self.delta_app_id, new[-1][0])

    def _published(self) -> list[tuple[int, Path]]:
        out = []
        for path in self.root.glob(f"part-*-{self.member}.parquet"):
            cid = path.stem.split("-")[1]
            if cid.isdigit():
                out.append((int(cid), path))
        return sorted(out)

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
        fsync_directory(self.prepared_dir)

    def files(self) -> list[Path]:
        """The published files of every member, in checkpoint order."""
        return sorted(self.root.glob("part-*.parquet"))
