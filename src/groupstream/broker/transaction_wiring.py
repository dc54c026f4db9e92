"""The transaction coordinator on the broker: `__transaction_state`, its shards on the coordinator runtime, and
the commit and abort markers the shards ask for.

The shards (`groupstream.transaction.shard`) decide; this module does what a decision needs of the broker. When
a result's records are durable (its PrepareCommit / PrepareAbort), each marker job is run: a COMMIT or ABORT
control batch is appended to every partition of the transaction (``PartitionLog.append_marker``), the broker
waits until those partitions are durable (their flush policy, as a produce with acks=all does), and then tells
the shard, which writes CompleteCommit / CompleteAbort. A partition whose disk refuses the marker is retried
(every second) until it takes it: the decision is durable and must reach every partition. A marker the log
refuses as stale (an older producer epoch than the partition has seen) needs no retry: a newer epoch already
ended that transaction there.

Markers on `__consumer_offsets` partitions are also handed to the group coordinator (``txn_markers_written``)
when it knows how to complete transactional offsets.

Every marker carries coordinator epoch 0: one broker coordinates every partition, so no older coordinator can
exist (with several nodes it is the `__transaction_state` partition's leader epoch).
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from groupstream.broker.coordinator_runtime import CoordinatorRuntime, Shard
from groupstream.broker.group_routing import partition_for
from groupstream.broker.offsets_topic import OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC, offsets_topic_configs
from groupstream.protocol.compiler import CompiledApi
from groupstream.protocol.topic_partition import TopicPartition
from groupstream.storage.catalog import Catalog
from groupstream.storage.errors import StaleMarkerError, StorageError, UnknownTopicError
from groupstream.transaction.records import encode_record, transaction_records
from groupstream.transaction.shard import MarkerJob, TransactionCoordinatorConfig, TransactionShard, TxnResult

if TYPE_CHECKING:
    from groupstream.broker.node import Broker

log = logging.getLogger("groupstream.broker.transactions")

COORDINATOR_EPOCH = 0
_MARKER_RETRY_S = 1.0


def ensure_transaction_topic(catalog: Catalog, num_partitions: int, segment_bytes: int) -> int:
    """Create `__transaction_state` if missing (compacted, fsynced, as `__consumer_offsets`); its count wins
    over ``transaction.state.log.num.partitions`` once it exists, since it places every transactional id."""
    info = catalog.get_topic(TRANSACTION_STATE_TOPIC)
    if info is None:
        info = catalog.create_topic(TRANSACTION_STATE_TOPIC, num_partitions, offsets_topic_configs(segment_bytes))
        log.info("created %s with %d partitions", TRANSACTION_STATE_TOPIC, num_partitions)
    return info.partitions


class TxnTopics:
    """`groupstream.transaction.shard.TxnTopicsView` over the catalog (read at call time)."""

    def __init__(self, catalog: Catalog, offsets_partitions: int) -> None:
        self._catalog = catalog
        self._offsets_partitions = offsets_partitions

    def partition_count(self, topic: str) -> int | None:
        info = self._catalog.get_topic(topic)
        return None if info is None else info.partitions

    def offsets_partition(self, group_id: str) -> TopicPartition:
        return TopicPartition(OFFSETS_TOPIC, partition_for(group_id, self._offsets_partitions))


class TransactionCoordinator:
    """`__transaction_state` is created, as in Kafka, when the first transactional client asks for its
    coordinator (``serving()``), so brokers that never see a transaction do not carry 50 more partitions;
    once it exists it is loaded at every start."""

    def __init__(self, broker: Broker, num_partitions: int, segment_bytes: int, config: TransactionCoordinatorConfig,
                 offsets_partitions: int) -> None:
        self._broker = broker
        self._num_partitions = num_partitions
        self._segment_bytes = segment_bytes
        self._config = config
        self._view = TxnTopics(broker.catalog, offsets_partitions)
        self.runtime: CoordinatorRuntime | None = None
        if broker.catalog.get_topic(TRANSACTION_STATE_TOPIC) is not None:
            self.runtime = self._runtime()
        self._started = False
        self._closed = False
        self._retries: set[asyncio.TimerHandle] = set()
        self._ending: dict[str, list[asyncio.Future[None]]] = {}
        self.produce_gates: dict[str, asyncio.Future[None]] = {}
        """Per transactional id, done when its latest Produce waiting for an implicit add has appended."""
        self.on_offsets_marker: Callable[[int, int, int, bool], None] | None = None
        """Called with (``__consumer_offsets`` partition, producer id, epoch, commit) after such a marker."""

    def _runtime(self) -> CoordinatorRuntime:
        partitions = ensure_transaction_topic(self._broker.catalog, self._num_partitions, self._segment_bytes)
        config, broker = self._config, self._broker

        def make(partition: int) -> Shard:
            return cast(Shard, TransactionShard(partition, config, broker.producer_ids.allocate))

        return CoordinatorRuntime(
            broker, TRANSACTION_STATE_TOPIC, partitions, make, metadata=self._view, encode=encode_record,
            decode=transaction_records, error_response=error_response, after_durable=self._after_durable,
        )  # fmt: skip

    def serving(self) -> CoordinatorRuntime:
        """The runtime, creating `__transaction_state` and loading it first if this is the first use (on the
        running loop; a shard still loading answers COORDINATOR_LOAD_IN_PROGRESS)."""
        if self.runtime is None:
            self.runtime = self._runtime()
        if not self._started and not self._closed:
            self._started = True
            self.runtime.start()
        return self.runtime

    def partition_for(self, transactional_id: str) -> int:
        return self.serving().partition_for(transactional_id)

    def wait_ended(self, transactional_id: str) -> asyncio.Future[None]:
        """Done when the next transaction of ``transactional_id`` whose markers are being written completes
        (its Complete* record applied): a TV2 client's next Produce waits for it instead of polling."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._ending.setdefault(transactional_id, []).append(future)
        return future

    def forget_waiter(self, transactional_id: str, future: asyncio.Future[None]) -> None:
        waiters = self._ending.get(transactional_id, [])
        if future in waiters:
            waiters.remove(future)
        if not waiters:
            self._ending.pop(transactional_id, None)

    def start(self) -> None:
        if self.runtime is not None:
            self.serving()

    async def close(self) -> None:
        self._closed = True
        for handle in self._retries:
            handle.cancel()
        self._retries.clear()
        if self.runtime is not None:
            await self.runtime.close()

    # -- markers ----------------------------------------------------------------------------------------

    def _after_durable(self, partition: int, result: Any) -> None:
        assert isinstance(result, TxnResult)
        for job in result.markers:
            self._write_markers(partition, job, set(job.partitions))

    def _write_markers(self, partition: int, job: MarkerJob, todo: set[TopicPartition]) -> None:
        broker = self._broker
        now = broker.now_ms()
        waits: list[asyncio.Future[None]] = []
        failed: set[TopicPartition] = set()
        for topic, index in sorted(todo):
            try:
                plog = broker.catalog.log(topic, index)
            except (UnknownTopicError, KeyError, StorageError):
                continue  # the topic was deleted: no partition is left to mark
            try:
                marker = plog.append_marker(job.producer_id, job.producer_epoch, job.commit, COORDINATOR_EPOCH, now)
            except StaleMarkerError as e:
                log.info("transaction %r: %s (a newer epoch ended it there)", job.transactional_id, e)
                continue
            except StorageError as e:
                log.warning("transaction %r: the %s marker for %s-%d failed (%s); retrying", job.transactional_id,
                            "commit" if job.commit else "abort", topic, index, e)  # fmt: skip
                failed.add(TopicPartition(topic, index))
                continue
            # The marker's bytes wake the fetches parked on the partition; a read_committed one re-reads (the
            # marker moved the last stable offset) and parks again while too little is readable.
            broker.purgatory.notify(TopicPartition(topic, index), marker.size_bytes)
            broker.flusher.appended(plog, plog.config.flush_policy)
            waits.append(broker.flusher.wait_flushed(plog, plog.log_end_offset))
            if topic == OFFSETS_TOPIC and self.on_offsets_marker is not None:
                self.on_offsets_marker(index, job.producer_id, job.producer_epoch, job.commit)
        if failed:
            loop = asyncio.get_running_loop()
            handle: asyncio.TimerHandle | None = None

            def retry() -> None:
                if handle is not None:
                    self._retries.discard(handle)
                self._write_markers(partition, job, failed)

            handle = loop.call_later(_MARKER_RETRY_S, retry)
            self._retries.add(handle)
            return
        done = asyncio.gather(*waits, return_exceptions=True)
        done.add_done_callback(functools.partial(self._markers_durable, partition, job))

    def _markers_durable(self, partition: int, job: MarkerJob, done: asyncio.Future[list[Any]]) -> None:
        if done.cancelled():
            return
        if any(isinstance(outcome, BaseException) for outcome in done.result()):
            # written but not known durable: write them again (a marker repeated is harmless to readers)
            log.warning("transaction %r: a marker flush failed; writing its markers again", job.transactional_id)
            handle = asyncio.get_running_loop().call_later(
                _MARKER_RETRY_S, self._write_markers, partition, job, set(job.partitions))
            self._retries.add(handle)
            return
        if self.runtime is not None:
            self.runtime.call(partition, lambda shard, now: cast(Any, shard).markers_written(
            job.transactional_id, job.producer_id, job.producer_epoch, now))
        for future in self._ending.pop(job.transactional_id, []):
            if not future.done():
                future.set_result(None)


