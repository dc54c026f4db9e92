"""Admin calls about transactions (issue 17), as ``kafka-transactions.sh list|describe`` makes them:
ListTransactions to every broker (each lists the transactional ids it coordinates, filtered by state, producer
id, duration (v1, KIP-994) and id pattern (v2, KIP-1152)), and DescribeTransactions to the coordinator of each
id (found with FindCoordinator key_type 1).

Aborting a hanging transaction (``kafka-transactions.sh abort``) writes the abort marker with WriteTxnMarkers
straight to the partition's leader; no schema for WriteTxnMarkers exists in this tree yet, so there is no such
call here."""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from groupstream.client.admin.groups import GroupCalls
from groupstream.client.admin.types import _COORDINATOR_ERRORS, _Retry
from groupstream.client.errors import UnsupportedVersionError, check
from groupstream.client.net.sync_client import NodeChannel
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


def _state(text: str) -> str:
    for s in TRANSACTION_STATES:
        if s.lower() == text.strip().lower():
            return s
    raise ValueError(f"unknown transaction state {text!r}: choose from {', '.join(TRANSACTION_STATES)}")
