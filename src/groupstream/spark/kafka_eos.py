"""The groupstream sink's exactly-once mode for Kafka topics (issue 17): option ``exactlyOnce=true``.

How (two-phase commit, ``client/producer/prepared.py``): the task of Spark partition ``p`` writes its rows in one
Kafka transaction with ``transactional.id = <prefix>-<p>``; its ``init_transactions`` fences any earlier attempt
of the same partition and aborts what that attempt left open. The task then *prepares* the transaction (every
record acknowledged, the transaction left open) and hands its identity to the driver as its commit message; a
partition with no rows opens no transaction. The driver decides:

- streaming (``commit(messages, batch_id)``): it first appends the decision, with every prepared transaction, to
  the sink's own decision log ``<checkpointLocation>/groupstream-eos/decisions.jsonl`` (one JSON line, flushed
  and fsynced), then commits each transaction (EndTxn, which the coordinator answers as done when repeated), then
  appends ``done``. A writer starting (a restarted query) first commits any batch decided but not done and marks
  it done, before any task of the new run can fence those transactions. Spark re-runs the last batch whose commit
  it did not log; a re-run of a batch already done is a duplicate whose transactions the driver aborts. So a
  retried task, a restarted batch or a driver killed at any moment never doubles a record for read_committed
  readers.
- batch (``df.write``): the driver commits every task's transaction in ``commit`` and aborts them in ``abort``:
  the write is all or nothing for read_committed readers, except that a driver dying in the middle of its commit
  loop (milliseconds) leaves the transactions it had not reached to be aborted by their timeout (there is no log
  to finish them from).

Options: ``exactlyOnce`` (default false: the at-least-once sink), ``transactionalIdPrefix`` (default: derived
from the checkpoint location for streaming, random per write for batch; two queries writing concurrently must
not share one), and the producer's ``kafka.transaction.timeout.ms`` (default here 900000, 15 min, the brokers'
default ``transaction.max.timeout.ms``), which must exceed a batch's time from its first record to the
driver's commit, including a driver's crash and restart between its decision and the commit: the coordinator
aborts a transaction older than that, and a decided batch whose transaction it aborted is lost (the restarted
query fails saying so). A shorter timeout frees sooner the last stable offset a killed attempt's transaction
holds when no later attempt takes its transactional id over.

Costs: read_committed readers see a batch only when its commit completes (one batch's latency more); each open
transaction holds back the last stable offset of the partitions it writes for the batch's duration, so
read_committed readers of those partitions wait for it too; one InitProducerId per task and one EndTxn per task
and batch. Caveats: the number of Spark partitions of the write should stay the same across restarts (a
transaction left open by a partition number no longer used is aborted only by its timeout, holding back the
last stable offset meanwhile); speculative execution must stay off (a speculative copy fences the attempt whose
message the driver may already hold, failing the batch); the checkpoint location must be a local (or mounted)
directory.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from groupstream.client.producer import Producer
from groupstream.client.producer.future import BulkDelivery
from groupstream.client.producer.prepared import (
    PreparedTransaction,
    PreparedTransactionLost,
    complete_transaction,
)
from groupstream.spark.options import SinkOptions, SourceOptionError, parse_sink_options
from groupstream.spark.sink import check_sink_columns, rows_to_produce
from groupstream.storage.fileio import atomic_write, fsync_directory

__all__ = ["ExactlyOnceBatchWriter", "ExactlyOnceStreamWriter", "exactly_once_requested", "pending_batches"]

log = logging.getLogger("groupstream.spark")

EXACTLY_ONCE_KEYS = ("exactlyonce", "transactionalidprefix")
_LOG_DIR = "groupstream-eos"
_LOG_FILE = "decisions.jsonl"
# a decided batch's transactions must outlive a driver's crash and restart, or its records are lost: Kafka's
# largest allowed timeout by default (transaction.max.timeout.ms), not the producer's 60 s
DEFAULT_TRANSACTION_TIMEOUT_MS = 900_000
_COMPACT_AFTER = 1000  # lines; the log is rewritten down to its last done batch and any pending one


def exactly_once_requested(options: Mapping[str, str]) -> bool:
    """Whether the sink's options ask for the exactly-once mode (``exactlyOnce``, any case)."""
    raw = {k.lower(): str(v) for k, v in options.items()}.get("exactlyonce")
    if raw is None:
        return False
    text = raw.strip().lower()
    if text not in ("true", "false"):
        raise SourceOptionError(f"option 'exactlyOnce' must be true or false, got {raw!r}")
    return text == "true"


class Prepared(WriterCommitMessage):
    """A task's commit message: how many rows it wrote and its prepared transaction (None: no rows)."""

    def __init__(self, records: int, prepared: dict[str, Any] | None) -> None:
        self.records = records
        self.prepared = prepared


