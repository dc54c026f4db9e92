"""The transaction APIs: authorization as Kafka's table has it, then the transaction coordinator's shard.

InitProducerId with a transactional id (`groupstream.broker.handlers.producer_id` routes it here),
AddPartitionsToTxn, AddOffsetsToTxn and EndTxn need WRITE on the transactional id (AddPartitionsToTxn also WRITE
on each topic, AddOffsetsToTxn READ on the group); DescribeTransactions and ListTransactions show only the ids
the principal may DESCRIBE. A request goes to the shard of its id's `__transaction_state` partition;
DescribeTransactions is split by shard and ListTransactions asks every shard, the answers merged.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from typing import TYPE_CHECKING, Any, cast

from groupstream.broker.coordinator_runtime import ShardStatus
from groupstream.broker.group_errors import error_response as group_error_response
from groupstream.broker.handlers import handles
from groupstream.broker.offsets_topic import OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC
from groupstream.broker.transaction_wiring import error_response
from groupstream.protocol.bodies import (
    ADD_OFFSETS_TO_TXN,
    ADD_PARTITIONS_TO_TXN,
    DESCRIBE_TRANSACTIONS,
    END_TXN,
    INIT_PRODUCER_ID,
    LIST_TRANSACTIONS,
    TXN_OFFSET_COMMIT,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    DescribeTransactionsResponse,
    ListTransactionsResponse,
    TxnOffsetCommitResponse,
)
from groupstream.protocol.connection import Request
from groupstream.protocol.error_codes import ErrorCode
from groupstream.protocol.topic_partition import TopicPartition
from groupstream.security.acl import Operation, ResourceType
from groupstream.transaction.state import TxnState

if TYPE_CHECKING:
    from groupstream.broker.node import Broker


def lookup_transaction_coordinator(broker: Broker, transactional_id: str) -> tuple[int, str | None]:
    """FindCoordinator key_type=1: DESCRIBE on the id, then whether its shard serves (creating and loading
    `__transaction_state` on first use)."""
    auth = broker.authorizer
    if not auth.allowed(Operation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, transactional_id):
        return (ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                auth.denial(Operation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, transactional_id))  # fmt: skip
    if broker.transactions.runtime is None:  # as Kafka: the topic is being created, ask again
        broker.transactions.serving()
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, f"creating {TRANSACTION_STATE_TOPIC}"
    runtime = broker.transactions.serving()
    status = runtime.status(runtime.partition_for(transactional_id))
    if status is ShardStatus.ACTIVE:
        return ErrorCode.NONE, None
    if status is ShardStatus.LOADING:
        return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, None
    return ErrorCode.COORDINATOR_NOT_AVAILABLE, "the coordinator of this transactional id is unloaded"


def verify_transactional_batch(broker: Broker, tid: str | None, producer_id: int, producer_epoch: int,
                               partition: TopicPartition) -> tuple[int, int, str] | None:
    """KIP-890 part 1, on one node: a transactional batch is appended only if its partition is in its producer's
    ongoing transaction (so a late write of a fenced or finished transaction cannot open a new, never-ended
    one that would hold the last stable offset back). None if it may be appended, else (error, -1, why)."""
    if tid is None:
        return ErrorCode.INVALID_RECORD, -1, "a transactional batch needs the request's transactional id"
    shard, waiting = _serving_shard(broker, tid)
    if waiting:  # as Kafka maps a coordinator that cannot verify yet: retriable for every client
        return ErrorCode.NOT_ENOUGH_REPLICAS, -1, "the transaction coordinator is loading; retry"
    m = None if shard is None else cast(Any, shard).get(tid)
    if m is None or m.producer_id != producer_id:
        return ErrorCode.INVALID_PRODUCER_ID_MAPPING, -1, f"producer {producer_id} does not own transactional id {tid!r}"
    if m.producer_epoch != producer_epoch:
        return (ErrorCode.INVALID_PRODUCER_EPOCH, -1,
                f"producer epoch {producer_epoch} is not the current {m.producer_epoch} of {tid!r}")  # fmt: skip
    if m.state is not TxnState.ONGOING or partition not in m.partitions:
        return (ErrorCode.INVALID_TXN_STATE, -1,
                f"{partition} is not in an ongoing transaction of {tid!r}")  # fmt: skip
    return None


# How long an implicit add waits for the previous transaction's markers before answering a retriable error.
_ADD_WAIT_MAX_S = 0.1
# What an implicit add may answer while the transaction cannot take the partition yet (the previous one's
# markers are being written, the coordinator is loading or moving): the produce is retried, as Kafka answers it.
_ADD_LATER = frozenset({ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                        ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE})  # fmt: skip


def partitions_outside_transaction(broker: Broker, tid: str, partitions: list[TopicPartition]) -> list[TopicPartition]:
    """The partitions (once each) the ongoing transaction of ``tid`` does not hold yet; none when its shard is
    not serving or the id is unknown (the verification then answers why)."""
    shard, waiting = _serving_shard(broker, tid)
    m = None if waiting or shard is None else cast(Any, shard).get(tid)
    if m is None:
        return []
    held = m.partitions if m.state is TxnState.ONGOING else frozenset()
    return [tp for tp in dict.fromkeys(partitions) if tp not in held]


async def add_partitions_implicitly(broker: Broker, request: Request, tid: str, producer_id: int, epoch: int,
                                    partitions: list[TopicPartition]) -> dict[TopicPartition, tuple[int, str]]:
    """KIP-890 part 2 on one node: a TV2 client's Produce / TxnOffsetCommit adds its partitions to its transaction
    through the coordinator's AddPartitionsToTxn v5 (verify_only false), durable before the append. Returns the
    partitions to answer with a retriable NOT_ENOUGH_REPLICAS (and why); any other refusal is left to the
    verification that follows (fenced, not the producer's id, ...), which names it."""
    api = ADD_PARTITIONS_TO_TXN
    Q = api.Request
    topics: dict[str, list[int]] = defaultdict(list)
    for topic, index in partitions:
        topics[topic].append(index)
    body = Q(transactions=[Q.AddPartitionsToTxnTransaction(
        transactional_id=tid, producer_id=producer_id, producer_epoch=epoch, verify_only=False,
        topics=[Q.AddPartitionsToTxnTopic(name=t, partitions=ps) for t, ps in topics.items()])])  # fmt: skip
    runtime = broker.transactions.serving()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + _ADD_WAIT_MAX_S
    while True:
        answer: AddPartitionsToTxnResponse = await runtime.submit(runtime.partition_for(tid), api, 5, body, request.header.client_id or "",
                                      broker.current_client_host)  # fmt: skip
        codes = {TopicPartition(t.name, r.partition_index): r.partition_error_code
                 for txn in answer.results_by_transaction for t in txn.topic_results for r in t.results_by_partition}
        # The previous transaction's markers are being written (a TV2 client starts its next transaction as
        # soon as EndTxn is answered): wait here until they are (Kafka's brokers retry this add too, under
        # add.partitions.to.txn.retry.backoff.*), rather than send the client into its own, longer, backoff.
        left = deadline - loop.time()
        if ErrorCode.CONCURRENT_TRANSACTIONS not in codes.values() or left <= 0:
            break
        ended = broker.transactions.wait_ended(tid)
        shard, _ = _serving_shard(broker, tid)
        m = None if shard is None else cast(Any, shard).get(tid)
        if m is not None and m.state.is_preparing:  # else it ended meanwhile: ask again at once
            await asyncio.wait([ended], timeout=left)
        broker.transactions.forget_waiter(tid, ended)
    later: dict[TopicPartition, tuple[int, str]] = {}
    for tp in partitions:
        code = answer.error_code or codes.get(tp, ErrorCode.NONE)
        if code in _ADD_LATER:
            later[tp] = (ErrorCode.NOT_ENOUGH_REPLICAS,
                         f"the transaction of {tid!r} cannot take {tp} yet ({ErrorCode(code).name}); retry")
    return later


def to_transaction_shard(broker: Broker, request: Request, transactional_id: str) -> asyncio.Future[Any]:
    """The shard of ``transactional_id`` answers ``request`` (a future of its response body)."""
    runtime = broker.transactions.serving()
    return runtime.submit(runtime.partition_for(transactional_id), request.api, request.version, request.body,
                          request.header.client_id or "", broker.current_client_host)  # fmt: skip


def _may_write(broker: Broker, transactional_id: str) -> bool:
    return broker.authorizer.allowed(Operation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id)


def _denied(request: Request, code: int = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED) -> Any:
    return error_response(request.api, request.version, request.body, code)


def init_transactional_producer_id(broker: Broker, request: Request) -> Any:
    tid = INIT_PRODUCER_ID.body_of(request).transactional_id
    assert tid is not None  # producer_id routes only a request with one here
    if not _may_write(broker, tid):
        return _denied(request)
    return to_transaction_shard(broker, request, tid)


@handles("AddPartitionsToTxn")
def handle_add_partitions_to_txn(broker: Broker, request: Request) -> Any:
    req = ADD_PARTITIONS_TO_TXN.body_of(request)
    if request.version >= 4:
        # the brokers' batched form (KIP-890 verification): only brokers send it, under CLUSTER_ACTION
        if not broker.authorizer.allowed_on_cluster(Operation.CLUSTER_ACTION):
            return _denied(request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        tids = {t.transactional_id for t in req.transactions}
        if len({broker.transactions.partition_for(t) for t in tids}) > 1:
            return _split_batched(broker, request)
        return to_transaction_shard(broker, request, next(iter(tids))) if tids else _denied(request, 0)
    tid = req.v3_and_below_transactional_id
    if not _may_write(broker, tid):
        return _denied(request)
    auth = broker.authorizer
    refused = {t.name for t in req.v3_and_below_topics if not auth.allowed(Operation.WRITE, ResourceType.TOPIC, t.name)}
    if refused:  # Kafka: the refused topics say why, the others were not attempted
        R = ADD_PARTITIONS_TO_TXN.Response
        T = R.AddPartitionsToTxnTopicResult
        P = T.AddPartitionsToTxnPartitionResult
        return R(throttle_time_ms=0, results_by_topic_v3_and_below=[
            T(name=t.name, results_by_partition=[
                P(partition_index=p, partition_error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED if t.name in refused
                  else ErrorCode.OPERATION_NOT_ATTEMPTED) for p in t.partitions])
            for t in req.v3_and_below_topics])  # fmt: skip
    return to_transaction_shard(broker, request, tid)


def _split_batched(broker: Broker, request: Request) -> asyncio.Future[AddPartitionsToTxnResponse]:
    """A batched AddPartitionsToTxn whose ids live on several shards: one request per shard, merged."""
    req = ADD_PARTITIONS_TO_TXN.body_of(request)
    by_shard: dict[int, list[AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction]] = defaultdict(list)
    for t in req.transactions:
        by_shard[broker.transactions.partition_for(t.transactional_id)].append(t)
    runtime = broker.transactions.serving()
    futures = [runtime.submit(p, request.api, request.version, req._replace(transactions=ts),
                              request.header.client_id or "", broker.current_client_host)
               for p, ts in by_shard.items()]  # fmt: skip

    async def merge() -> AddPartitionsToTxnResponse:
        parts: list[AddPartitionsToTxnResponse] = await asyncio.gather(*futures)
        results = [r for part in parts for r in part.results_by_transaction]
        return ADD_PARTITIONS_TO_TXN.Response(throttle_time_ms=0, error_code=0, results_by_transaction=results)

    return asyncio.ensure_future(merge())


@handles("AddOffsetsToTxn")
def handle_add_offsets_to_txn(broker: Broker, request: Request) -> Any:
    req = ADD_OFFSETS_TO_TXN.body_of(request)
    if not _may_write(broker, req.transactional_id):
        return _denied(request)
    if not broker.authorizer.allowed(Operation.READ, ResourceType.GROUP, req.group_id):
        return _denied(request, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    return to_transaction_shard(broker, request, req.transactional_id)


@handles("EndTxn")
def handle_end_txn(broker: Broker, request: Request) -> Any:
    tid = END_TXN.body_of(request).transactional_id
    if not _may_write(broker, tid):
        return _denied(request)
    return to_transaction_shard(broker, request, tid)


@handles("DescribeTransactions")
def handle_describe_transactions(broker: Broker, request: Request) -> asyncio.Future[DescribeTransactionsResponse]:
    req = DESCRIBE_TRANSACTIONS.body_of(request)
    R = DESCRIBE_TRANSACTIONS.Response
    auth = broker.authorizer
    runtime = broker.transactions.serving()
    slots: list[tuple[Any, int]] = []  # per requested id: (an answer, -1) or (its shard, index in that shard's answer)
    by_shard: dict[int, list[str]] = defaultdict(list)
    for tid in req.transactional_ids:
        if not auth.allowed(Operation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, tid):
            slots.append((error_response(request.api, request.version, req._replace(transactional_ids=[tid]),
                                         ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED).transaction_states[0], -1))
            continue
        p = runtime.partition_for(tid)
        slots.append((p, len(by_shard[p])))
        by_shard[p].append(tid)
    futures = {p: runtime.submit(p, request.api, request.version, req._replace(transactional_ids=ids),
                                 request.header.client_id or "", broker.current_client_host)
               for p, ids in by_shard.items()}  # fmt: skip

    async def merge() -> DescribeTransactionsResponse:
        answers: dict[int, DescribeTransactionsResponse] = {p: await f for p, f in futures.items()}
        out = [where if index < 0 else answers[where].transaction_states[index] for where, index in slots]
        # partitions of topics the principal may not DESCRIBE are left out, as Kafka does
        out = [s._replace(topics=[t for t in s.topics if auth.allowed(Operation.DESCRIBE, ResourceType.TOPIC, t.topic)])
               for s in out]  # fmt: skip
        return R(throttle_time_ms=0, transaction_states=out)

    return asyncio.ensure_future(merge())


@handles("ListTransactions")
def handle_list_transactions(broker: Broker, request: Request) -> ListTransactionsResponse | asyncio.Future[Any]:
    R = LIST_TRANSACTIONS.Response
    transactions = broker.transactions
    if transactions.runtime is None:  # no transaction ever: nothing to list, and nothing to create for it
        return R(throttle_time_ms=0, error_code=0, unknown_state_filters=[], transaction_states=[])
    runtime = transactions.serving()
    auth = broker.authorizer
    futures = [runtime.submit(p, request.api, request.version, request.body, request.header.client_id or "",
                              broker.current_client_host) for p in range(runtime.num_partitions)]  # fmt: skip

    async def merge() -> ListTransactionsResponse:
        parts: list[ListTransactionsResponse] = await asyncio.gather(*futures)
        code = next((p.error_code for p in parts if p.error_code == ErrorCode.INVALID_REGULAR_EXPRESSION), 0)
        if not code:
            code = next((p.error_code for p in parts if p.error_code), 0)
        states = sorted((s for p in parts for s in p.transaction_states
                         if auth.allowed(Operation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, s.transactional_id)),
                        key=lambda s: s.transactional_id)  # fmt: skip
        unknown = parts[0].unknown_state_filters if parts else []
        return R(throttle_time_ms=0, error_code=code, unknown_state_filters=unknown, transaction_states=states)

    return asyncio.ensure_future(merge())


@handles("TxnOffsetCommit")
def handle_txn_offset_commit(broker: Broker, request: Request) -> Any:
    """WRITE on the transactional id, READ on the group and on each topic (Kafka's table); then the producer
    must own the id at this epoch with the group's partition in its ongoing transaction (AddOffsetsToTxn came
    first), else its offsets could never be ended by a marker; then the group coordinator writes them."""
    req = TXN_OFFSET_COMMIT.body_of(request)
    auth = broker.authorizer
    tid = req.transactional_id
    if not _may_write(broker, tid):
        return group_error_response(request.api, request.version, req, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if not auth.allowed(Operation.READ, ResourceType.GROUP, req.group_id):
        return group_error_response(request.api, request.version, req, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    refused = [t for t in req.topics if not auth.allowed(Operation.READ, ResourceType.TOPIC, t.name)]
    if refused:
        R = TXN_OFFSET_COMMIT.Response
        T = R.TxnOffsetCommitResponseTopic
        P = T.TxnOffsetCommitResponsePartition
        return R(throttle_time_ms=0, topics=[
            T(name=t.name, partitions=[P(partition_index=p.partition_index, error_code=(
                ErrorCode.TOPIC_AUTHORIZATION_FAILED if t in refused else ErrorCode.OPERATION_NOT_ATTEMPTED))
                for p in t.partitions]) for t in req.topics])  # fmt: skip
    groups = broker.coordinator
    offsets = TopicPartition(OFFSETS_TOPIC, groups.partition_for(req.group_id))
    if request.version >= 5 and broker.config.transaction_version >= 2 and partitions_outside_transaction(
            broker, tid, [offsets]):  # fmt: skip
        # KIP-890 part 2: a TV2 client sends no AddOffsetsToTxn; its TxnOffsetCommit adds the group's partition
        async def after_add() -> Any:
            later = await add_partitions_implicitly(broker, request, tid, req.producer_id, req.producer_epoch,
                                                    [offsets])  # fmt: skip
            if later:
                return group_error_response(request.api, request.version, req, ErrorCode.CONCURRENT_TRANSACTIONS)
            return await _commit_offsets(broker, request, offsets)

        return asyncio.ensure_future(after_add())
    return _commit_offsets(broker, request, offsets)


def _commit_offsets(broker: Broker, request: Request, offsets: TopicPartition) -> asyncio.Future[Any]:
    """Verified in the producer's transaction, the group coordinator writes the offsets (an awaitable)."""
    req = TXN_OFFSET_COMMIT.body_of(request)
    code = _verify_offsets_in_transaction(broker, request, offsets)
    if code != ErrorCode.NONE:
        future: asyncio.Future[TxnOffsetCommitResponse] = asyncio.get_running_loop().create_future()
        future.set_result(group_error_response(request.api, request.version, req, code))
        return future
    return broker.coordinator.submit(offsets[1], request.api, request.version, req, request.header.client_id or "",
                                     broker.current_client_host)  # fmt: skip


def _verify_offsets_in_transaction(broker: Broker, request: Request, partition: TopicPartition) -> int:
    req = TXN_OFFSET_COMMIT.body_of(request)
    tid = req.transactional_id
    shard, waiting = _serving_shard(broker, tid)
    if waiting:
        return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    m = None if shard is None else cast(Any, shard).get(tid)
    if m is None or m.producer_id != req.producer_id:
        return ErrorCode.INVALID_PRODUCER_ID_MAPPING
    if m.producer_epoch != req.producer_epoch:
        return ErrorCode.PRODUCER_FENCED if request.version >= 3 else ErrorCode.INVALID_PRODUCER_EPOCH
    if m.state is not TxnState.ONGOING or partition not in m.partitions:
        return ErrorCode.INVALID_TXN_STATE
    return ErrorCode.NONE


def _serving_shard(broker: Broker, tid: str) -> tuple[Any, bool]:
    """The transaction shard of ``tid`` if it serves, and whether the caller must wait for it (it exists but is
    loading, unloaded or failed: its state is not known yet, so nothing can be verified against it)."""
    runtime = broker.transactions.runtime
    if runtime is None:
        return None, False
    partition = runtime.partition_for(tid)
    if runtime.status(partition) is not ShardStatus.ACTIVE:
        return None, True
    return runtime.shard(partition), False
