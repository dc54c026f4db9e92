"""Admin calls about transactions (issue 17), as ``kafka-transactions.sh list|describe`` makes them:
ListTransactions to every broker (each lists the transactional ids it coordinates, filtered by state, producer
id, duration (v1, KIP-994) and id pattern (v2, KIP-1152)), and DescribeTransactions to the coordinator of each
id (found with FindCoordinator key_type 1).

The producers of a partition (``describe-producers``) come from DescribeProducers at its leader (or at a
chosen replica). Aborting a hanging transaction (``abort``) writes the ABORT marker with WriteTxnMarkers
straight to the partition's leader, as Kafka's Admin ``abortTransaction`` does: the transaction coordinator is
not asked, since a hanging transaction is one its coordinator no longer knows. ``find-hanging`` follows Kafka's
TransactionsCommand: open transactions whose producer last wrote longer ago than the longest transaction timeout
are candidates; a candidate hangs when no coordinator lists its producer id, when its transactional id is not
found, or when its coordinator's description does not name the partition (the coordinator will never write
that partition's marker). The selection is a pure function of the answers and of ``now_ms``
(`hanging_transactions`)."""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from groupstream.client.admin.groups import GroupCalls
from groupstream.client.admin.types import _COORDINATOR_ERRORS, _Retry
from groupstream.client.errors import KafkaError, UnsupportedVersionError, check
from groupstream.client.net.sync_client import NodeChannel
from groupstream.protocol.error_codes import ErrorCode
from groupstream.protocol.messages import by_name

_TXN_KEY = 1
# Kafka's transaction states, as ListTransactions and DescribeTransactions name them
TRANSACTION_STATES = ("Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort",
                      "Dead", "PrepareEpochFence")  # fmt: skip


@dataclass(frozen=True)
class TransactionListing:
    """One transactional id as ListTransactions lists it."""

    transactional_id: str
    producer_id: int
    state: str
    coordinator_id: int


@dataclass(frozen=True)
class TransactionDescription:
    """One transactional id as its coordinator describes it. ``start_time_ms`` is None outside a transaction."""

    transactional_id: str
    coordinator_id: int
    state: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    start_time_ms: int | None
    partitions: tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class ProducerState:
    """One active producer of a partition, as DescribeProducers shows it. ``coordinator_epoch`` is -1 before
    the producer's first marker; ``txn_start_offset`` is None when no transaction of it is open there."""

    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    last_sequence: int
    last_timestamp: int
    txn_start_offset: int | None


@dataclass(frozen=True)
class AbortTransactionSpec:
    """What ``abort_transaction`` writes: the ABORT marker of this producer's transaction on one partition."""

    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int


@dataclass(frozen=True)
class OpenTransaction:
    """A partition's open transaction (its producer's state there), as ``find-hanging`` reports it."""

    topic: str
    partition: int
    producer: ProducerState


def open_candidates(
    producers: dict[tuple[str, int], list[ProducerState]], now_ms: int, max_timeout_ms: int
) -> list[OpenTransaction]:
    """Open transactions whose producer last wrote more than ``max_timeout_ms`` before ``now_ms``: no
    coordinator lets a transaction live that long, so each is either about to be aborted or hanging."""
    return [
        OpenTransaction(topic, partition, p)
        for (topic, partition), states in sorted(producers.items())
        for p in states
        if p.txn_start_offset is not None and now_ms - p.last_timestamp > max_timeout_ms
    ]


def hanging_transactions(
    candidates: Iterable[OpenTransaction],
    transactional_ids: dict[int, str],
    descriptions: dict[str, TransactionDescription | None],
) -> list[OpenTransaction]:
    """The candidates no coordinator will finish: their producer id is listed by no coordinator, their
    transactional id is not found (None), or the id's transaction does not include their partition."""
    out: list[OpenTransaction] = []
    for c in candidates:
        tid = transactional_ids.get(c.producer.producer_id)
        desc = descriptions.get(tid) if tid is not None else None
        if desc is None or (c.topic, c.partition) not in desc.partitions:
            out.append(c)
    return out


