"""The producer's request manager: ready batches become Produce requests; responses settle or retry them.

Pure: it returns requests (seed 002) and is told the time. Per poll it expires batches past
``delivery.timeout.ms``, asks the accumulator which leaders have sendable partitions, drains one request per
leader that has room under ``max.in.flight.requests.per.connection``, and stamps first-time batches with their
send order (and, with idempotence, their sequence).

Ordering. A batch that fails with a retriable error goes back ahead of newer batches. Its partition is then
*recovering*: a resent batch goes only when nothing else of the partition is in flight, and nothing else goes
while a resent batch is out, so retries are replayed one by one in their original order. With idempotence
the broker's sequence check turns any reordering into OUT_OF_ORDER_SEQUENCE_NUMBER for the later batch,
which is retried too, so a partition's records keep their order; without it, as in Java, a retry can land
after a newer batch unless ``max.in.flight.requests.per.connection=1``.

Errors (per partition). Retriable ones are retried after ``retry.backoff.ms`` (doubling up to
``retry.backoff.max.ms``) while ``retries`` and ``delivery.timeout.ms`` allow; NOT_LEADER_OR_FOLLOWER and the
unknown-topic errors also refresh the metadata. MESSAGE_TOO_LARGE and other non-retriable errors fail the
batch. UNKNOWN_PRODUCER_ID, and OUT_OF_ORDER_SEQUENCE_NUMBER for the first unacknowledged batch, mean the
broker lost the producer's state: the epoch is bumped (KIP-360) and the batch resent with a new sequence.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from groupstream.client.errors import KafkaError
from groupstream.client.net.config import exponential_backoff_ms
from groupstream.client.net.metadata import MetadataCache
from groupstream.client.net.requests import ClientResponse, PollResult, UnsentRequest, min_delay
from groupstream.client.producer.accumulator import RecordAccumulator
from groupstream.client.producer.batch import ProducerBatch
from groupstream.client.producer.config import MAX_IDEMPOTENT_IN_FLIGHT
from groupstream.client.producer.errors import ProducerTimeoutError
from groupstream.client.producer.idempotence import IdempotenceManager
from groupstream.client.producer.metrics import ProducerMetrics
from groupstream.client.producer.transactions import TransactionManager
from groupstream.protocol.error_codes import ErrorCode, is_retriable
from groupstream.protocol.messages import by_name

_PRODUCE = by_name("Produce")
_MAX_VERSION_BY_NAME = 12  # v13 names topics by id (KIP-516); below it by name

_REFRESH_METADATA = frozenset(
    {
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.UNKNOWN_TOPIC_ID,
        ErrorCode.KAFKA_STORAGE_ERROR,
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.REQUEST_TIMED_OUT,
    }
)
_TOO_LARGE = frozenset({ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE})
# a transactional producer's: fatal (fenced by a newer instance, not authorized), or ending the transaction
_TXN_FATAL = frozenset(
    {
        ErrorCode.PRODUCER_FENCED,
        ErrorCode.INVALID_PRODUCER_EPOCH,
        ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        ErrorCode.INVALID_TXN_STATE,
    }
)
_TXN_ABORTABLE = frozenset(
    {
        ErrorCode.UNKNOWN_PRODUCER_ID,
        ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
        ErrorCode.INVALID_PRODUCER_ID_MAPPING,
        ErrorCode.TRANSACTION_ABORTABLE,
    }
)

# batch, base offset, log append time (-1: CreateTime), error (None: delivered)
BatchDone = Callable[[ProducerBatch, int, int, BaseException | None], None]


@dataclass(frozen=True)
class SenderConfig:
    acks: int = -1
    request_timeout_ms: int = 30_000
    retries: int = 2**31 - 1
    retry_backoff_ms: int = 100
    retry_backoff_max_ms: int = 1_000
    delivery_timeout_ms: int = 120_000
    max_in_flight: int = 5
    max_request_size: int = 1_048_576
    transactional_id: str | None = None


class Sender:
    def __init__(
        self,
        config: SenderConfig,
        accumulator: RecordAccumulator,
        metadata: MetadataCache,
        idempotence: IdempotenceManager | None,
        on_done: BatchDone,
    ) -> None:
        self.config = config
        self._acc = accumulator
        self._metadata = metadata
        self._idem = idempotence
        self._on_done = on_done
        self.metrics: ProducerMetrics | None = None
        self.txn: TransactionManager | None = None  # a transactional producer's (set by the producer)
        self._node_in_flight: dict[int, int] = {}
        self._tp_in_flight: dict[tuple[str, int], int] = {}
        self._recovering_out: set[tuple[str, int]] = set()  # partitions with a resent batch in flight
        self._in_flight_batches = 0
        self._send_order = 0
        self._closed_error: BaseException | None = None
        self._last_poll_ms = 0
        if idempotence is not None:
            idempotence.on_new_epoch = self._renumber_queued

    # --- status ------------------------------------------------------------------------------------------------

    @property
    def in_flight_batches(self) -> int:
        return self._in_flight_batches

    def in_flight(self, tp: tuple[str, int]) -> int:
        return self._tp_in_flight.get(tp, 0)

    # --- polling -----------------------------------------------------------------------------------------------

    def poll(self, now_ms: int) -> PollResult:
        self._last_poll_ms = now_ms
        acc = self._acc
        for batch in acc.expire(now_ms):
            self._fail(batch, self._timeout_error(batch, now_ms), now_ms)
        idem = self._idem
        if idem is not None and idem.fatal_error is not None:
            with acc.lock:
                acc.refuse(idem.fatal_error)  # produce raises it from now on
            for batch in acc.abort_all():
                self._fail(batch, idem.fatal_error, now_ms)
            return PollResult()
        if not acc.has_batches():
            return PollResult()
        expiry = acc.next_expiry_ms(now_ms)
        if idem is not None and not idem.ready:
            return PollResult((), expiry)  # the id (or a new epoch) comes first
        leader_of = self._metadata.leader
        limit = self.config.max_in_flight
        requests: list[UnsentRequest] = []
        while True:  # one request per ready node per round, until nodes run out of data or of in-flight room
            ready = acc.ready(now_ms, leader_of)
            if ready.unknown_leaders:
                self._metadata.add_topics(ready.unknown_leaders)
                self._metadata.request_update()
            nodes = [n for n in ready.nodes if self._node_in_flight.get(n, 0) < limit]
            if not nodes:
                break
            drained = acc.drain(now_ms, nodes, leader_of, self.config.max_request_size, self._may_send)
            if not drained:
                break
            for node, batches in drained.items():
                requests.append(self._produce_request(node, batches, now_ms))
        return PollResult(requests, min_delay(ready.next_check_ms, expiry))

    def _may_send(self, batch: ProducerBatch) -> bool:
        tp = batch.tp
        if self.txn is not None and not self.txn.may_send(tp):
            return False  # AddPartitionsToTxn first
        if tp in self._recovering_out:
            return False  # a resent batch is out: wait for its verdict before anything else of this partition
        out = self._tp_in_flight.get(tp, 0)
        if batch.is_retry:
            return out == 0
        if self._idem is not None:
            return out < MAX_IDEMPOTENT_IN_FLIGHT
        return out == 0 if self.config.max_in_flight == 1 else True

    def _produce_request(self, node: int, batches: list[ProducerBatch], now_ms: int) -> UnsentRequest:
        idem = self._idem
        for b in batches:
            if not b.is_retry:
                b.drain_order = self._send_order
                self._send_order += 1
                if idem is not None:
                    idem.assign(b)  # closes the batch with its sequence in the header
            b.close()
            b.attempts += 1
            b.in_flight = True
            tp = b.tp
            self._tp_in_flight[tp] = self._tp_in_flight.get(tp, 0) + 1
            if b.attempts > 1:
                self._recovering_out.add(tp)
        self._node_in_flight[node] = self._node_in_flight.get(node, 0) + 1
        self._in_flight_batches += len(batches)
        by_topic: dict[str, list[ProducerBatch]] = {}
        for b in batches:
            by_topic.setdefault(b.topic, []).append(b)
        ids = {t: self._metadata.topic_id(t) for t in by_topic}
        by_id = all(i is not None for i in ids.values())
        acks = self.config.acks
        timeout = self.config.request_timeout_ms
        tid = self.config.transactional_id

        def body(version: int) -> Any:
            R: Any = _PRODUCE.Request
            TD = R.TopicProduceData
            PD = TD.PartitionProduceData
            topics = []
            for topic, bs in by_topic.items():
                parts = [PD(index=b.partition, records=b.data) for b in bs]
                if version >= 13:
                    topics.append(TD(topic_id=ids[topic], partition_data=parts))
                else:
                    topics.append(TD(name=topic, partition_data=parts))
            return R(transactional_id=tid, acks=acks, timeout_ms=timeout, topic_data=topics)

        names_by_id = {i: t for t, i in ids.items() if i is not None}
        if self.metrics is not None:
            sizes = [b.size for b in batches]
            self.metrics.request_sent(sum(b.record_count for b in batches), sum(sizes), sizes, now_ms)
        return UnsentRequest(
            _PRODUCE,
            body,
            lambda response: self._on_response(node, batches, names_by_id, response, now_ms),
            node_id=node,
            max_version=None if by_id else _MAX_VERSION_BY_NAME,
            expect_response=acks != 0,
        )

    # --- responses ---------------------------------------------------------------------------------------------

    def _on_response(
        self,
        node: int,
        batches: list[ProducerBatch],
        names_by_id: dict[uuid.UUID, str],
        response: ClientResponse,
        sent_ms: int,
    ) -> None:
        now = response.received_ms
        if self.metrics is not None and response.error is None:
            self.metrics.request_answered(now - sent_ms, now)
        self._node_in_flight[node] -= 1
        self._in_flight_batches -= len(batches)
        for b in batches:
            tp = b.tp
            left = self._tp_in_flight[tp] - 1
            if left:
                self._tp_in_flight[tp] = left
            else:
                del self._tp_in_flight[tp]
            if b.attempts > 1:
                self._recovering_out.discard(tp)
            b.in_flight = False
        if response.error is not None:
            err = response.error
            retriable = isinstance(err, KafkaError) and err.retriable
            if retriable:
                self._metadata.request_update()
            for b in batches:
                self._retry_or_fail(b, err, now) if retriable else self._fail(b, err, now)
            return
        body = response.body
        if body is None:  # acks=0: handed to the socket, nothing more will be known
            for b in batches:
                self._done(b, -1, -1, None)
            return
        results: dict[tuple[str, int], Any] = {}
        for t in body.responses:
            name = t.name if response.version < 13 else names_by_id.get(t.topic_id, "")
            for p in t.partition_responses:
                results[(name, p.index)] = p
        for b in batches:
            p = results.get(b.tp)
            if p is None:
                err = KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, "the response does not mention this partition",
                                 resource=f"{b.topic}-{b.partition}")  # fmt: skip
                self._retry_or_fail(b, err, now)
            else:
                self._on_partition(b, p, now)

    def _on_partition(self, b: ProducerBatch, p: Any, now_ms: int) -> None:
        code = p.error_code
        idem = self._idem
        if code == ErrorCode.NONE or (code == ErrorCode.DUPLICATE_SEQUENCE_NUMBER and idem is not None):
            if idem is not None:
                idem.acknowledged(b)
            self._done(b, p.base_offset, p.log_append_time_ms, None)
            return
        err = KafkaError(code, p.error_message, resource=f"{b.topic}-{b.partition}")
        if code in _TOO_LARGE:
            self._fail(b, err, now_ms)
            return
        txn = self.txn
        if txn is not None and code in _TXN_FATAL:
            txn.fenced(code, f"Produce to {b.topic}-{b.partition}")
            self._fail(b, err, now_ms)
            return
        if txn is not None and code in _TXN_ABORTABLE:
            self._fail(b, err, now_ms)  # the transaction must be aborted; the abort bumps the epoch
            return
        if idem is not None and b.producer_epoch == idem.producer_epoch:
            if code == ErrorCode.UNKNOWN_PRODUCER_ID or code == ErrorCode.INVALID_PRODUCER_EPOCH:
                idem.request_bump(f"{err.name} for {b.topic}-{b.partition}")
                self._retry_or_fail(b, err, now_ms)
                return
            if code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER:
                if idem.is_next_unacknowledged(b):
                    idem.request_bump(f"the broker refused the next sequence of {b.topic}-{b.partition}")
                self._retry_or_fail(b, err, now_ms)  # otherwise an earlier batch failed: this one follows it
                return
        elif idem is not None and code in (
            ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
            ErrorCode.UNKNOWN_PRODUCER_ID,
            ErrorCode.INVALID_PRODUCER_EPOCH,
        ):
            self._retry_or_fail(b, err, now_ms)  # sent at an older epoch: resent renumbered after the bump
            return
        if is_retriable(code):
            if code in _REFRESH_METADATA:
                self._metadata.request_update()
            self._retry_or_fail(b, err, now_ms)
            return
        self._fail(b, err, now_ms)

    def _retry_or_fail(self, b: ProducerBatch, err: BaseException, now_ms: int) -> None:
        b.last_error = err
        if self._closed_error is not None:
            self._fail(b, err, now_ms)
        elif now_ms - b.created_ms >= self._acc.delivery_timeout_ms:
            self._fail(b, self._timeout_error(b, now_ms), now_ms)
        elif b.attempts > self.config.retries:
            self._fail(b, err, now_ms)
        else:
            backoff = exponential_backoff_ms(
                self.config.retry_backoff_ms, self.config.retry_backoff_max_ms, b.attempts
            )
            self._acc.reenqueue(b, now_ms, backoff)

    def _fail(self, b: ProducerBatch, err: BaseException, now_ms: int) -> None:
        idem = self._idem
        if idem is not None and b.base_sequence >= 0 and b.producer_epoch == idem.producer_epoch:
            idem.request_bump(f"a batch of {b.topic}-{b.partition} failed after it was given a sequence")
        self._done(b, -1, -1, err)

    def _done(
        self, b: ProducerBatch, base_offset: int, log_append_time: int, err: BaseException | None
    ) -> None:
        if err is not None and self.txn is not None:
            self.txn.batch_failed(err)
        self._on_done(b, base_offset, log_append_time, err)

    def abort_queued(self, error: BaseException) -> None:
        """A transaction aborts: its batches not sent yet fail with ``error`` (those in flight are awaited)."""
        now = self._last_poll_ms
        for b in self._acc.abort_all():
            self._fail(b, error, now)

    def _timeout_error(self, b: ProducerBatch, now_ms: int) -> ProducerTimeoutError:
        last = f"; last error: {b.last_error}" if b.last_error is not None else ""
        return ProducerTimeoutError(
            f"{b.record_count} record(s) for {b.topic}-{b.partition} expired: {now_ms - b.created_ms} ms since "
            f"the batch was created, delivery.timeout.ms={self._acc.delivery_timeout_ms}{last}"
        )

    def _renumber_queued(self) -> None:
        """A new epoch: the batches that already had sequences get new ones, from 0, in their send order."""
        idem = self._idem
        assert idem is not None
        for tp in self._acc.partitions():
            for b in self._acc.queued(tp):
                if b.is_retry:
                    idem.assign(b)

    # --- closing -------------------------------------------------------------------------------------------------

    def begin_close(self, now_ms: int) -> None:
        self._acc.begin_close()

    def has_pending_work(self) -> bool:
        return self._acc.has_batches() or self._in_flight_batches > 0

    def fail_pending(self, error: BaseException) -> None:
        self._closed_error = error
        with self._acc.lock:
            self._acc.refuse(error)
        for b in self._acc.abort_all():
            self._done(b, -1, -1, error)
