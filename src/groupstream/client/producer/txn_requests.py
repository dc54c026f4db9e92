"""The requests of the transactional APIs and how their answers read, for the transaction manager
(``transactions``): FindCoordinator, InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit and
EndTxn. Pure: each builder takes the values a request carries and the handler of its answer, and returns the
`UnsentRequest`; each reader turns an answer into the partitions it settled and the worst error code in it.
What an answer means for the transaction is the manager's business."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from groupstream.client.consumer.membership_api import GroupMetadata
from groupstream.client.errors import UnsupportedVersionError
from groupstream.client.net.requests import ClientResponse, Handler, UnsentRequest
from groupstream.protocol.error_codes import ErrorCode
from groupstream.protocol.messages import by_name
from groupstream.protocol.topic_partition import TopicPartition

__all__ = ["END_TXN_MAX", "KEY_GROUP", "KEY_TXN", "Producer", "TxnOffsetValues", "add_offsets", "add_partitions",
           "added_partitions", "committed_offsets", "coordinator_in", "end_txn", "error_code", "find_coordinator",
           "init_producer_id", "txn_offset_commit"]  # fmt: skip

_FIND = by_name("FindCoordinator")
_INIT = by_name("InitProducerId")
_ADD_PARTITIONS = by_name("AddPartitionsToTxn")
_ADD_OFFSETS = by_name("AddOffsetsToTxn")
_TXN_OFFSET_COMMIT = by_name("TxnOffsetCommit")
_END_TXN = by_name("EndTxn")
_ADD_PARTITIONS_CLIENT_MAX = 3  # v4+ is the broker-to-coordinator batch form (KIP-890)
END_TXN_MAX = 4  # v5 (an epoch per transaction) only where transaction.version 2 is finalized
KEY_TXN = 1  # FindCoordinator's key_type of a transactional id
KEY_GROUP = 0  # and of a consumer group

E = ErrorCode
Producer = tuple[str, int, int]  # transactional id, producer id, producer epoch: what every request names
TxnOffsetValues = dict[TopicPartition, tuple[int, int, str | None]]  # offset, leader epoch, metadata


def error_code(response: ClientResponse) -> int:
    """The top-level error code of an answer; a request that got none counts as a network error, and a broker
    that does not serve the API as UNSUPPORTED_VERSION (fatal, never retried)."""
    if isinstance(response.error, UnsupportedVersionError):
        return E.UNSUPPORTED_VERSION
    if response.error is not None or response.body is None:
        return E.NETWORK_EXCEPTION
    return int(response.body.error_code)


# --- FindCoordinator ------------------------------------------------------------------------------------------


def find_coordinator(key_type: int, key: str, handler: Handler) -> UnsentRequest:
    """The coordinator of a transactional id (``KEY_TXN``) or a group (``KEY_GROUP``), from any node."""

    def body(version: int) -> Any:
        R: Any = _FIND.Request
        if version >= 4:
            return R(key_type=key_type, coordinator_keys=[key])
        return R(key=key, key_type=key_type)

    return UnsentRequest(_FIND, body, handler)


def coordinator_in(key: str, response: ClientResponse) -> tuple[int, tuple[int, str, int] | None]:
    """``(error code, (node id, host, port) or None)`` of ``key``'s coordinator in a FindCoordinator answer (v4+
    answers a list of keys)."""
    if response.error is not None:
        return E.NETWORK_EXCEPTION, None
    body = response.body
    if response.version >= 4:
        entry = next((c for c in body.coordinators if c.key == key), None)
        if entry is None:
            return E.COORDINATOR_NOT_AVAILABLE, None
        code, node, host, port = entry.error_code, entry.node_id, entry.host, entry.port
    else:
        code, node, host, port = body.error_code, body.node_id, body.host, body.port
    if code != E.NONE:
        return code, None
    return E.NONE, (node, host, port)


# --- InitProducerId -------------------------------------------------------------------------------------------


def init_producer_id(
    producer: Producer, timeout_ms: int, handler: Handler, node: int | None
) -> UnsentRequest:
    """InitProducerId for ``producer``'s transactional id: a fresh start with producer id and epoch -1, or (v3+)
    the bump of the given epoch after an abort (KIP-360)."""
    tid, pid, epoch = producer

    def body(version: int) -> Any:
        p, e = (pid, epoch) if version >= 3 else (-1, -1)
        return _INIT.Request(
            transactional_id=tid, transaction_timeout_ms=timeout_ms, producer_id=p, producer_epoch=e
        )

    return UnsentRequest(_INIT, body, handler, node_id=node)


# --- AddPartitionsToTxn ---------------------------------------------------------------------------------------


def add_partitions(
    producer: Producer, tps: Iterable[TopicPartition], handler: Handler, node: int | None
) -> UnsentRequest:
    """AddPartitionsToTxn of ``tps``, in the client's form (v3 and below: one transaction per request)."""
    tid, pid, epoch = producer
    by_topic: dict[str, list[int]] = {}
    for t, p in tps:
        by_topic.setdefault(t, []).append(p)
    R: Any = _ADD_PARTITIONS.Request
    topics = [R.AddPartitionsToTxnTopic(name=t, partitions=ps) for t, ps in by_topic.items()]

    def body(version: int) -> Any:
        return R(
            v3_and_below_transactional_id=tid,
            v3_and_below_producer_id=pid,
            v3_and_below_producer_epoch=epoch,
            v3_and_below_topics=topics,
        )

    return UnsentRequest(_ADD_PARTITIONS, body, handler, node_id=node, max_version=_ADD_PARTITIONS_CLIENT_MAX)


