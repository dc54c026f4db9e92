"""The ``groupstream`` PySpark data source: batch and streaming reads of Kafka topics, and a sink.

Reads mirror Spark's Kafka source (options, output columns, offsets JSON), on PySpark's Python Data Source API;
the driver plans explicit offset ranges and each task reads one range (see `executor`). A streaming query
checkpoints its offsets in Spark; after each micro-batch commits, the end offsets are also committed to the
consumer group named by ``group.id``, so ``groupstream groups describe`` and any lag tool see the job's lag.

The sink produces the rows through our idempotent producer (Arrow batches, ``produce_arrow``) with acks=all and waits for every ack before the
task reports success: at-least-once. A task that Spark retries produces its rows again, so a retried task or a
restarted streaming batch can duplicate records. With ``exactlyOnce=true`` each task writes in a Kafka
transaction that the driver commits once the batch is decided (see `kafka_eos`): exactly once for read_committed
readers.

The executor (our Consumer, pyarrow.compute), the sink and the exactly-once writer (our Producer) are imported
only where a task or a writer runs: Spark starts a fresh Python process on the driver for every streaming query
(its source runner), so whatever this module imports is paid again by every query before its first micro-batch.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from groupstream.client.errors import KafkaError
from groupstream.protocol.error_codes import ErrorCode
from groupstream.spark.cluster import Cluster, DataLossError
from groupstream.spark.dataloss import Position, find_losses, next_end, starts, warning_text
from groupstream.spark.options import (
    EARLIEST,
    LATEST,
    SourceOptions,
    parse_sink_options,
    parse_source_options,
)
from groupstream.spark.planning import (
    OffsetRange,
    ReadSpec,
    TopicPartition,
    from_spark_offsets,
    rate_limit,
    split_ranges,
    to_spark_offsets,
    topic_ids_of,
)

if TYPE_CHECKING:
    from groupstream.spark.region_reader import RegionReaderCore

__all__ = ["FORMAT", "GroupstreamDataSource"]

FORMAT = "groupstream"
log = logging.getLogger("groupstream.spark")

_SCHEMA = (
    "key binary, value binary, topic string, partition int, offset long, timestamp timestamp, timestampType int"
)
_HEADERS = ", headers array<struct<key: string, value: binary>>"


class RangePartition(InputPartition):
    """One task's range (``value``). Tasks read ``value`` rather than checking the class: Spark may hand the
    worker a copy of this class pickled by value, which ``isinstance`` would not recognise."""

    def __init__(self, rng: OffsetRange) -> None:
        super().__init__(rng)


class GroupstreamDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> str:
        include = str(self.options.get("includeHeaders", "false")).strip().lower() == "true"
        return _SCHEMA + (_HEADERS if include else "")

    def reader(self, schema: StructType) -> DataSourceReader:
        return BatchReader(parse_source_options(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return StreamReader(parse_source_options(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from groupstream.spark.kafka_eos import ExactlyOnceBatchWriter, exactly_once_requested

        if exactly_once_requested(self.options):
            return ExactlyOnceBatchWriter(dict(self.options), schema)
        return BatchWriter(dict(self.options), schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from groupstream.spark.kafka_eos import ExactlyOnceStreamWriter, exactly_once_requested

        if exactly_once_requested(self.options):
            return ExactlyOnceStreamWriter(dict(self.options), schema)
        return StreamWriter(dict(self.options), schema)


def _read_spec(options: SourceOptions, streaming: bool) -> ReadSpec:
    return ReadSpec(
        bootstrap_servers=options.bootstrap_servers,
        client_config=tuple(sorted(options.client_config.items())),
        include_headers=options.include_headers,
        fail_on_data_loss=options.fail_on_data_loss,
        poll_timeout_ms=options.poll_timeout_ms,
        streaming=streaming,
    )


def _position(offsets: dict[str, Any]) -> Position:
    return Position(from_spark_offsets(offsets), topic_ids_of(offsets))


def _same_topic(a: str | None, b: str | None) -> bool:
    """Offsets taken under id ``a`` still belong to the topic that has id ``b`` (an unknown id matches)."""
    return a is None or b is None or a == b


def _resolve(cluster: Cluster, options: SourceOptions, tps: Sequence[TopicPartition], which: str) -> dict[
    TopicPartition, int
]:
    """Turn startingOffsets / endingOffsets into concrete offsets for ``tps``."""
    spec = options.starting if which == "starting" else options.ending
    wanted = set(tps)
    if spec.kind == "earliest":
        return cluster.earliest(tps)
    if spec.kind == "latest":
        return cluster.latest(tps)
    if spec.kind == "timestamp":
        assert spec.timestamp is not None
        return cluster.by_timestamp(dict.fromkeys(tps, spec.timestamp), options.timestamp_strategy)
    if spec.kind == "timestamps":
        named = {tp: ts for tp, ts in spec.offsets.items() if tp in wanted}
        return cluster.by_timestamp(named, options.timestamp_strategy) | _default(cluster, options, tps, named)
    if spec.kind == "group":
        assert options.group_id is not None
        committed = cluster.committed(options.group_id, tps)
        return committed | _default(cluster, options, tps, committed)
    # explicit offsets: -2 earliest, -1 latest; partitions the JSON leaves out follow the query's default
    explicit = {tp: o for tp, o in spec.offsets.items() if tp in wanted}
    out = {tp: o for tp, o in explicit.items() if o >= 0}
    out |= cluster.earliest([tp for tp, o in explicit.items() if o == EARLIEST])
    out |= cluster.latest([tp for tp, o in explicit.items() if o == LATEST])
    return out | _default(cluster, options, tps, explicit)


def _default(cluster: Cluster, options: SourceOptions, tps: Sequence[TopicPartition], given: Mapping[
    TopicPartition, int
]) -> dict[TopicPartition, int]:
    rest = [tp for tp in tps if tp not in given]
    return cluster.earliest(rest) if options.fallback_reset == "earliest" else cluster.latest(rest)


def _read(spec: ReadSpec, partition: InputPartition) -> Iterator[Any]:
    from groupstream.spark.executor import read_range

    rng = partition.value
    if rng is None:  # PySpark plans one task even when we plan none: it reads nothing
        return iter(())
    return read_range(spec, rng)


class BatchReader(DataSourceReader):
    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self.spec = _read_spec(options, streaming=False)

    def partitions(self) -> Sequence[InputPartition]:
        """One range per partition from the starting to the ending offsets, each with its topic's id, so that a
        task run after the topic was deleted and created again notices (see `executor.read_range`)."""
        cluster = Cluster(self.options)
        try:
            tps, ids = cluster.partitions_and_ids(must_exist=True)
            start = _resolve(cluster, self.options, tps, "starting")
            end = _resolve(cluster, self.options, tps, "ending")
        finally:
            cluster.close()
        ranges = []
        for tp in tps:
            s, e = start[tp], end[tp]
            if s > e:
                raise DataLossError(f"{tp[0]}-{tp[1]}: the starting offset {s} is after the ending offset {e}")
            ranges.append(OffsetRange(tp[0], tp[1], s, e, topic_id=ids.get(tp[0])))
        return [RangePartition(r) for r in split_ranges(ranges, self.options.min_partitions)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return _read(self.spec, partition)


class StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Driver side of a stream. Offsets are ``{"topic": {"partition": next offset}, "@topicIds": {...}}``;
    partitions that appear later (a topic gains partitions, a new topic matches the pattern) start at their
    earliest offset. ``latestOffset`` reports where every partition is, even below where the query was, and
    ``partitions`` finds what was lost between two positions (see `dataloss`): an error under failOnDataLoss,
    else one warning per event, and the query goes on."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self.spec = _read_spec(options, streaming=True)
        self._cluster: Cluster | None = None
        self._target: Position | None = None  # Trigger.AvailableNow's end
        self._progress: dict[TopicPartition, int] | None = None  # last offsets committed to group.id
        self._region: RegionReaderCore | None = None
        if options.region_table is not None:  # its module (region ledger, storage) only for region tables
            from groupstream.spark.region_reader import RegionReaderCore

            self._region = RegionReaderCore(
                options,
                lambda tps: _resolve(self.cluster, options, tps, "starting"),
                lambda: self.cluster.view(),
                lambda tps: self.cluster.earliest(tps),
            )

    @property
    def cluster(self) -> Cluster:
        if self._cluster is None:
            self._cluster = Cluster(self.options)
        return self._cluster

    def initialOffset(self) -> dict[str, Any]:
        if self._region is not None:
            return self._region.initial_offset()
        view = self.cluster.view()
        return to_spark_offsets(_resolve(self.cluster, self.options, sorted(view.latest), "starting"), view.topic_ids)

    def getDefaultReadLimit(self) -> ReadLimit:
        n = self.options.max_offsets_per_trigger
        return ReadAllAvailable() if n is None else ReadMaxRows(n)

    def prepareForTriggerAvailableNow(self) -> None:
        view = self.cluster.view()
        self._target = Position(view.latest, view.topic_ids)

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        if self._region is not None:
            return self._region.latest_offset(limit, None if self._target is None else dict(self._target.offsets))
        begin = _position(start)
        view = self.cluster.view()
        # Spark asks for the next batch's end only once the batch ending at ``start`` is committed to its
        # checkpoint (a batch in the offset log but not in the commit log is re-run first), so ``start`` is
        # progress to report. Spark's own ``commit`` call comes one batch later, and never for the last batch
        # of a Trigger.AvailableNow run; this one does. Only partitions of the topics that are still there.
        self._commit_progress({
            tp: o for tp, o in begin.offsets.items()
            if tp in view.latest and _same_topic(begin.topic_ids.get(tp[0]), view.topic_ids.get(tp[0]))
        })  # fmt: skip
        end = next_end(begin, view, self._target)
        if isinstance(limit, ReadMaxRows):
            first = starts(begin, end, find_losses(begin, end), self.cluster.earliest)
            end = Position(rate_limit(first, end.offsets, limit.max_rows), end.topic_ids)
        return to_spark_offsets(end.offsets, end.topic_ids)

    def reportLatestOffset(self) -> dict[str, Any] | None:
        view = self.cluster.view()
        return to_spark_offsets(view.latest, view.topic_ids)

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        if self._region is not None:
            return [RangePartition(r) for r in self._region.partitions(end)]
        begin, finish = _position(start), _position(end)
        losses = find_losses(begin, finish)
        if losses and self.options.fail_on_data_loss:
            raise DataLossError("; ".join(loss.describe() for loss in losses))
        for loss in losses:
            log.warning("%s", warning_text(loss))
        first = starts(begin, finish, losses, self.cluster.earliest)
        ranges = [
            OffsetRange(t, p, first[TopicPartition(t, p)], e, topic_id=finish.topic_ids.get(t))
            for (t, p), e in sorted(finish.offsets.items())
        ]
        return [RangePartition(r) for r in split_ranges(ranges, self.options.min_partitions)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return _read(self.spec, partition)

    def commit(self, end: dict[str, Any]) -> None:
        if self._region is not None:
            return  # the table's ledger is the progress; the next plan commits it to the group
        self._commit_progress(from_spark_offsets(end))

    def _commit_progress(self, offsets: dict[TopicPartition, int]) -> None:
        """Commit a finished batch's end offsets to ``group.id`` (once per distinct position), so lag tools see
        the job. Spark's checkpoint stays the source of truth for where the query resumes."""
        group = self.options.group_id
        if group is None or not offsets or offsets == self._progress:
            return
        try:
            self.cluster.commit(group, offsets)
        except Exception as e:  # progress reporting must not fail the query
            if isinstance(e, KafkaError) and e.code in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_ID):
                # a topic deleted since: the plan of the next micro-batch reports that, once
                log.info("not committing the stream's offsets to group %r: %s", group, e)
            else:
                log.warning("could not commit the stream's offsets to group %r: %s", group, e)
            return
        self._progress = dict(offsets)

    def stop(self) -> None:
        if self._region is not None:
            self._region.stop()
        if self._cluster is not None:
            self._cluster.close()
            self._cluster = None


class _Committed(WriterCommitMessage):
    def __init__(self, records: int) -> None:
        self.records = records


class BatchWriter(DataSourceArrowWriter):
    """Spark hands each task its rows as Arrow record batches (see `sink`)."""

    def __init__(self, options: dict[str, str], schema: StructType) -> None:
        self.options = parse_sink_options(options)
        self.fields = schema.fieldNames()

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        from groupstream.spark.sink import write_batches

        return _Committed(write_batches(self.options, self.fields, iterator))


class StreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, options: dict[str, str], schema: StructType) -> None:
        self.options = parse_sink_options(options)
        self.fields = schema.fieldNames()

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        from groupstream.spark.sink import write_batches

        return _Committed(write_batches(self.options, self.fields, iterator))

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        log.info("batch %d: %d records produced", batchId, sum(getattr(m, "records", 0) for m in messages))

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        log.warning("batch %d aborted; records its tasks already produced stay in the topic (at-least-once)", batchId)