# --- the task ------------------------------------------------------------------------------------------------


def write_prepared(
    options: SinkOptions, fields: Sequence[str], batches: Iterator[Any], transactional_id: str
) -> Prepared:
    """Produce every row of ``batches`` in one transaction of ``transactional_id`` and prepare it. No rows: no
    transaction. A failure aborts the transaction before the error goes on to Spark."""
    check_sink_columns(options, fields)
    config = {"bootstrap.servers": options.bootstrap_servers, "client.id": "groupstream-spark-sink-eos",
              "acks": "all", "enable.idempotence": True, "linger.ms": 5,
              "transaction.timeout.ms": DEFAULT_TRANSACTION_TIMEOUT_MS, **options.client_config,
              "transactional.id": transactional_id}  # fmt: skip
    producer: Producer | None = None
    deliveries: list[BulkDelivery] = []
    count = 0
    try:
        for rows in rows_to_produce(options, batches):
            if producer is None:
                producer = Producer(config)
                producer.init_transactions()  # fences an earlier attempt of this partition, aborting its transaction
                producer.begin_transaction()
            deliveries.append(producer.produce_arrow(rows, options.topic))
            count += rows.num_rows
        if producer is None:
            return Prepared(0, None)
        prepared = producer.prepare_transaction()
        for delivery in deliveries:
            error = delivery.exception(0)
            if error is not None:
                raise RuntimeError(f"records of this task were not delivered ({count} were to be): {error}") from error
        return Prepared(count, prepared.to_json())
    except BaseException:
        if producer is not None:
            try:
                producer.abort_transaction(10)
            except Exception as e:  # the retry's init_transactions, or the timeout, aborts it instead
                log.warning("transactional.id %s: the failed task's abort failed: %s", transactional_id, e)
        raise
    finally:
        if producer is not None:
            producer.close(10)


def _partition_id() -> int:
    from pyspark import TaskContext

    ctx = TaskContext.get()
    if ctx is None:
        raise RuntimeError("the exactly-once sink's write() runs in a Spark task")
    return int(ctx.partitionId())


def _prepared_of(messages: Iterable[WriterCommitMessage | None]) -> list[PreparedTransaction]:
    out = []
    for m in messages:
        raw = getattr(m, "prepared", None)
        if raw is not None:
            out.append(PreparedTransaction.from_json(raw))
    return out


def _complete_all(config: Mapping[str, Any], txns: Sequence[PreparedTransaction], commit: bool) -> None:
    for t in txns:
        complete_transaction(config, t, commit)


# --- the decision log (pure part) -------------------------------------------------------------------------------


@dataclass
class LogState:
    """What the decision log says: the last batch done and the batches decided but not done yet."""

    last_done: int = -1
    pending: dict[int, list[PreparedTransaction]] = field(default_factory=dict)
    lines: int = 0


def read_entries(lines: Iterable[str]) -> LogState:
    """Fold the log's lines. A last line cut short by a crash (not valid JSON) is ignored: its write was never
    acknowledged to anyone, so the decision it began was not taken."""
    state = LogState()
    for line in lines:
        line = line.strip()
        if not line:
            continue
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            continue
        state.lines += 1
        batch = int(entry["batch"])
        if entry["state"] == "decided":
            state.pending[batch] = [PreparedTransaction.from_json(t) for t in entry["txns"]]
        elif entry["state"] == "done":
            state.pending.pop(batch, None)
            state.last_done = max(state.last_done, batch)
    return state


def pending_batches(state: LogState) -> list[tuple[int, list[PreparedTransaction]]]:
    """The batches to finish (commit again) before anything else, oldest first."""
    return sorted(state.pending.items())


def is_replay(state: LogState, batch_id: int) -> bool:
    """Spark re-runs the last batch whose commit it did not log; if ours is done, the re-run is a duplicate."""
    return batch_id <= state.last_done


# --- the decision log (file) ------------------------------------------------------------------------------------


class DecisionLog:
    """``<checkpoint>/groupstream-eos/decisions.jsonl``: appended with fsync, so a decision written is a decision
    taken, whatever happens to the driver next."""

    def __init__(self, checkpoint: str) -> None:
        path = checkpoint[len("file:"):] if checkpoint.startswith("file:") else checkpoint
        if "://" in path:
            raise SourceOptionError(
                f"exactlyOnce needs a local (or mounted) checkpointLocation for its decision log, got {checkpoint!r}"
            )
        while path.startswith("//"):
            path = path[1:]
        self.dir = Path(path) / _LOG_DIR
        self.path = self.dir / _LOG_FILE

    def read(self) -> LogState:
        try:
            with self.path.open(encoding="utf-8") as f:
                return read_entries(f)
        except FileNotFoundError:
            return LogState()

    def append(self, entry: Mapping[str, Any]) -> None:
        new = not self.path.exists()
        self.dir.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(entry, sort_keys=True) + "\n")
            f.flush()
            os.fsync(f.fileno())
        if new:
            fsync_directory(self.dir)

    def compact(self, state: LogState) -> None:
        """Rewrite the log as its last done batch and its pending ones (atomically: a new file renamed over)."""
        lines = [json.dumps({"batch": state.last_done, "state": "done"})] if state.last_done >= 0 else []
        lines += [json.dumps({"batch": batch, "state": "decided", "txns": [t.to_json() for t in txns]})
                  for batch, txns in pending_batches(state)]  # fmt: skip
        atomic_write(self.path, "".join(line + "\n" for line in lines).encode())


