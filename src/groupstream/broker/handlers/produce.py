"""Produce: validate each batch once (framing, magic, CRC), check idempotent sequences, assign offsets by
patching the batch header in place, append, and answer by ``acks``.

``acks=all`` under ``flush.policy=always`` is answered when the appended offsets are fsynced (grouped with
every other append of the moment); otherwise after the bytes are written to the segment file.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from typing import TYPE_CHECKING, Any

from groupstream.broker.handlers import handles
from groupstream.broker.handlers.transactions import (
    add_partitions_implicitly,
    partitions_outside_transaction,
    verify_transactional_batch,
)
from groupstream.broker.offsets_topic import is_internal
from groupstream.broker.server import NO_RESPONSE
from groupstream.protocol.bodies import PRODUCE, ProduceResponse
from groupstream.protocol.connection import Request
from groupstream.protocol.error_codes import ErrorCode
from groupstream.protocol.errors import PeerProtocolError
from groupstream.protocol.records.batch_header import NO_PRODUCER_ID, iter_batches
from groupstream.protocol.topic_partition import TopicPartition
from groupstream.security.acl import Operation, ResourceType
from groupstream.storage import producer_state as ps
from groupstream.storage.errors import LogWriteError, RecordTooLargeError, StorageError
from groupstream.storage.log import PartitionLog

if TYPE_CHECKING:
    from groupstream.broker.node import Broker
    from groupstream.protocol.bodies import Buffer

log = logging.getLogger("groupstream.broker.produce")


@handles("Produce")
def handle_produce(broker: Broker, request: Request) -> Any:
    """Where ``transaction.version`` 2 is finalized, a Produce v12+ (a KIP-890 part 2 client) with transactional
    batches for partitions not yet in its transaction first has the transaction coordinator add them (as an
    AddPartitionsToTxn would), then appends; older clients must have added them themselves."""
    tid = PRODUCE.body_of(request).transactional_id
    gates = broker.transactions.produce_gates
    before = gates.get(tid) if tid is not None else None
    adds = _implicit_adds(broker, request)
    if adds is None and before is None:
        return _produce(broker, request, {})
    # A producer's requests are appended in the order they came (its sequence numbers), as Kafka, which reads
    # a connection's next request only after answering the last, does: a later produce of the same id, with
    # or without partitions to add, appends after the one waiting for its add.
    assert tid is not None
    appended: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    gates[tid] = appended

    async def after_add() -> Any:
        try:
            if before is not None:
                await before
            now_adds = _implicit_adds(broker, request)
            refused = {} if now_adds is None else await add_partitions_implicitly(broker, request, *now_adds)
            out = _produce(broker, request, refused)
        finally:
            appended.set_result(None)
            if gates.get(tid) is appended:
                del gates[tid]
        return await out if isinstance(out, asyncio.Future) else out

    return asyncio.ensure_future(after_add())


def _implicit_adds(broker: Broker, request: Request) -> tuple[str, int, int, list[TopicPartition]] | None:
    """(transactional id, producer id, epoch, partitions) when a TV2 produce carries transactional batches of
    partitions its ongoing transaction does not hold yet; None when nothing is to be added first."""
    req = PRODUCE.body_of(request)
    tid = req.transactional_id
    if request.version < 12 or tid is None or broker.config.transaction_version < 2:
        return None
    if not broker.authorizer.allowed(Operation.WRITE, ResourceType.TRANSACTIONAL_ID, tid):
        return None
    by_id = request.version >= 13
    wanted: list[TopicPartition] = []
    producer: tuple[int, int] | None = None
    for td in req.topic_data:
        topic = broker.catalog.topic_by_id(td.topic_id) if by_id else broker.catalog.get_topic(td.name)
        if topic is None or is_internal(topic.name):
            continue
        for pd in td.partition_data:
            if not pd.records or not 0 <= pd.index < topic.partitions:
                continue
            try:
                header = next(iter(iter_batches(pd.records)))[1]
            except (PeerProtocolError, StopIteration):
                continue  # the append refuses it with its reason
            if header.is_transactional and not header.is_control:
                producer = producer or (header.producer_id, header.producer_epoch)
                wanted.append(TopicPartition(topic.name, pd.index))
    missing = partitions_outside_transaction(broker, tid, wanted) if producer is not None else []
    if producer is None or not missing:
        return None
    return tid, producer[0], producer[1], missing


def _produce(broker: Broker, request: Request, refused: dict[TopicPartition, tuple[int, str]]) -> Any:
    """The append; ``refused`` answers the partitions whose implicit add failed with a retriable error (a
    response body, `NO_RESPONSE` for acks=0, or a future of the body while a flush is awaited)."""
    req = PRODUCE.body_of(request)
    R = PRODUCE.Response
    PR = R.TopicProduceResponse.PartitionProduceResponse
    acks = req.acks
    now = broker.now_ms()
    # (topic response index, partition response index, the flush it waits for)
    waits: list[tuple[int, int, asyncio.Future[None]]] = []
    topics_out: list[ProduceResponse.TopicProduceResponse] = []
    parts_out: list[list[ProduceResponse.TopicProduceResponse.PartitionProduceResponse]] = []  # topics_out's
    by_id = request.version >= 13
    tid = req.transactional_id
    tid_denied = tid is not None and not broker.authorizer.allowed(Operation.WRITE, ResourceType.TRANSACTIONAL_ID, tid)
    for td in req.topic_data:
        topic = broker.catalog.topic_by_id(td.topic_id) if by_id else broker.catalog.get_topic(td.name)
        unknown = ErrorCode.UNKNOWN_TOPIC_ID if by_id else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        named = topic.name if topic is not None else td.name
        denied = bool(named) and not broker.authorizer.allowed(Operation.WRITE, ResourceType.TOPIC, named)
        parts: list[ProduceResponse.TopicProduceResponse.PartitionProduceResponse] = []
        for pd in td.partition_data:
            if denied:
                parts.append(PR(index=pd.index, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, base_offset=-1,
                                error_message=broker.authorizer.denial(Operation.WRITE, ResourceType.TOPIC, named)))  # fmt: skip
                continue
            if acks not in (0, 1, -1):
                parts.append(PR(index=pd.index, error_code=ErrorCode.INVALID_REQUIRED_ACKS, base_offset=-1))
                continue
            if tid_denied:
                parts.append(PR(index=pd.index, error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, base_offset=-1))
                continue
            if topic is None:
                parts.append(PR(index=pd.index, error_code=unknown, base_offset=-1))
                continue
            if is_internal(topic.name):  # only the coordinator writes __consumer_offsets
                parts.append(PR(index=pd.index, error_code=ErrorCode.INVALID_TOPIC_EXCEPTION, base_offset=-1,
                                error_message=f"cannot append to internal topic {topic.name}"))
                continue
            if not 0 <= pd.index < topic.partitions:
                parts.append(PR(index=pd.index, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, base_offset=-1))
                continue
            plog = broker.catalog.log(topic.name, pd.index)
            message: str | None
            if refused and (tp := TopicPartition(topic.name, pd.index)) in refused:
                code, message = refused[tp]
                base = -1
            else:
                code, base, message = _append(broker, plog, pd.records, now, tid)
            if code == ErrorCode.NONE and base >= 0:
                policy = plog.config.flush_policy
                end = plog.log_end_offset
                if acks == -1 and policy == "always":
                    waits.append((len(topics_out), len(parts), broker.flusher.wait_flushed(plog, end)))
                else:
                    broker.flusher.appended(plog, policy)
            parts.append(
                PR(
                    index=pd.index,
                    error_code=code,
                    base_offset=base,
                    log_append_time_ms=-1,
                    log_start_offset=plog.log_start_offset,
                    error_message=message,
                )
            )
        topics_out.append(R.TopicProduceResponse(name=td.name, topic_id=td.topic_id, partition_responses=parts))
        parts_out.append(parts)
    if acks == 0:
        return NO_RESPONSE
    body = R(responses=topics_out, throttle_time_ms=0)
    if not waits:
        return body

    return _after_flush(body, waits, parts_out)


def _after_flush(
    body: ProduceResponse,
    waits: list[tuple[int, int, asyncio.Future[None]]],
    parts_out: list[list[ProduceResponse.TopicProduceResponse.PartitionProduceResponse]],
) -> asyncio.Future[ProduceResponse]:
    """The response, once every partition's flush has settled: a plain future settled from the flushes' own
    callbacks, not a task gathering them, which took two more turns of the event loop between the fsync and
    the answer (about a millisecond each while the loop appends megabyte requests)."""
    answer: asyncio.Future[ProduceResponse] = asyncio.get_running_loop().create_future()
    left = len(waits)

    def settled(t: int, p: int, wait: asyncio.Future[None]) -> None:
        nonlocal left
        if answer.done():  # the connection closed and cancelled it
            return
        if wait.cancelled():
            answer.cancel()
            return
        outcome = wait.exception()
        if outcome is not None:
            if not isinstance(outcome, StorageError):
                answer.set_exception(outcome)
                return
            # Appended but not known durable: the producer retries, and an idempotent retry is answered as a
            # duplicate once the flush succeeds (or fails again while it does not).
            answered = parts_out[t]  # the list the response holds: answered in place
            answered[p] = _storage_error(answered[p].index, outcome)
        left -= 1
        if not left:
            answer.set_result(body)

    for t, p, wait in waits:
        wait.add_done_callback(functools.partial(settled, t, p))
    return answer


def _append(broker: Broker, plog: PartitionLog, records: Buffer | None, now: int, tid: str | None
            ) -> tuple[int, int, str | None]:
    """Returns (error code, base offset, error message)."""
    if records is None or len(records) == 0:
        return ErrorCode.CORRUPT_MESSAGE, -1, "no records"
    try:
        batches = list(iter_batches(records))
    except PeerProtocolError as e:
        log.warning("rejecting a corrupt batch for %s: %s", plog.name, e)
        return ErrorCode.CORRUPT_MESSAGE, -1, str(e)
    first = batches[0][1]
    if first.producer_id != NO_PRODUCER_ID and len(batches) != 1:
        return ErrorCode.INVALID_RECORD, -1, "an idempotent produce carries exactly one batch"
    if any(h.is_control for _, h in batches):  # markers are the transaction coordinator's to write
        return ErrorCode.INVALID_RECORD, -1, "clients may not write control batches"
    if first.is_transactional:
        refusal = verify_transactional_batch(broker, tid, first.producer_id, first.producer_epoch,
                                             TopicPartition(plog.topic, plog.partition))  # fmt: skip
        if refusal is not None:
            return refusal
    data = bytearray(records)
    try:
        # max.message.bytes bounds each batch, as in Kafka, and segment.bytes all of one partition's batches
        outcome = plog.append_checked(data, now)
    except RecordTooLargeError as e:
        whole = "segment.bytes" in str(e)
        return (ErrorCode.RECORD_LIST_TOO_LARGE if whole else ErrorCode.MESSAGE_TOO_LARGE), -1, str(e)
    except LogWriteError as e:  # nothing was written: the log is as before, the client retries
        why = f"{plog.name}: {e}"
        broker.storage_warnings.note(
            lambda: f"produce to {why} (answered KAFKA_STORAGE_ERROR)",
            lambda n: f"{n} more produce requests answered KAFKA_STORAGE_ERROR in the last minute, the latest to {why}",
        )
        return ErrorCode.KAFKA_STORAGE_ERROR, -1, str(e)
    if isinstance(outcome, ps.Duplicate):
        return ErrorCode.NONE, outcome.base_offset, None
    if isinstance(outcome, ps.OutOfOrder):
        return ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, -1, f"expected sequence {outcome.expected}"
    if isinstance(outcome, ps.InvalidEpoch):
        return ErrorCode.INVALID_PRODUCER_EPOCH, -1, f"current producer epoch is {outcome.current_epoch}"
    if isinstance(outcome, ps.UnknownProducer):
        return ErrorCode.UNKNOWN_PRODUCER_ID, -1, None
    broker.purgatory.notify(TopicPartition(plog.topic, plog.partition), len(data))
    broker.metrics.appended(plog.topic, len(data), sum(h.records_count for _, h in batches))
    return ErrorCode.NONE, outcome.base_offset, None


def _storage_error(index: int, error: Exception) -> ProduceResponse.TopicProduceResponse.PartitionProduceResponse:
    return PRODUCE.Response.TopicProduceResponse.PartitionProduceResponse(index=index, error_code=ErrorCode.KAFKA_STORAGE_ERROR, base_offset=-1, log_append_time_ms=-1,
              error_message=str(error))