# -- error answers for requests the coordinator cannot serve ---------------------------------------------


def error_response(api: CompiledApi, version: int, body: Any, code: int) -> Any:
    """The whole response to a transaction request failing with ``code`` (not coordinator, loading, ...)."""
    R = api.Response
    name = api.name
    if name == "InitProducerId":
        return R(throttle_time_ms=0, error_code=code, producer_id=-1, producer_epoch=-1)
    if name in ("EndTxn",):
        return R(throttle_time_ms=0, error_code=code, producer_id=-1, producer_epoch=-1)
    if name == "AddOffsetsToTxn":
        return R(throttle_time_ms=0, error_code=code)
    if name == "AddPartitionsToTxn":
        if version >= 4:
            return R(throttle_time_ms=0, error_code=code, results_by_transaction=[])
        T = R.AddPartitionsToTxnTopicResult
        P = T.AddPartitionsToTxnPartitionResult
        return R(throttle_time_ms=0, results_by_topic_v3_and_below=[
            T(name=t.name, results_by_partition=[P(partition_index=p, partition_error_code=code) for p in t.partitions])
            for t in body.v3_and_below_topics])  # fmt: skip
    if name == "DescribeTransactions":
        S = R.TransactionState
        return R(throttle_time_ms=0, transaction_states=[
            S(error_code=code, transactional_id=t, transaction_state="", transaction_timeout_ms=0,
              transaction_start_time_ms=-1, producer_id=-1, producer_epoch=-1, topics=[])
            for t in body.transactional_ids])  # fmt: skip
    if name == "ListTransactions":
        return R(throttle_time_ms=0, error_code=code, unknown_state_filters=[], transaction_states=[])
    raise ValueError(f"no error answer for {name}")