def added_partitions(response: ClientResponse) -> tuple[list[TopicPartition], int]:
    """The partitions an AddPartitionsToTxn answer added, and its worst error code: the first one other than
    OPERATION_NOT_ATTEMPTED (which a broker gives the partitions it skipped because of another's error)."""
    added: list[TopicPartition] = []
    worst = E.NONE
    for t in response.body.results_by_topic_v3_and_below:
        for p in t.results_by_partition:
            code = p.partition_error_code
            if code == E.NONE:
                added.append(TopicPartition(t.name, p.partition_index))
            elif worst == E.NONE or worst == E.OPERATION_NOT_ATTEMPTED:
                worst = code
    return added, worst


# --- AddOffsetsToTxn, TxnOffsetCommit -------------------------------------------------------------------------


def add_offsets(producer: Producer, group_id: str, handler: Handler, node: int | None) -> UnsentRequest:
    """AddOffsetsToTxn: the group's offsets topic partition joins the transaction."""
    tid, pid, epoch = producer
    req = _ADD_OFFSETS.Request(transactional_id=tid, producer_id=pid, producer_epoch=epoch, group_id=group_id)
    return UnsentRequest(_ADD_OFFSETS, req, handler, node_id=node)


def txn_offset_commit(
    producer: Producer, offsets: TxnOffsetValues, group: GroupMetadata, handler: Handler, node: int | None
) -> UnsentRequest:
    """TxnOffsetCommit of ``offsets`` to the group coordinator, with the consumer's generation, member id and
    instance id, so the coordinator can refuse a zombie (KIP-447)."""
    tid, pid, epoch = producer
    R: Any = _TXN_OFFSET_COMMIT.Request
    TT = R.TxnOffsetCommitRequestTopic
    PP = TT.TxnOffsetCommitRequestPartition
    by_topic: dict[str, list[Any]] = {}
    for (t, p), (offset, leader_epoch, meta) in offsets.items():
        by_topic.setdefault(t, []).append(
            PP(
                partition_index=p,
                committed_offset=offset,
                committed_leader_epoch=leader_epoch,
                committed_metadata=meta,
            )
        )
    g = group
    req = R(
        transactional_id=tid, group_id=g.group_id, producer_id=pid, producer_epoch=epoch,
        generation_id=g.generation_id, member_id=g.member_id, group_instance_id=g.group_instance_id,
        topics=[TT(name=t, partitions=ps) for t, ps in by_topic.items()],
    )  # fmt: skip
    return UnsentRequest(_TXN_OFFSET_COMMIT, req, handler, node_id=node)


def committed_offsets(response: ClientResponse) -> tuple[list[TopicPartition], int]:
    """The partitions whose offsets a TxnOffsetCommit answer took, and its first error code."""
    committed: list[TopicPartition] = []
    worst = E.NONE
    for t in response.body.topics:
        for p in t.partitions:
            if p.error_code == E.NONE:
                committed.append(TopicPartition(t.name, p.partition_index))
            elif worst == E.NONE:
                worst = p.error_code
    return committed, worst


# --- EndTxn ---------------------------------------------------------------------------------------------------


def end_txn(
    producer: Producer, commit: bool, handler: Handler, node: int | None, max_version: int
) -> UnsentRequest:
    """EndTxn: commit (``commit``) or abort the transaction."""
    tid, pid, epoch = producer
    req = _END_TXN.Request(transactional_id=tid, producer_id=pid, producer_epoch=epoch, committed=commit)
    return UnsentRequest(_END_TXN, req, handler, node_id=node, max_version=max_version)