# --- the writers ------------------------------------------------------------------------------------------------


def _net_config(options: SinkOptions) -> dict[str, Any]:
    return {"bootstrap.servers": options.bootstrap_servers, **options.client_config}


def _sink_options(options: Mapping[str, str]) -> tuple[SinkOptions, str | None]:
    rest = {k: v for k, v in options.items() if k.lower() not in EXACTLY_ONCE_KEYS}
    prefix = next((str(v) for k, v in options.items() if k.lower() == "transactionalidprefix"), None)
    if prefix is not None and not prefix.strip():
        raise SourceOptionError("option 'transactionalIdPrefix' must not be empty")
    return parse_sink_options(rest), prefix.strip() if prefix else None


class ExactlyOnceStreamWriter(DataSourceStreamArrowWriter):
    """See the module docstring. Constructed on the driver, where it first finishes decided batches."""

    def __init__(self, options: dict[str, str], schema: StructType) -> None:
        self.options, prefix = _sink_options(options)
        self.fields = schema.fieldNames()
        checkpoint = next((str(v) for k, v in options.items() if k.lower() == "checkpointlocation"), None)
        if not checkpoint:
            raise SourceOptionError("exactlyOnce needs the query's checkpointLocation (its decision log lives there)")
        self.checkpoint = checkpoint
        self.prefix = prefix or "groupstream-sink-" + hashlib.sha256(checkpoint.encode()).hexdigest()[:16]
        self._finish_decided()

    def _finish_decided(self) -> None:
        decisions = DecisionLog(self.checkpoint)
        state = decisions.read()
        for batch, txns in pending_batches(state):
            log.info("batch %d was decided before a restart: committing its %d transactions", batch, len(txns))
            try:
                _complete_all(_net_config(self.options), txns, True)
            except PreparedTransactionLost as e:
                raise RuntimeError(
                    f"batch {batch} was decided but a transaction of it was aborted before its commit reached it "
                    f"({e}): its records are lost; raise kafka.transaction.timeout.ms, and remove {decisions.path} "
                    "to go on"
                ) from None
            decisions.append({"batch": batch, "state": "done"})
            state.pending.pop(batch, None)
            state.last_done = max(state.last_done, batch)
        if state.lines > _COMPACT_AFTER:
            decisions.compact(state)

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        return write_prepared(self.options, self.fields, iterator, f"{self.prefix}-{_partition_id()}")

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        txns = _prepared_of(messages)
        decisions = DecisionLog(self.checkpoint)
        state = decisions.read()
        config = _net_config(self.options)
        if is_replay(state, batchId):
            log.info("batch %d is a re-run of a batch already committed: aborting its %d transactions", batchId,
                     len(txns))  # fmt: skip
            _complete_all(config, txns, False)
            return
        decisions.append({"batch": batchId, "state": "decided", "txns": [t.to_json() for t in txns]})
        _complete_all(config, txns, True)
        decisions.append({"batch": batchId, "state": "done"})
        if state.lines + 2 > _COMPACT_AFTER:
            decisions.compact(decisions.read())
        log.info("batch %d: %d records committed in %d transactions", batchId,
                 sum(getattr(m, "records", 0) for m in messages), len(txns))  # fmt: skip

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        _complete_all(_net_config(self.options), _prepared_of(messages), False)
        log.warning("batch %d aborted: its transactions were aborted, no record of it is visible", batchId)


class ExactlyOnceBatchWriter(DataSourceArrowWriter):
    """A batch write in one transaction per task, committed by the driver when every task succeeded."""

    def __init__(self, options: dict[str, str], schema: StructType) -> None:
        self.options, prefix = _sink_options(options)
        self.fields = schema.fieldNames()
        self.prefix = prefix or f"groupstream-write-{uuid.uuid4().hex}"

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        return write_prepared(self.options, self.fields, iterator, f"{self.prefix}-{_partition_id()}")

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        _complete_all(_net_config(self.options), _prepared_of(messages), True)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        _complete_all(_net_config(self.options), _prepared_of(messages), False)
