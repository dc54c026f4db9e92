"""Delta Lake output for pipelines: the table's transaction log, not its directory, says which files hold rows,
so a batch killed half-way leaves files no reader of the table sees (DuckDB, Polars, pandas through the
``deltalake`` package, Spark with Delta's reader), where a plain Parquet directory shows them to every reader
that globs ``*.parquet``.

Why ``deltalake`` (delta-rs) and not ``delta-spark``: no ``delta-spark`` release supports the Spark the project
runs (4.3): delta-spark 4.4.1, the newest, requires ``pyspark<=4.2.0``, and its jars are built per Spark minor
version against Spark's internals. So Spark writes each batch's Parquet files (in parallel, on the executors)
and the driver commits them to the Delta log with delta-rs.

Exactly once: every commit carries a Delta *application transaction* (a ``txn`` action: ``appId``, ``version``),
written in the same atomic log entry as the files it adds. Before committing, the writer reads the version the
log holds for its ``appId`` and skips what is already there, so a batch Spark runs again after a crash (same
batch id, same offsets) is never committed twice:

* a streaming query (`DeltaBatchSink`): ``appId`` is the query's id from its checkpoint (``metadata``), the
  version is Spark's batch id;
* a region (`DeltaRegionPublisher`): the region's ledger entry stays the commit point (see
  `groupstream.region.ledger`); its files are then committed to the Delta log with ``appId`` ``groupstream-region``
  and the entry's sequence number as version, in ledger order, under a lock file, by whichever member gets there
  first (the publisher, or a member recovering after the publisher died between the two steps).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import shutil
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from groupstream.region.ledger import LEDGER_DIR, LedgerEntry
from groupstream.region.ledger import STAGING_DIR as LEDGER_STAGING

__all__ = [
    "REGION_APP_ID",
    "DeltaBatchSink",
    "DeltaRegionPublisher",
    "DeltaSetupError",
    "commit_files",
    "committed_version",
    "query_app_id",
]

REGION_APP_ID = "groupstream-region"
STAGING = "_staging"
LOCK = "_delta_publish.lock"
log = logging.getLogger("groupstream.spark")

SPARK_DELTA_CONF = {"spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS"}
"""Spark's default INT96 timestamps have no Delta type; microseconds (UTC) are Delta's ``timestamp``."""


class DeltaSetupError(RuntimeError):
    """The ``deltalake`` package is missing, or the table cannot be used."""


def _deltalake() -> Any:
    try:
        import deltalake
    except ImportError:
        raise DeltaSetupError("the Delta sink needs the deltalake package: pip install 'groupstream[spark]'") from None
    return deltalake


def committed_version(table: Path, app_id: str) -> int | None:
    """The last version committed under ``app_id`` in the table's log (None: none, or no table yet)."""
    dl = _deltalake()
    if not (table / "_delta_log").is_dir():
        return None
    version = dl.DeltaTable(str(table)).transaction_version(app_id)
    return None if version is None else int(version)


def _parquet_rows(path: Path) -> tuple[int, Any]:
    import pyarrow.parquet as pq

    meta = pq.read_metadata(path)
    return int(meta.num_rows), pq.read_schema(path)


@contextmanager
def table_lock(table: Path) -> Iterator[None]:
    """Holds the table's commit lock. Delta's optimistic commits refuse writers that create a table at the same
    time (region members committing their first files: "Metadata changed since last commit", "Protocol changed
    since last commit"), so every writer of a table checks its application version and commits under this one
    lock, across processes (flock; not re-entrant, hence `_commit_unlocked` for holders)."""
    table.mkdir(parents=True, exist_ok=True)
    with (table / LOCK).open("a") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def commit_files(table: Path, files: Sequence[Path], app_id: str, version: int) -> bool:
    """Commit ``files`` (Parquet files already inside ``table``) to its Delta log in one entry with the
    application transaction (``app_id``, ``version``), creating the table from the first file's schema if it
    does not exist. Returns False, committing nothing, when the log already holds ``version`` or a later one
    for ``app_id``. An empty ``files`` commits only the transaction (when the table exists). Takes the table's
    lock, so writers in other processes may commit to the same table at the same time."""
    with table_lock(table):
        return _commit_unlocked(table, files, app_id, version)