class TransactionCalls(GroupCalls):
    def list_transactions(
        self,
        states: Iterable[str] | None = None,
        producer_ids: Iterable[int] | None = None,
        *,
        duration_ms: int | None = None,
        transactional_id_pattern: str | None = None,
    ) -> list[TransactionListing]:
        """The transactional ids every broker coordinates (sorted by id), only those in ``states`` (Kafka's
        names, any case), of ``producer_ids``, open longer than ``duration_ms``, matching the regular expression
        ``transactional_id_pattern``."""
        wanted = None if states is None else [_state(s) for s in states]
        pids = None if producer_ids is None else [int(p) for p in producer_ids]
        out: dict[str, TransactionListing] = {}
        for broker in self.describe_cluster().brokers:
            on_broker = functools.partial(
                self._list_transactions_on, broker.host, broker.port, broker.node_id, wanted, pids, duration_ms,
                transactional_id_pattern,
            )  # fmt: skip
            for t in self._retrying(f"broker {broker.host}:{broker.port}", on_broker):
                out[t.transactional_id] = t
        return sorted(out.values(), key=lambda t: t.transactional_id)

    def _list_transactions_on(
        self, host: str, port: int, node_id: int, states: list[str] | None, pids: list[int] | None,
        duration_ms: int | None, pattern: str | None,
    ) -> list[TransactionListing]:  # fmt: skip
        conn = self._conn_to(host, port)
        version = conn.version_for("ListTransactions")
        if duration_ms is not None and version < 1:
            raise UnsupportedVersionError(
                f"broker {conn.address} cannot filter transactions by duration (ListTransactions v{version})"
            )
        if pattern is not None and version < 2:
            raise UnsupportedVersionError(
                f"broker {conn.address} cannot filter transactional ids by pattern (ListTransactions v{version})"
            )
        R: Any = by_name("ListTransactions").Request
        body = R(
            state_filters=states or [], producer_id_filters=pids or [],
            duration_filter=-1 if duration_ms is None else duration_ms, transactional_id_pattern=pattern,
        )  # fmt: skip
        resp = self._request(conn, "ListTransactions", body, version)
        if resp.error_code in _COORDINATOR_ERRORS:
            raise _Retry(resp.error_code)
        check(resp.error_code, resource=f"broker {conn.address}")
        return [
            TransactionListing(t.transactional_id, t.producer_id, t.transaction_state, node_id)
            for t in resp.transaction_states
        ]

    def describe_transactions(self, transactional_ids: Iterable[str]) -> dict[str, TransactionDescription]:
        """State, producer, timeout, start time and partitions of each transactional id, asked of its
        coordinator. An id the coordinator does not know raises KafkaError (TRANSACTIONAL_ID_NOT_FOUND)."""
        out: dict[str, TransactionDescription] = {}
        for tid in transactional_ids:
            out[tid] = self._retrying(f"transactional id {tid!r}", functools.partial(self._describe_txn, tid))
        return out

    def _describe_txn(self, tid: str) -> TransactionDescription:
        node_id, host, port = self._find_coordinator(tid, _TXN_KEY)
        conn: NodeChannel = self._conn_to(host, port)
        version = conn.version_for("DescribeTransactions")
        R: Any = by_name("DescribeTransactions").Request
        resp = self._request(conn, "DescribeTransactions", R(transactional_ids=[tid]), version)
        found = [s for s in resp.transaction_states if s.transactional_id == tid]
        if not found:
            raise _Retry(15)  # COORDINATOR_NOT_AVAILABLE: the answer did not name it
        s = found[0]
        if s.error_code in _COORDINATOR_ERRORS:
            raise _Retry(s.error_code)
        check(s.error_code, resource=f"transactional id {tid!r}")
        return TransactionDescription(
            tid, node_id, s.transaction_state, s.producer_id, s.producer_epoch, s.transaction_timeout_ms,
            s.transaction_start_time_ms if s.transaction_start_time_ms >= 0 else None,
            tuple(sorted((t.topic, p) for t in s.topics for p in t.partitions)),
        )  # fmt: skip

    # --- producers and hanging transactions (kafka-transactions.sh describe-producers|abort|find-hanging) ---

    def describe_producers(
        self, partitions: Iterable[tuple[str, int]], *, broker_id: int | None = None
    ) -> dict[tuple[str, int], list[ProducerState]]:
        """The active producers of each partition, asked of its leader (or of broker ``broker_id``, which
        answers for the replicas it holds). A partition's error raises KafkaError naming it."""
        wanted = sorted(set(partitions))
        if broker_id is None:
            groups = self._by_leader(wanted)
        else:
            broker = next((b for b in self.describe_cluster().brokers if b.node_id == broker_id), None)
            if broker is None:
                raise KafkaError(ErrorCode.BROKER_NOT_AVAILABLE, "no such broker in the cluster",
                                 resource=f"broker {broker_id}")  # fmt: skip
            groups = {self._conn_to(broker.host, broker.port): wanted}
        out: dict[tuple[str, int], list[ProducerState]] = {}
        for conn, tps in groups.items():
            by_topic: dict[str, list[int]] = {}
            for topic, partition in tps:
                by_topic.setdefault(topic, []).append(partition)
            R: Any = by_name("DescribeProducers").Request
            body = R(topics=[R.TopicRequest(name=t, partition_indexes=ps) for t, ps in by_topic.items()])
            resp = self._request(conn, "DescribeProducers", body, conn.version_for("DescribeProducers"))
            for t in resp.topics:
                for p in t.partitions:
                    check(p.error_code, p.error_message, resource=f"{t.name}[{p.partition_index}]")
                    out[(t.name, p.partition_index)] = [
                        ProducerState(
                            a.producer_id,
                            a.producer_epoch,
                            a.coordinator_epoch,
                            a.last_sequence,
                            a.last_timestamp,
                            a.current_txn_start_offset if a.current_txn_start_offset >= 0 else None,
                        )
                        for a in p.active_producers
                    ]
        missing = [tp for tp in wanted if tp not in out]
        if missing:
            raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, "the broker did not answer for it",
                             resource=f"{missing[0][0]}[{missing[0][1]}]")  # fmt: skip
        return out

    def abort_transaction(self, spec: AbortTransactionSpec) -> None:
        """Write the ABORT marker of ``spec``'s transaction on its partition, sent to the partition's leader
        (WriteTxnMarkers, as Kafka's Admin ``abortTransaction``). The leader refuses a stale producer epoch
        (INVALID_PRODUCER_EPOCH) or coordinator epoch (TRANSACTION_COORDINATOR_FENCED)."""
        tp = (spec.topic, spec.partition)
        ((conn, _),) = self._by_leader([tp]).items()
        R: Any = by_name("WriteTxnMarkers").Request
        M = R.WritableTxnMarker
        marker = M(
            producer_id=spec.producer_id, producer_epoch=spec.producer_epoch, transaction_result=False,
            topics=[M.WritableTxnMarkerTopic(name=spec.topic, partition_indexes=[spec.partition])],
            coordinator_epoch=max(0, spec.coordinator_epoch),
        )  # fmt: skip
        resp = self._request(
            conn, "WriteTxnMarkers", R(markers=[marker]), conn.version_for("WriteTxnMarkers")
        )
        answered = False
        for m in resp.markers:
            for t in m.topics:
                for p in t.partitions:
                    answered = True
                    check(p.error_code, resource=f"{t.name}[{p.partition_index}]")
        if not answered:
            raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, "the leader did not answer for it",
                             resource=f"{spec.topic}[{spec.partition}]")  # fmt: skip

    def find_hanging_transactions(
        self, *, topic: str | None = None, partition: int | None = None, broker_id: int | None = None,
        max_transaction_timeout_ms: int = 15 * 60_000, now_ms: int,
    ) -> list[OpenTransaction]:  # fmt: skip
        """Open transactions no coordinator will finish, on ``topic`` (one ``partition`` of it) or on the
        partitions broker ``broker_id`` holds a replica of (internal topics left out, as Kafka's tool lists topics;
        ``--topic __consumer_offsets`` searches that one), as ``kafka-transactions.sh find-hanging`` finds them
        (see the module's docstring)."""
        if topic is None and broker_id is None:
            raise ValueError("find-hanging needs a topic or a broker id to limit the search")
        if partition is not None and topic is None:
            raise ValueError("a partition needs its topic")
        if broker_id is not None and all(b.node_id != broker_id for b in self.describe_cluster().brokers):
            raise KafkaError(ErrorCode.BROKER_NOT_AVAILABLE, "no such broker in the cluster",
                             resource=f"broker {broker_id}")  # fmt: skip
        if topic is not None and partition is not None:
            tps = [(topic, partition)]
        else:
            names = (
                [topic] if topic is not None else sorted(self.list_topics())
            )  # not internal ones, as Kafka
            tps = [
                (name, p.partition)
                for name, desc in self.describe_topics(names).items()
                for p in desc.partitions
                if broker_id is None or broker_id in p.replicas
            ]
        if not tps:
            return []
        candidates = open_candidates(self.describe_producers(tps, broker_id=broker_id), now_ms,
                                     max_transaction_timeout_ms)  # fmt: skip
        if not candidates:
            return []
        pids = sorted({c.producer.producer_id for c in candidates})
        ids = {t.producer_id: t.transactional_id for t in self.list_transactions(producer_ids=pids)
               if t.producer_id in pids}  # fmt: skip
        descriptions: dict[str, TransactionDescription | None] = {}
        for tid in sorted(set(ids.values())):
            try:
                descriptions[tid] = self.describe_transactions([tid])[tid]
            except KafkaError as e:
                if e.code != ErrorCode.TRANSACTIONAL_ID_NOT_FOUND:
                    raise
                descriptions[tid] = None
        return hanging_transactions(candidates, ids, descriptions)


def _state(text: str) -> str:
    for s in TRANSACTION_STATES:
        if s.lower() == text.strip().lower():
            return s
    raise ValueError(f"unknown transaction state {text!r}: choose from {', '.join(TRANSACTION_STATES)}")
