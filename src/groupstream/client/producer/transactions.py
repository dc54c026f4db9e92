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

This module decides what to send next and what each answer means. The rest is in modules of one job each:
``txn_machine`` (the state and what an outcome does to it), ``txn_rules`` (the table of steps and the classes
of error codes), ``txn_requests`` (building the requests and reading their answers), ``txn_coordinator``
(finding the coordinators, one request at a time, the backoff) and ``txn_calls`` (the application's calls).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from concurrent.futures import Future

from groupstream.client.errors import UnsupportedVersionError
from groupstream.client.net.metadata import MetadataCache
from groupstream.client.net.requests import ClientResponse, PollResult, UnsentRequest
from groupstream.client.producer.errors import (
    TransactionAbortableError,
    TransactionAbortedError,
    TransactionFatalError,
    TransactionStateError,
)
from groupstream.client.producer.idempotence import IdempotenceManager
from groupstream.client.producer.txn_calls import OpenTxn, PendingCall, TxnOffsets, copy_outcome
from groupstream.client.producer.txn_coordinator import CoordinatorLink
from groupstream.client.producer.txn_machine import TxnMachine
from groupstream.client.producer.txn_requests import (
    END_TXN_MAX,
    KEY_GROUP,
    KEY_TXN,
    Producer,
    add_offsets,
    add_partitions,
    added_partitions,
    committed_offsets,
    end_txn,
    error_code,
    init_producer_id,
    txn_offset_commit,
)
from groupstream.client.producer.txn_rules import (
    BUMP_AFTER,
    COORDINATOR_MOVED,
    FATAL,
    RETRY,
    TxnState,
    txn_error,
)
from groupstream.protocol.error_codes import ErrorCode
from groupstream.protocol.topic_partition import TopicPartition

__all__ = ["TransactionManager", "TxnState"]

log = logging.getLogger("groupstream.client.producer")

_CONCURRENT_BACKOFF_MS = 5

S = TxnState
E = ErrorCode

_ABORTED = TransactionAbortedError("the transaction was aborted before this record was sent")


class TransactionManager(TxnMachine):
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
        super().__init__(transactional_id, idempotence, refuse=refuse, end_flush=end_flush)
        self.timeout_ms = transaction_timeout_ms
        self._queued_partitions = queued_partitions
        self._settled = settled
        self._abort_queued = abort_queued
        self._admit = admit
        self._begin_flush = begin_flush
        self._feature_level = feature_level
        # transaction.version 2 (KIP-890 part 2), decided once InitProducerId has been answered over the
        # coordinator's connection: partitions and groups join the transaction implicitly (Produce v12,
        # TxnOffsetCommit v5), and EndTxn v5 ends each transaction with a new epoch
        self.transaction_version = 1
        self._link = CoordinatorLink(metadata, retry_backoff_ms, retry_backoff_max_ms)
        self._bump_after_abort = False
        self.end_txn_max = END_TXN_MAX

    # --- the sender's questions -------------------------------------------------------------------------------

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

    # --- application operations (on the network thread) -------------------------------------------------------

    def start(self, kind: str, future: Future[None], offsets: TxnOffsets | None = None) -> None:
        """An application call: ``init``, ``begin``, ``offsets``, ``commit`` or ``abort``. Its future completes
        when the call's work is done (or fails with a `TransactionError`). A call repeated after it timed out
        waits for the same work."""
        if self.fatal_error is not None:
            future.set_exception(self.fatal_error)
            return
        pending = self._pending
        if pending is not None:
            if pending.kind == kind and kind != "offsets":
                pending.future.add_done_callback(lambda f: copy_outcome(f, future))
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
            self._pending = PendingCall(kind, future)
        elif kind == "begin":
            self._require(kind, (S.READY,))
            self._txn = OpenTxn()
            self.transition_to(S.IN_TRANSACTION)
            self._admit()
            future.set_result(None)
        elif kind == "offsets":
            if state is S.ABORTABLE_ERROR and self._txn.error is not None:
                raise self._txn.error
            self._require(kind, (S.IN_TRANSACTION,))
            assert offsets is not None
            self._pending = PendingCall(kind, future, offsets)
        elif kind == "commit":
            if state is S.ABORTABLE_ERROR and self._txn.error is not None:
                raise self._txn.error
            self._require(kind, (S.IN_TRANSACTION,))
            self.transition_to(S.COMMITTING)
            self._refuse_records(f"produce() while the transaction of {self.transactional_id!r} commits")
            self._begin_flush()
            self._pending = PendingCall(kind, future)
        elif kind == "abort":
            self._require(kind, (S.IN_TRANSACTION, S.ABORTABLE_ERROR))
            self.transition_to(S.ABORTING)
            self._refuse_records(f"produce() while the transaction of {self.transactional_id!r} aborts")
            self._abort_queued(_ABORTED)
            self._pending = PendingCall(kind, future)
        else:
            raise ValueError(kind)

    # --- polling ----------------------------------------------------------------------------------------------

    def poll(self, now_ms: int) -> PollResult:
        link = self._link
        if self.fatal_error is not None or link.in_flight:
            return PollResult()
        if now_ms < link.retry_at_ms:
            return PollResult((), link.retry_at_ms - now_ms)
        pending = self._pending
        state = self.state
        adds = state in (S.IN_TRANSACTION, S.COMMITTING) and self.transaction_version < 2
        needs_coordinator = pending is not None or (adds and bool(self._new_partitions()))
        if not needs_coordinator:
            return PollResult()
        if link.node is None:
            return self._find(KEY_TXN, self.transactional_id)
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
                    return self._find(KEY_GROUP, o.group.group_id)
        if request is None:
            return PollResult()
        link.in_flight = True
        return PollResult((request,))

    def _new_partitions(self) -> list[TopicPartition]:
        added = self._txn.added
        return [tp for tp in self._queued_partitions() if tp not in added]

    def _next_for(self, pending: PendingCall, now_ms: int) -> UnsentRequest | None:
        kind = pending.kind
        if kind == "init":
            return self._init_request(bump=False)
        if kind == "offsets":
            o = pending.offsets
            assert o is not None
            if not o.added and self.transaction_version >= 2:
                o.added = self._txn.offsets_added = True  # TxnOffsetCommit v5 adds the group itself
            if not o.added:
                return add_offsets(self._producer(), o.group.group_id, self._on_add_offsets, self._link.node)
            if o.coordinator is None:
                return None
            return txn_offset_commit(
                self._producer(), o.offsets, o.group, self._on_txn_offset_commit, o.coordinator
            )
        if kind == "abort":
            self._abort_queued(_ABORTED)  # records that waited for their topic's metadata meanwhile
        if kind in ("commit", "abort"):
            if not self._settled():
                return None  # the response of the last batch wakes the loop
            if kind == "commit" and self._txn.error is not None:
                self._finish_commit_failed()
                return None
            if self._txn.started:
                return self._end_txn_request(kind == "commit")
            if kind == "abort" and (self._bump_after_abort or self._idem.bump_required):
                return self._init_request(bump=True)  # KIP-360: sequences start again at a new epoch
            self._completed()
        return None

    def _producer(self) -> Producer:
        """What every request to a coordinator names: the transactional id, producer id and epoch."""
        return self.transactional_id, self._idem.producer_id, self._idem.producer_epoch

    # --- FindCoordinator --------------------------------------------------------------------------------------

    def _find(self, key_type: int, key: str) -> PollResult:
        return PollResult((self._link.find(key_type, key, lambda r: self._on_find(key_type, key, r)),))

    def _on_find(self, key_type: int, key: str, response: ClientResponse) -> None:
        link = self._link
        link.in_flight = False
        code, node = link.found(key, response)
        if node is None:
            if code in FATAL or code in (E.GROUP_AUTHORIZATION_FAILED,):
                what = (
                    f"the coordinator of transactional.id {key!r}"
                    if key_type == KEY_TXN
                    else f"the coordinator of group {key!r} (transactional.id {self.transactional_id!r})"
                )
                self._fail(txn_error(code, f"FindCoordinator for {what}"))
                return
            link.backoff(response.received_ms)
            return
        link.succeeded()
        if key_type == KEY_TXN:
            link.node = node
        else:
            pending = self._pending
            if pending is not None and pending.offsets is not None:
                pending.offsets.coordinator = node

    # --- InitProducerId ---------------------------------------------------------------------------------------

    def _init_request(self, *, bump: bool) -> UnsentRequest:
        producer = self._producer() if bump else (self.transactional_id, -1, -1)
        return init_producer_id(producer, self.timeout_ms, lambda r: self._on_init(bump, r), self._link.node)

    def _on_init(self, bump: bool, response: ClientResponse) -> None:
        self._link.in_flight = False
        code = error_code(response)
        if code == E.NONE:
            self._link.succeeded()
            body = response.body
            self._idem.producer_id = -1  # not an epoch change of an idempotent producer: a fresh start
            self._idem._set_producer(body.producer_id, body.producer_epoch)
            if bump:
                self._bump_after_abort = False
                self._txn = OpenTxn()
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
        self._txn.adding = set(tps)
        return add_partitions(self._producer(), tps, self._on_add_partitions, self._link.node)

    def _on_add_partitions(self, response: ClientResponse) -> None:
        self._link.in_flight = False
        adding, self._txn.adding = self._txn.adding, set()
        if response.error is not None:
            self._link.lost(response.received_ms)
            return
        added, worst = added_partitions(response)
        self._txn.added.update(added)
        if worst == E.NONE:
            self._link.succeeded()
            if adding - self._txn.added:
                log.debug("AddPartitionsToTxn left out %s", adding - self._txn.added)
            return
        self._retry_or_fail(worst, response, "AddPartitionsToTxn")

    # --- AddOffsetsToTxn, TxnOffsetCommit ---------------------------------------------------------------------

    def _on_add_offsets(self, response: ClientResponse) -> None:
        self._link.in_flight = False
        code = error_code(response)
        pending = self._pending
        if code == E.NONE and pending is not None and pending.offsets is not None:
            self._link.succeeded()
            pending.offsets.added = True
            self._txn.offsets_added = True
            return
        self._retry_or_fail(code, response, "AddOffsetsToTxn")

    def _on_txn_offset_commit(self, response: ClientResponse) -> None:
        pending = self._pending
        assert pending is not None and pending.offsets is not None
        o = pending.offsets
        link = self._link
        link.in_flight = False
        if isinstance(response.error, UnsupportedVersionError):
            self._fatal(txn_error(E.UNSUPPORTED_VERSION, "TxnOffsetCommit", str(response.error)))
            return
        if response.error is not None:
            o.coordinator = None
            link.backoff(response.received_ms)
            return
        committed, worst = committed_offsets(response)
        for tp in committed:
            o.offsets.pop(tp, None)
        if worst == E.NONE:
            link.succeeded()
            self._finish(None)
            return
        if worst in COORDINATOR_MOVED:
            o.coordinator = None
            link.backoff(response.received_ms)
            return
        if worst in RETRY:
            link.backoff(response.received_ms)
            return
        self._fail(txn_error(worst, f"TxnOffsetCommit for group {o.group.group_id!r}"))

    # --- EndTxn -----------------------------------------------------------------------------------------------

    def _end_txn_request(self, commit: bool) -> UnsentRequest:
        max_version = 5 if self.transaction_version >= 2 else self.end_txn_max
        return end_txn(
            self._producer(), commit, lambda r: self._on_end_txn(commit, r), self._link.node, max_version
        )

    def _on_end_txn(self, commit: bool, response: ClientResponse) -> None:
        self._link.in_flight = False
        code = error_code(response)
        if code == E.NONE:
            self._link.succeeded()
            body = response.body
            if response.version >= 5 and body.producer_id >= 0 and body.producer_epoch >= 0:
                self._idem.producer_id = -1  # KIP-890: every transaction ends with a new epoch
                self._idem._set_producer(body.producer_id, body.producer_epoch)
                self._bump_after_abort = False
            self._txn = OpenTxn()
            if not commit and (self._bump_after_abort or self._idem.bump_required):
                self._bump_after_abort = True
                return  # the next poll sends InitProducerId with the current epoch
            self._completed()
            return
        self._retry_or_fail(code, response, "EndTxn")

    # --- answers that failed ----------------------------------------------------------------------------------

    def _retry_or_fail(self, code: int, response: ClientResponse, what: str) -> None:
        link = self._link
        link.in_flight = False
        if code in COORDINATOR_MOVED:
            link.lost(response.received_ms)
            return
        if code == E.CONCURRENT_TRANSACTIONS:
            # the coordinator is still writing the previous transaction's markers, a matter of milliseconds: a
            # short fixed backoff (the Java client waits 20 ms for AddPartitionsToTxn), not retry.backoff.ms
            link.retry_after(response.received_ms, _CONCURRENT_BACKOFF_MS)
            return
        if code in RETRY:
            link.backoff(response.received_ms)
            return
        err = txn_error(code, f"{what} for transactional.id {self.transactional_id!r}")
        if isinstance(err, TransactionAbortableError) and self.state in (S.IN_TRANSACTION, S.COMMITTING):
            if code in BUMP_AFTER:
                self._idem.request_bump(err.args[0])
            self._abortable(err)
        elif isinstance(err, TransactionAbortableError) and self.state is S.ABORTING and code in BUMP_AFTER:
            self._bump_after_abort = True  # the coordinator forgot the producer: a new epoch ends the abort
            self._txn = OpenTxn()
        else:
            self._fatal(
                err if isinstance(err, TransactionFatalError) else TransactionFatalError(str(err), code)
            )
