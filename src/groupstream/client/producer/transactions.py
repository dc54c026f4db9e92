"""The transaction manager (KIP-98, KIP-447): the transactional producer's state machine and the requests to its
transaction coordinator and to the group coordinator. Pure: polled on the network thread with the time, it
returns requests (seed 002) and is told their answers; the application's calls reach it as operations.

States (``TxnState``), one checked step at a time through ``transition_to`` and ``TRANSITIONS``:
``init_transactions`` takes UNINITIALIZED to INITIALIZING (FindCoordinator with key_type 1, then InitProducerId
with the transactional id, which fences any older producer of the same id and completes its open transaction)
and to READY; ``begin_transaction`` takes READY to IN_TRANSACTION, and only then does ``produce`` accept
records. Before the first batch of a partition is sent, the partition is registered with AddPartitionsToTxn
(every new partition since the last one, in one request; the sender holds the batches back meanwhile).
``send_offsets_to_transaction`` sends AddOffsetsToTxn to the transaction coordinator, then TxnOffsetCommit with
the consumer's generation, member id and instance id to the group coordinator. ``commit_transaction`` (COMMITTING)
sends EndTxn once every batch is settled; ``abort_transaction`` (ABORTING) fails the batches not sent yet,
waits for those in flight, sends EndTxn(abort) and, when a batch left a gap in a partition's sequences, bumps
the epoch with InitProducerId (KIP-360) before the producer is READY again. Where the cluster finalized
``transaction.version`` 2 (KIP-890 part 2; Apache Kafka 4.x does), AddPartitionsToTxn and AddOffsetsToTxn are
not sent (Produce v12 and TxnOffsetCommit v5 add the partition and the group) and EndTxn v5 hands out the epoch
of the next transaction.

Errors are abortable or fatal, as in the Java client and librdkafka. A batch that fails, a refused partition or
group, an unknown producer id: ABORTABLE_ERROR, from which only ``abort_transaction`` leads on. PRODUCER_FENCED,
INVALID_PRODUCER_EPOCH, TRANSACTIONAL_ID_AUTHORIZATION_FAILED, INVALID_TXN_STATE and errors nothing can
recover from: FATAL_ERROR, which refuses everything from then on (the idempotence manager's fatal error makes
the sender fail every queued batch). Coordinator moves and CONCURRENT_TRANSACTIONS are retried with backoff.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from groupstream.client.consumer.coordinator_locator import COORDINATOR_NODE_BASE
from groupstream.client.consumer.membership_api import GroupMetadata
from groupstream.client.errors import UnsupportedVersionError
from groupstream.client.net.config import exponential_backoff_ms
from groupstream.client.net.metadata import MetadataCache
from groupstream.client.net.requests import ClientResponse, PollResult, UnsentRequest
from groupstream.client.producer.errors import (
    TransactionAbortableError,
    TransactionAbortedError,
    TransactionError,
    TransactionFatalError,
    TransactionStateError,
)
from groupstream.client.producer.idempotence import IdempotenceManager
from groupstream.client.producer.txn_rules import (
    BUMP_AFTER,
    COORDINATOR_MOVED,
    FATAL,
    RETRY,
    TRANSITIONS,
    TxnState,
    txn_error,
)
from groupstream.protocol.error_codes import ErrorCode
from groupstream.protocol.messages import by_name
from groupstream.protocol.topic_partition import TopicPartition

log = logging.getLogger("groupstream.client.producer")

_FIND = by_name("FindCoordinator")
_INIT = by_name("InitProducerId")
_ADD_PARTITIONS = by_name("AddPartitionsToTxn")
_ADD_OFFSETS = by_name("AddOffsetsToTxn")
_TXN_OFFSET_COMMIT = by_name("TxnOffsetCommit")
_END_TXN = by_name("EndTxn")
_ADD_PARTITIONS_CLIENT_MAX = 3  # v4+ is the broker-to-coordinator batch form (KIP-890)
_END_TXN_MAX = 4  # v5 (an epoch per transaction) only where transaction.version 2 is finalized
_CONCURRENT_BACKOFF_MS = 5
_KEY_TXN = 1
_KEY_GROUP = 0

S = TxnState
E = ErrorCode



_ABORTED = TransactionAbortedError("the transaction was aborted before this record was sent")


@dataclass
class _Offsets:
    """One ``send_offsets_to_transaction``: its offsets and how far it got."""

    offsets: dict[TopicPartition, tuple[int, int, str | None]]  # offset, leader epoch, metadata
    group: GroupMetadata
    future: Future[None]
    added: bool = False  # AddOffsetsToTxn done
    coordinator: int | None = None  # the group coordinator's own node id


@dataclass
class _Pending:
    """The application call the manager works on, and its future."""

    kind: str  # init, commit, abort, offsets
    future: Future[None]
    offsets: _Offsets | None = None


@dataclass
class _Txn:
    """What the open transaction holds."""

    added: set[TopicPartition] = field(default_factory=set)
    adding: set[TopicPartition] = field(default_factory=set)  # in the AddPartitionsToTxn in flight
    offsets_added: bool = False
    error: TransactionError | None = None  # what made it abortable


class TransactionManager:
    """See the module docstring. The callables are the producer's: ``queued_partitions()`` (partitions with
    batches waiting), ``settled()`` (no batch queued, in flight or waiting for its topic), ``abort_queued(e)``
    (fail the batches not sent yet with ``e``), ``refuse(e)``/``admit()`` (``produce`` refuses records with
    ``e`` / takes them again), ``begin_flush()``/``end_flush()`` (send now, no linger)."""

    def __init__(
        self,
        transactional_id: str,
        transaction_timeout_ms: int,
        idempotence: IdempotenceManager,
        metadata: MetadataCache,
        *,
        retry_backoff_ms: int,
        retry_backoff_max_ms: int,
        queued_partitions: Callable[[], Iterable[TopicPartition]],
        settled: Callable[[], bool],
        abort_queued: Callable[[BaseException], None],
        refuse: Callable[[BaseException], None],
        admit: Callable[[], None],
        begin_flush: Callable[[], None],
        end_flush: Callable[[], None],
        feature_level: Callable[[int, str], int] = lambda node, name: 0,
    ) -> None:
        self.transactional_id = transactional_id
        self.timeout_ms = transaction_timeout_ms
        self.state = TxnState.UNINITIALIZED
        self.fatal_error: TransactionError | None = None
        self._idem = idempotence
        self._metadata = metadata
        self._backoff_ms = retry_backoff_ms
        self._backoff_max_ms = retry_backoff_max_ms
        self._queued_partitions = queued_partitions
        self._settled = settled
        self._abort_queued = abort_queued
        self._refuse = refuse
        self._admit = admit
        self._begin_flush = begin_flush
        self._end_flush = end_flush
        self._feature_level = feature_level
        # transaction.version 2 (KIP-890 part 2), decided once InitProducerId has been answered over the
        # coordinator's connection: partitions and groups join the transaction implicitly (Produce v12,
        # TxnOffsetCommit v5), and EndTxn v5 ends each transaction with a new epoch
        self.transaction_version = 1
        self._coordinator: int | None = None
        self._finding: str | None = None  # the key of the FindCoordinator in flight
        self._in_flight = False  # one request to a coordinator at a time, as Java's transaction manager
        self._retry_at_ms = 0
        self._attempts = 0
        self._pending: _Pending | None = None
        self._txn = _Txn()
        self._bump_after_abort = False
        self.end_txn_max = _END_TXN_MAX
        self.transactions = 0  # completed (committed or aborted), for tests and metrics
        self._no_txn = TransactionStateError(
            f"produce() outside a transaction (transactional.id={transactional_id!r}): call "
            "init_transactions() once, then begin_transaction()"
        )
        refuse(self._no_txn)

    # --- state ------------------------------------------------------------------------------------------------

    def transition_to(self, target: TxnState) -> None:
        """The one way the state changes: a step the table does not allow is our bug and raises."""
        previous = self.state
        self.state = TRANSITIONS.check(previous, target, f"transactional producer {self.transactional_id!r}")
        log.debug("transactional.id %s: %s -> %s", self.transactional_id, previous.value, target.value)

    def may_send(self, tp: TopicPartition) -> bool:
        """Whether a batch of ``tp`` may go out: only once the partition belongs to the transaction (with
        transaction.version 2 the Produce request itself adds it: it belongs from its first batch on)."""
        added = self._txn.added
        if tp in added:
            return True
        if self.transaction_version >= 2 and self.state in (S.IN_TRANSACTION, S.COMMITTING):
            added.add(tp)
            return True
        return False

    def batch_failed(self, error: BaseException) -> None:
        """A batch of the transaction failed for good: the transaction can only be aborted."""
        if self.state in (S.IN_TRANSACTION, S.COMMITTING):
            self._abortable(
                TransactionAbortableError(f"a record of the transaction was not delivered: {error}")
            )

    def fenced(self, code: int, where: str) -> None:
        """A Produce answer said this producer was fenced (or is not authorized): fatal."""
        self._fatal(txn_error(code, f"transactional.id {self.transactional_id!r}: {where}"))

    # --- application operations (on the network thread) --------------------------------------------------------

    def start(self, kind: str, future: Future[None], offsets: _Offsets | None = None) -> None:
        """An application call: ``init``, ``begin``, ``offsets``, ``commit`` or ``abort``. Its future completes
        when the call's work is done (or fails with a `TransactionError`). A call repeated after it timed out
        waits for the same work."""
        if self.fatal_error is not None:
            future.set_exception(self.fatal_error)
            return
        pending = self._pending
        if pending is not None:
            if pending.kind == kind and kind != "offsets":
                pending.future.add_done_callback(lambda f: _copy(f, future))
                return
            future.set_exception(
                TransactionStateError(f"{kind} while the producer's {pending.kind} has not completed yet")
            )
            return
        state = self.state
        if kind == "init":
            if state is S.READY:
                future.set_result(None)  # done by an earlier call that timed out
                return
            self._require(kind, (S.UNINITIALIZED,))
            self.transition_to(S.INITIALIZING)
            self._pending = _Pending(kind, future)
        elif kind == "begin":
            self._require(kind, (S.READY,))
            self._txn = _Txn()
            self.transition_to(S.IN_TRANSACTION)
            self._admit()
            future.set_result(None)
        elif kind == "offsets":
            if state is S.ABORTABLE_ERROR and self._txn.error is not None:
                raise self._txn.error
            self._require(kind, (S.IN_TRANSACTION,))
            assert offsets is not None
            self._pending = _Pending(kind, future, offsets)
        elif kind == "commit":
            if state is S.ABORTABLE_ERROR and self._txn.error is not None:
                raise self._txn.error
            self._require(kind, (S.IN_TRANSACTION,))
            self.transition_to(S.COMMITTING)
            self._refuse_records(f"produce() while the transaction of {self.transactional_id!r} commits")
            self._begin_flush()
            self._pending = _Pending(kind, future)
        elif kind == "abort":
            self._require(kind, (S.IN_TRANSACTION, S.ABORTABLE_ERROR))
            self.transition_to(S.ABORTING)
            self._refuse_records(f"produce() while the transaction of {self.transactional_id!r} aborts")
            self._abort_queued(_ABORTED)
            self._pending = _Pending(kind, future)
        else:
            raise ValueError(kind)

    def _require(self, kind: str, states: tuple[TxnState, ...]) -> None:
        if self.state not in states:
            calls = {"init": "init_transactions", "begin": "begin_transaction", "commit": "commit_transaction",
                     "abort": "abort_transaction", "offsets": "send_offsets_to_transaction"}  # fmt: skip
            hint = {
                S.UNINITIALIZED: "call init_transactions() first",
                S.INITIALIZING: "init_transactions() has not completed",
                S.READY: "no transaction is open: call begin_transaction() first",
                S.IN_TRANSACTION: "a transaction is already open",
                S.COMMITTING: "the transaction is committing",
                S.ABORTING: "the transaction is aborting",
                S.ABORTABLE_ERROR: "the transaction failed: call abort_transaction()",
                S.FATAL_ERROR: "the producer failed fatally",
            }[self.state]
            raise TransactionStateError(f"{calls[kind]}() in state {self.state.value}: {hint}")

    def _refuse_records(self, why: str) -> None:
        self._refuse(TransactionStateError(why))

    # --- polling ----------------------------------------------------------------------------------------------

    def poll(self, now_ms: int) -> PollResult:
        if self.fatal_error is not None or self._in_flight:
            return PollResult()
        if now_ms < self._retry_at_ms:
            return PollResult((), self._retry_at_ms - now_ms)
        pending = self._pending
        state = self.state
        adds = state in (S.IN_TRANSACTION, S.COMMITTING) and self.transaction_version < 2
        needs_coordinator = pending is not None or (adds and bool(self._new_partitions()))
        if not needs_coordinator:
            return PollResult()
        if self._coordinator is None:
            return self._find(_KEY_TXN, self.transactional_id)
        request: UnsentRequest | None = None
        if adds:
            new = self._new_partitions()
            if new:
                request = self._add_partitions(new)
        if request is None and pending is not None:
            request = self._next_for(pending, now_ms)
            if request is None and pending.kind == "offsets" and pending.offsets is not None:
                o = pending.offsets
                if o.added and o.coordinator is None:
                    return self._find(_KEY_GROUP, o.group.group_id)
        if request is None:
            return PollResult()
        self._in_flight = True
        return PollResult((request,))

    def _new_partitions(self) -> list[TopicPartition]:
        added = self._txn.added
        return [tp for tp in self._queued_partitions() if tp not in added]

    def _next_for(self, pending: _Pending, now_ms: int) -> UnsentRequest | None:
        kind = pending.kind
        if kind == "init":
            return self._init_request(bump=False)
        if kind == "offsets":
            o = pending.offsets
            assert o is not None
            if not o.added and self.transaction_version >= 2:
                o.added = self._txn.offsets_added = True  # TxnOffsetCommit v5 adds the group itself
            if not o.added:
                return self._add_offsets_request(o)
            if o.coordinator is None:
                return None
            return self._txn_offset_commit_request(o)
        if kind == "abort":
            self._abort_queued(_ABORTED)  # records that waited for their topic's metadata meanwhile
        if kind in ("commit", "abort"):
            if not self._settled():
                return None  # the response of the last batch wakes the loop
            if kind == "commit" and self._txn.error is not None:
                self._finish_commit_failed()
                return None
            if self._txn_started():
                return self._end_txn_request(kind == "commit")
            if kind == "abort" and (self._bump_after_abort or self._idem.bump_required):
                return self._init_request(bump=True)  # KIP-360: sequences start again at a new epoch
            self._completed()
        return None

    def _txn_started(self) -> bool:
        return bool(self._txn.added) or self._txn.offsets_added

    # --- FindCoordinator --------------------------------------------------------------------------------------

    def _find(self, key_type: int, key: str) -> PollResult:
        self._in_flight = True
        self._finding = key

        def body(version: int) -> Any:
            R: Any = _FIND.Request
            if version >= 4:
                return R(key_type=key_type, coordinator_keys=[key])
            return R(key=key, key_type=key_type)

        return PollResult((UnsentRequest(_FIND, body, lambda r: self._on_find(key_type, key, r)),))

    def _on_find(self, key_type: int, key: str, response: ClientResponse) -> None:
        self._in_flight = False
        self._finding = None
        code, node = self._found(key, response)
        if node is None:
            if code in FATAL or code in (E.GROUP_AUTHORIZATION_FAILED,):
                what = (
                    f"the coordinator of transactional.id {key!r}"
                    if key_type == _KEY_TXN
                    else f"the coordinator of group {key!r} (transactional.id {self.transactional_id!r})"
                )
                err = txn_error(code, f"FindCoordinator for {what}")
                self._fatal(err) if isinstance(err, TransactionFatalError) else self._abortable(err)
                return
            self._backoff(response.received_ms)
            return
        self._attempts = 0
        if key_type == _KEY_TXN:
            self._coordinator = node
        else:
            pending = self._pending
            if pending is not None and pending.offsets is not None:
                pending.offsets.coordinator = node

    def _found(self, key: str, response: ClientResponse) -> tuple[int, int | None]:
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
        own = COORDINATOR_NODE_BASE - node  # a connection of its own, as the consumer's group requests
        self._metadata.add_broker(own, host, port)
        return E.NONE, own

    # --- InitProducerId ---------------------------------------------------------------------------------------

    def _init_request(self, *, bump: bool) -> UnsentRequest:
        idem = self._idem
        pid, epoch = (idem.producer_id, idem.producer_epoch) if bump else (-1, -1)
        tid, timeout = self.transactional_id, self.timeout_ms

        def body(version: int) -> Any:
            p, e = (pid, epoch) if version >= 3 else (-1, -1)
            return _INIT.Request(
                transactional_id=tid, transaction_timeout_ms=timeout, producer_id=p, producer_epoch=e
            )

        return UnsentRequest(_INIT, body, lambda r: self._on_init(bump, r), node_id=self._coordinator)

    def _on_init(self, bump: bool, response: ClientResponse) -> None:
        self._in_flight = False
        code = self._code(response)
        if code == E.NONE:
            self._attempts = 0
            body = response.body
            self._idem.producer_id = -1  # not an epoch change of an idempotent producer: a fresh start
            self._idem._set_producer(body.producer_id, body.producer_epoch)
            if bump:
                self._bump_after_abort = False
                self._txn = _Txn()
                self._completed()
                return
            level = self._feature_level(response.node_id, "transaction.version")
            self.transaction_version = 2 if level >= 2 else 1
            self.transition_to(S.READY)
            self._finish(None)
            return
        self._retry_or_fail(code, response, "InitProducerId")

    # --- AddPartitionsToTxn -----------------------------------------------------------------------------------

    def _add_partitions(self, tps: list[TopicPartition]) -> UnsentRequest:
        by_topic: dict[str, list[int]] = {}
        for t, p in tps:
            by_topic.setdefault(t, []).append(p)
        self._txn.adding = set(tps)
        idem = self._idem
        R: Any = _ADD_PARTITIONS.Request
        topics = [R.AddPartitionsToTxnTopic(name=t, partitions=ps) for t, ps in by_topic.items()]
        tid = self.transactional_id

        def body(version: int) -> Any:
            return R(
                v3_and_below_transactional_id=tid,
                v3_and_below_producer_id=idem.producer_id,
                v3_and_below_producer_epoch=idem.producer_epoch,
                v3_and_below_topics=topics,
            )

        return UnsentRequest(
            _ADD_PARTITIONS, body, self._on_add_partitions, node_id=self._coordinator,
            max_version=_ADD_PARTITIONS_CLIENT_MAX,
        )  # fmt: skip

    def _on_add_partitions(self, response: ClientResponse) -> None:
        self._in_flight = False
        adding, self._txn.adding = self._txn.adding, set()
        if response.error is not None:
            self._coordinator_lost(response.received_ms)
            return
        worst = E.NONE
        for t in response.body.results_by_topic_v3_and_below:
            for p in t.results_by_partition:
                code = p.partition_error_code
                if code == E.NONE:
                    self._txn.added.add(TopicPartition(t.name, p.partition_index))
                elif worst == E.NONE or worst == E.OPERATION_NOT_ATTEMPTED:
                    worst = code
        if worst == E.NONE:
            self._attempts = 0
            if adding - self._txn.added:
                log.debug("AddPartitionsToTxn left out %s", adding - self._txn.added)
            return
        self._retry_or_fail(worst, response, "AddPartitionsToTxn")

    # --- AddOffsetsToTxn, TxnOffsetCommit ---------------------------------------------------------------------

    def _add_offsets_request(self, o: _Offsets) -> UnsentRequest:
        idem = self._idem
        req = _ADD_OFFSETS.Request(
            transactional_id=self.transactional_id, producer_id=idem.producer_id,
            producer_epoch=idem.producer_epoch, group_id=o.group.group_id,
        )  # fmt: skip
        return UnsentRequest(_ADD_OFFSETS, req, self._on_add_offsets, node_id=self._coordinator)

    def _on_add_offsets(self, response: ClientResponse) -> None:
        self._in_flight = False
        code = self._code(response)
        pending = self._pending
        if code == E.NONE and pending is not None and pending.offsets is not None:
            self._in_flight = False
            self._attempts = 0
            pending.offsets.added = True
            self._txn.offsets_added = True
            return
        self._retry_or_fail(code, response, "AddOffsetsToTxn")

    def _txn_offset_commit_request(self, o: _Offsets) -> UnsentRequest:
        idem = self._idem
        R: Any = _TXN_OFFSET_COMMIT.Request
        TT = R.TxnOffsetCommitRequestTopic
        PP = TT.TxnOffsetCommitRequestPartition
        by_topic: dict[str, list[Any]] = {}
        for (t, p), (offset, leader_epoch, meta) in o.offsets.items():
            by_topic.setdefault(t, []).append(
                PP(
                    partition_index=p,
                    committed_offset=offset,
                    committed_leader_epoch=leader_epoch,
                    committed_metadata=meta,
                )
            )
        g = o.group
        req = R(
            transactional_id=self.transactional_id, group_id=g.group_id, producer_id=idem.producer_id,
            producer_epoch=idem.producer_epoch, generation_id=g.generation_id, member_id=g.member_id,
            group_instance_id=g.group_instance_id, topics=[TT(name=t, partitions=ps) for t, ps in by_topic.items()],
        )  # fmt: skip
        return UnsentRequest(_TXN_OFFSET_COMMIT, req, self._on_txn_offset_commit, node_id=o.coordinator)

    def _on_txn_offset_commit(self, response: ClientResponse) -> None:
        pending = self._pending
        assert pending is not None and pending.offsets is not None
        o = pending.offsets
        if isinstance(response.error, UnsupportedVersionError):
            self._in_flight = False
            self._fatal(txn_error(E.UNSUPPORTED_VERSION, "TxnOffsetCommit", str(response.error)))
            return
        if response.error is not None:
            self._in_flight = False
            o.coordinator = None
            self._backoff(response.received_ms)
            return
        worst = E.NONE
        for t in response.body.topics:
            for p in t.partitions:
                if p.error_code == E.NONE:
                    o.offsets.pop(TopicPartition(t.name, p.partition_index), None)
                elif worst == E.NONE:
                    worst = p.error_code
        self._in_flight = False
        if worst == E.NONE:
            self._attempts = 0
            self._finish(None)
            return
        if worst in COORDINATOR_MOVED:
            o.coordinator = None
            self._backoff(response.received_ms)
            return
        if worst in RETRY:
            self._backoff(response.received_ms)
            return
        err = txn_error(worst, f"TxnOffsetCommit for group {o.group.group_id!r}")
        self._fatal(err) if isinstance(err, TransactionFatalError) else self._abortable(err)

    # --- EndTxn -----------------------------------------------------------------------------------------------

    def _end_txn_request(self, commit: bool) -> UnsentRequest:
        idem = self._idem
        req = _END_TXN.Request(
            transactional_id=self.transactional_id, producer_id=idem.producer_id,
            producer_epoch=idem.producer_epoch, committed=commit,
        )  # fmt: skip
        return UnsentRequest(
            _END_TXN, req, lambda r: self._on_end_txn(commit, r), node_id=self._coordinator,
            max_version=5 if self.transaction_version >= 2 else self.end_txn_max,
        )  # fmt: skip

    def _on_end_txn(self, commit: bool, response: ClientResponse) -> None:
        self._in_flight = False
        code = self._code(response)
        if code == E.NONE:
            self._in_flight = False
            self._attempts = 0
            body = response.body
            if response.version >= 5 and body.producer_id >= 0 and body.producer_epoch >= 0:
                self._idem.producer_id = -1  # KIP-890: every transaction ends with a new epoch
                self._idem._set_producer(body.producer_id, body.producer_epoch)
                self._bump_after_abort = False
            self._txn = _Txn()
            if not commit and (self._bump_after_abort or self._idem.bump_required):
                self._bump_after_abort = True
                return  # the next poll sends InitProducerId with the current epoch
            self._completed()
            return
        self._retry_or_fail(code, response, "EndTxn")

    # --- outcomes ---------------------------------------------------------------------------------------------

    def _code(self, response: ClientResponse) -> int:
        if isinstance(response.error, UnsupportedVersionError):
            return E.UNSUPPORTED_VERSION  # the broker does not serve this API: fatal, never retried
        if response.error is not None or response.body is None:
            return E.NETWORK_EXCEPTION
        return int(response.body.error_code)

    def _retry_or_fail(self, code: int, response: ClientResponse, what: str) -> None:
        self._in_flight = False
        if code in COORDINATOR_MOVED:
            self._coordinator_lost(response.received_ms)
            return
        if code == E.CONCURRENT_TRANSACTIONS:
            # the coordinator is still writing the previous transaction's markers, a matter of milliseconds: a
            # short fixed backoff (the Java client waits 20 ms for AddPartitionsToTxn), not retry.backoff.ms
            self._retry_at_ms = response.received_ms + _CONCURRENT_BACKOFF_MS
            return
        if code in RETRY:
            self._backoff(response.received_ms)
            return
        err = txn_error(code, f"{what} for transactional.id {self.transactional_id!r}")
        if isinstance(err, TransactionAbortableError) and self.state in (S.IN_TRANSACTION, S.COMMITTING):
            if code in BUMP_AFTER:
                self._idem.request_bump(err.args[0])
            self._abortable(err)
        elif isinstance(err, TransactionAbortableError) and self.state is S.ABORTING and code in BUMP_AFTER:
            self._bump_after_abort = True  # the coordinator forgot the producer: a new epoch ends the abort
            self._txn = _Txn()
        else:
            self._fatal(
                err if isinstance(err, TransactionFatalError) else TransactionFatalError(str(err), code)
            )

    def _coordinator_lost(self, now_ms: int) -> None:
        self._coordinator = None
        self._backoff(now_ms)

    def _backoff(self, now_ms: int) -> None:
        self._attempts += 1
        self._retry_at_ms = now_ms + exponential_backoff_ms(
            self._backoff_ms, self._backoff_max_ms, self._attempts
        )

    def _abortable(self, err: TransactionError) -> None:
        if self.state in (S.IN_TRANSACTION, S.COMMITTING):
            log.info("transactional.id %s: the transaction must be aborted: %s", self.transactional_id, err)
            self._txn.error = err
            self.transition_to(S.ABORTABLE_ERROR)
            self._refuse_records(f"produce() after the transaction failed ({err}): call abort_transaction()")
            self._end_flush_if_committing()
            self._finish(err)
        elif self.state is S.ABORTABLE_ERROR:
            self._finish(err)

    def _finish_commit_failed(self) -> None:
        err = self._txn.error
        assert err is not None
        self.transition_to(S.ABORTABLE_ERROR)
        self._refuse_records(f"produce() after the transaction failed ({err}): call abort_transaction()")
        self._end_flush_if_committing()
        self._finish(err)

    def _end_flush_if_committing(self) -> None:
        if self._pending is not None and self._pending.kind == "commit":
            self._end_flush()

    def _fatal(self, err: TransactionError) -> None:
        if self.fatal_error is not None:
            return
        log.error("%s", err)  # the message names the transactional id
        self._end_flush_if_committing()
        self.fatal_error = err
        self.transition_to(S.FATAL_ERROR)
        self._idem.fatal_error = err  # the sender fails every batch and produce() raises it
        self._refuse(err)
        self._finish(err)

    def _completed(self) -> None:
        """EndTxn (and the bump after an abort, if one was due) done: READY for the next transaction."""
        kind = self._pending.kind if self._pending is not None else ""
        if kind == "commit":
            self._end_flush()
        self.transactions += 1
        self._txn = _Txn()
        self.transition_to(S.READY)
        self._refuse(self._no_txn)
        self._finish(None)

    def _finish(self, err: BaseException | None) -> None:
        pending, self._pending = self._pending, None
        if pending is None or pending.future.done():
            return
        if err is None:
            pending.future.set_result(None)
        else:
            pending.future.set_exception(err)

    def fail_pending(self, error: BaseException) -> None:
        """The producer closes: the call waited on fails with ``error``."""
        self._finish(error)


def _copy(src: Future[None], dst: Future[None]) -> None:
    if dst.done():
        return
    e = src.exception()
    if e is None:
        dst.set_result(None)
    else:
        dst.set_exception(e)