def _commit_unlocked(table: Path, files: Sequence[Path], app_id: str, version: int) -> bool:
    dl = _deltalake()
    from deltalake.transaction import AddAction, CommitProperties, Transaction

    done = committed_version(table, app_id)
    if done is not None and done >= version:
        return False
    actions = []
    schema = None
    for f in files:
        rows, file_schema = _parquet_rows(f)
        schema = schema or file_schema
        stat = f.stat()
        actions.append(AddAction(str(f.relative_to(table)), stat.st_size, {}, int(stat.st_mtime * 1000), True,
                                 json.dumps({"numRecords": rows})))  # fmt: skip
    props = CommitProperties(app_transactions=[Transaction(app_id, version, int(time.time() * 1000))])
    if not (table / "_delta_log").is_dir():
        if schema is None:
            return False  # nothing to write and no table to record the transaction in: the batch had no rows
        dl.DeltaTable.create(str(table), schema, mode="ignore")
    dt = dl.DeltaTable(str(table))
    if schema is None:
        schema = dt.schema()
    dt.create_write_transaction(actions, "append", schema, commit_properties=props)
    return True


def query_app_id(checkpoint: Path) -> str:
    """The application id of a streaming query: its id in the checkpoint's ``metadata`` (stable across restarts
    from that checkpoint; a new checkpoint is a new query, whose batch ids start again at 0)."""
    try:
        raw = json.loads((checkpoint / "metadata").read_text().splitlines()[0])
        return f"groupstream-query-{raw['id']}"
    except (OSError, ValueError, KeyError, IndexError) as e:
        raise DeltaSetupError(f"cannot read the query id from {checkpoint / 'metadata'}: {e}") from None


def _write_batch_files(df: Any, staging: Path) -> list[Path]:
    """Spark writes the batch's rows as Parquet into ``staging``; returns the non-empty part files."""
    import pyarrow.parquet as pq

    for key, value in SPARK_DELTA_CONF.items():
        df.sparkSession.conf.set(key, value)
    df.write.mode("overwrite").parquet(str(staging))
    return sorted(f for f in staging.glob("part-*.parquet") if pq.read_metadata(f).num_rows)


class DeltaBatchSink:
    """``foreachBatch`` function of a streaming query writing a Delta table exactly once."""

    def __init__(self, table: Path | str, checkpoint: Path | str) -> None:
        self.table = Path(table)
        self.checkpoint = Path(checkpoint)
        self._app_id: str | None = None
        _deltalake()  # a missing package is said when the query is built, not at its first batch
        # this query's own staging area (other queries may append to the same table), emptied of batches a killed
        # driver never committed
        key = hashlib.sha256(str(self.checkpoint.resolve()).encode()).hexdigest()[:12]
        self._staging = self.table / STAGING / key
        shutil.rmtree(self._staging, ignore_errors=True)

    def __call__(self, df: Any, batch_id: int) -> None:
        if self._app_id is None:
            self._app_id = query_app_id(self.checkpoint)
        done = committed_version(self.table, self._app_id)
        if done is not None and done >= batch_id:
            log.info("delta table %s: batch %d is already committed; skipped", self.table, batch_id)
            return
        staging = self._staging / f"{batch_id}-{uuid.uuid4().hex[:8]}"
        files = _write_batch_files(df, staging)
        moved = []
        for i, f in enumerate(files):
            target = self.table / f"part-{batch_id:016d}-{staging.name[-8:]}-{i:04d}.parquet"
            f.replace(target)
            moved.append(target)
        shutil.rmtree(staging, ignore_errors=True)
        commit_files(self.table, moved, self._app_id, batch_id)


class DeltaRegionPublisher:
    """Commits a region's published ledger entries to the table's Delta log, each exactly once, in order."""

    def __init__(self, table: Path | str) -> None:
        self.table = Path(table)
        _deltalake()

    def catch_up(self) -> int:
        """Commit every ledger entry the Delta log does not hold yet; returns how many entries were committed."""
        with table_lock(self.table):
            done = committed_version(self.table, REGION_APP_ID) or 0
            ledger = self.table / LEDGER_DIR
            seqs = sorted(int(p.stem) for p in ledger.glob("*.json") if p.stem.isdigit() and int(p.stem) > done)
            if seqs and done and seqs[0] != done + 1:
                raise DeltaSetupError(f"the Delta log of {self.table} holds ledger entries up to {done} but the "
                                      f"ledger kept only entries from {seqs[0]} on: entries in between are lost")  # fmt: skip
            committed = 0
            for seq in seqs:
                entry = LedgerEntry.from_json((ledger / f"{seq:016d}.json").read_text())
                files = [self.table / name for name, _staged in entry.files]
                for name, staged in entry.files:  # its publisher died before moving them: the entry is the commit
                    source = self.table / LEDGER_STAGING / staged
                    if not (self.table / name).exists() and source.exists():
                        source.replace(self.table / name)
                missing = [f for f in files if not f.exists()]
                if missing:
                    raise DeltaSetupError(f"ledger entry {seq} of {self.table} lists files that are not in the "
                                          f"table: {', '.join(f.name for f in missing)}")  # fmt: skip
                if _commit_unlocked(self.table, files, REGION_APP_ID, seq):
                    committed += 1
            return committed
