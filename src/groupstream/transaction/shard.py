"""One `__transaction_state` partition's transaction coordinator: a pure state machine, like the group shard.

The runtime (`groupstream.broker.coordinator_runtime`, the same one the group coordinator runs on) calls
``handle(request, now_ms, view)``, ``on_timer`` and ``on_loaded``; each returns a `TxnResult`: records to
append (then replayed, the only mutation of durable state), responses sent once those records are durable,
timers, and marker jobs. A marker job asks the broker to write COMMIT or ABORT control batches to every
partition of a transaction once its PrepareCommit / PrepareAbort record is durable; when they are written the
broker calls ``markers_written`` and the shard writes CompleteCommit / CompleteAbort. The order is Kafka's:
EndTxn is answered when the Prepare record is durable (the decision cannot be lost: a restarted coordinator
finds the Prepare record and writes the markers again, see ``on_loaded``), and a producer asking anything while
its markers are in flight gets CONCURRENT_TRANSACTIONS and retries.

Transaction protocol version 1 (KIP-98 with KIP-360 epoch bumps and KIP-447): the client registers
partitions with AddPartitionsToTxn v0-3, the epoch is bumped by InitProducerId, by fencing and by timeouts,
not per transaction. Version 2 (KIP-890 part 2), where the broker finalized ``transaction.version`` 2 and the
client ends with EndTxn v5: the Prepare record carries the producer epoch + 1, the markers are written with it
(so a late write of the ended transaction is refused by every partition) and EndTxn answers it for the next
transaction; once the epoch would run out, the Complete record moves the producer to a new id at epoch 0. A
TV2 client adds partitions through its Produce / TxnOffsetCommit, which the broker turns into the batched
AddPartitionsToTxn (v4+, verify_only false) handled here; it may abort with nothing added (a bumped, empty
abort). The same broker serves TV1 clients (EndTxn v0-4) the old way, as Kafka picks by the request version.

Fencing: InitProducerId for an id whose transaction is Ongoing bumps the epoch and aborts that transaction
(Ongoing -> PrepareEpochFence -> PrepareAbort, only the last written, as Kafka writes it), answering
CONCURRENT_TRANSACTIONS; the new producer retries and gets the next epoch once the abort is complete. The
zombie's next request carries the old epoch: PRODUCER_FENCED (INVALID_PRODUCER_EPOCH below the versions that
know the newer code), and its produce requests are refused by the partition logs, whose producer epoch the
abort markers raised. A transaction still Ongoing at ``start + timeout`` is aborted the same way by a timer.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from groupstream.coordinator.request import ShardRequest
from groupstream.coordinator.result import CancelTimer, RequestToken, ScheduleTimer, TimerOp
from groupstream.protocol.error_codes import ErrorCode
from groupstream.protocol.messages import APIS
from groupstream.transaction.records import TxnRecord
from groupstream.transaction.state import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TopicPartition,
    TxnMetadata,
    TxnState,
)

__all__ = [
    "SUPPORTED_API_KEYS",
    "MarkerJob",
    "TransactionCoordinatorConfig",
    "TransactionShard",
    "TxnResult",
    "TxnTopicsView",
]

INIT_PRODUCER_ID, ADD_PARTITIONS_TO_TXN, ADD_OFFSETS_TO_TXN, END_TXN = 22, 24, 25, 26
DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS = 65, 66
SUPPORTED_API_KEYS = frozenset(
    {INIT_PRODUCER_ID, ADD_PARTITIONS_TO_TXN, ADD_OFFSETS_TO_TXN, END_TXN, DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS}
)

# Kafka bumps to a new producer id when the epoch would reach Short.MAX_VALUE - 1 (it keeps the last value free
# for the fencing bump of an ongoing transaction).
MAX_EPOCH = 32767 - 1
TIMEOUT_TIMER = "txn-timeout:"
EXPIRATION_TIMER = "txn-expiration"

# The first version of each API whose clients know PRODUCER_FENCED; older ones get INVALID_PRODUCER_EPOCH.
_FENCED_SINCE = {INIT_PRODUCER_ID: 4, ADD_PARTITIONS_TO_TXN: 2, ADD_OFFSETS_TO_TXN: 2, END_TXN: 2}


@dataclass(frozen=True, slots=True)
class TransactionCoordinatorConfig:
    """Kafka's settings and defaults: ``transaction.max.timeout.ms`` (15 minutes) bounds what a producer may
    ask for; a transactional id without an open transaction whose last change is older than
    ``transactional.id.expiration.ms`` (7 days) is removed, checked every
    ``transaction.remove.expired.transaction.cleanup.interval.ms`` (1 hour)."""

    max_timeout_ms: int = 900_000
    id_expiration_ms: int = 7 * 24 * 3600 * 1000
    expiration_check_interval_ms: int = 3600 * 1000
    transaction_version: int = 2  # the finalized feature level: EndTxn v5 bumps the epoch only at 2


class TxnTopicsView(Protocol):
    """What the shard needs of the broker's topics: partition counts, and where a group's offsets live."""

    def partition_count(self, topic: str) -> int | None: ...

    def offsets_partition(self, group_id: str) -> TopicPartition: ...


@dataclass(frozen=True, slots=True)
class MarkerJob:
    """Write a COMMIT (``commit``) or ABORT control batch of producer id/epoch to each of ``partitions``, then
    call ``markers_written(transactional_id, producer_id, producer_epoch, now_ms)``."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    commit: bool
    partitions: frozenset[TopicPartition]


@dataclass(slots=True)
class TxnResult:
    """A `groupstream.coordinator.result.CoordinatorResult` of `__transaction_state` records, plus the marker
    jobs the broker runs once the records are durable."""

    records: list[TxnRecord] = field(default_factory=list)
    responses: list[tuple[RequestToken, Any]] = field(default_factory=list)
    timers: list[TimerOp] = field(default_factory=list)
    markers: list[MarkerJob] = field(default_factory=list)

    def extend(self, other: TxnResult) -> TxnResult:
        self.records.extend(other.records)
        self.responses.extend(other.responses)
        self.timers.extend(other.timers)
        self.markers.extend(other.markers)
        return self


class TransactionShard:
    def __init__(self, partition: int, config: TransactionCoordinatorConfig,
                 allocate_producer_id: Callable[[], int]) -> None:
        """``allocate_producer_id()`` hands out a producer id never used before (it may raise an
        ``OSError``-like storage error; the request is then answered COORDINATOR_NOT_AVAILABLE)."""
        self.partition = partition
        self.config = config
        self._allocate = allocate_producer_id
        self._txns: dict[str, TxnMetadata] = {}

    # --- durable state -----------------------------------------------------------------------------------

    def replay(self, record: Any) -> None:
        """The only mutation of durable state: a `TxnRecord` sets (or, without metadata, removes) an id."""
        assert isinstance(record, TxnRecord)
        if record.metadata is None:
            self._txns.pop(record.transactional_id, None)
        else:
            self._txns[record.transactional_id] = record.metadata

    def transactions(self) -> dict[str, TxnMetadata]:
        """Every transactional id this shard coordinates (a copy; for tests, tools and replay checks)."""
        return dict(self._txns)

    def get(self, transactional_id: str) -> TxnMetadata | None:
        return self._txns.get(transactional_id)

    # --- the runtime's interface -------------------------------------------------------------------------

    def on_loaded(self, now_ms: int) -> TxnResult:
        """After a restart or a move: finish what was decided (markers of Prepare* records again) and arm the
        timeouts of open transactions."""
        result = TxnResult(timers=[ScheduleTimer(EXPIRATION_TIMER, now_ms + self.config.expiration_check_interval_ms)])
        for m in self._txns.values():
            if m.state.is_preparing:
                result.markers.append(_job(m))
            elif m.state is TxnState.ONGOING:
                result.timers.append(ScheduleTimer(TIMEOUT_TIMER + m.transactional_id, m.start_ms + m.timeout_ms))
        return result

    def unload(self) -> list[RequestToken]:
        return []  # nothing is parked: every answer goes out with the result that decides it

    def on_topics_deleted(self, topics: Iterable[str], now_ms: int) -> TxnResult:
        return TxnResult()

    def handle(self, request: ShardRequest, now_ms: int, view: TxnTopicsView) -> TxnResult:
        key = request.api_key
        if key == INIT_PRODUCER_ID:
            return self._init_producer_id(request, now_ms)
        if key == ADD_PARTITIONS_TO_TXN:
            return self._add_partitions(request, now_ms, view)
        if key == ADD_OFFSETS_TO_TXN:
            return self._add_offsets(request, now_ms, view)
        if key == END_TXN:
            return self._end_txn(request, now_ms)
        if key == DESCRIBE_TRANSACTIONS:
            return self._describe(request)
        if key == LIST_TRANSACTIONS:
            return self._list(request, now_ms)
        raise ValueError(f"the transaction coordinator does not handle api key {key}")

    def on_timer(self, key: str, now_ms: int, view: Any) -> TxnResult:
        """A transaction's timeout: still Ongoing and expired, it is aborted with an epoch bump (the producer is
        fenced, as Kafka does it), so that a stuck producer cannot hold the last stable offset back."""
        if key == EXPIRATION_TIMER:
            return self._expire(now_ms)
        if not key.startswith(TIMEOUT_TIMER):
            return TxnResult()
        m = self._txns.get(key[len(TIMEOUT_TIMER):])
        if m is None or m.state is not TxnState.ONGOING:
            return TxnResult()
        if now_ms < m.start_ms + m.timeout_ms:  # the transaction was restarted since the timer was set
            return TxnResult(timers=[ScheduleTimer(key, m.start_ms + m.timeout_ms)])
        return self._fence_and_abort(m, now_ms)

    def _expire(self, now_ms: int) -> TxnResult:
        """Kafka's cleanup of idle transactional ids: one with no open transaction (Empty, CompleteCommit,
        CompleteAbort) unchanged for ``transactional.id.expiration.ms`` becomes Dead and is removed by a
        tombstone; its producer id is not handed out again (ids are never reused)."""
        result = TxnResult(timers=[ScheduleTimer(EXPIRATION_TIMER, now_ms + self.config.expiration_check_interval_ms)])
        for tid, m in sorted(self._txns.items()):
            if m.state.is_complete and now_ms - m.last_update_ms >= self.config.id_expiration_ms:
                m.transition_to(TxnState.DEAD, now_ms)  # checked: only an idle id may die
                result.records.append(TxnRecord(tid, None))
        return result

    def markers_written(self, transactional_id: str, producer_id: int, producer_epoch: int,
                        now_ms: int) -> TxnResult:
        """Every marker of the transaction is in its partition: CompleteCommit / CompleteAbort. A job that no
        longer matches (the state moved on, e.g. after a reload that wrote the markers again) does nothing."""
        m = self._txns.get(transactional_id)
        if m is None or not m.state.is_preparing or (m.producer_id, m.producer_epoch) != (producer_id, producer_epoch):
            return TxnResult()
        target = TxnState.COMPLETE_COMMIT if m.state is TxnState.PREPARE_COMMIT else TxnState.COMPLETE_ABORT
        if m.next_producer_id != NO_PRODUCER_ID:  # TV2 ran out of epochs: the next transaction has a new id
            done = m.transition_to(target, now_ms, partitions=frozenset(), producer_id=m.next_producer_id,
                                   producer_epoch=0, previous_producer_id=m.producer_id,
                                   next_producer_id=NO_PRODUCER_ID)
        else:
            done = m.transition_to(target, now_ms, partitions=frozenset())
        return TxnResult(records=[TxnRecord(transactional_id, done)])

    # --- InitProducerId ----------------------------------------------------------------------------------

    def _init_producer_id(self, request: ShardRequest, now_ms: int) -> TxnResult:
        req, version, token = request.body, request.version, request.token
        R = APIS[INIT_PRODUCER_ID].Response

        def answer(code: int, pid: int = NO_PRODUCER_ID, epoch: int = NO_PRODUCER_EPOCH,
                   records: list[Any] | None = None, **more: Any) -> TxnResult:
            body = R(throttle_time_ms=0, error_code=code, producer_id=pid, producer_epoch=epoch)
            return TxnResult(records=list(records or ()), responses=[(token, body)], **more)

        tid: str = req.transactional_id
        if not tid:
            return answer(ErrorCode.INVALID_REQUEST)
        timeout = req.transaction_timeout_ms
        if not 0 < timeout <= self.config.max_timeout_ms:
            return answer(ErrorCode.INVALID_TRANSACTION_TIMEOUT)
        asked_pid = getattr(req, "producer_id", NO_PRODUCER_ID)
        asked_epoch = getattr(req, "producer_epoch", NO_PRODUCER_EPOCH)
        m = self._txns.get(tid)
        if m is None:
            try:
                pid = self._allocate()
            except Exception:  # the id block could not be reserved on disk: retriable
                return answer(ErrorCode.COORDINATOR_NOT_AVAILABLE)
            new = TxnMetadata(tid, pid, 0, timeout, TxnState.EMPTY, frozenset(), -1, now_ms)
            return answer(ErrorCode.NONE, pid, 0, [TxnRecord(tid, new)])
        if asked_pid != NO_PRODUCER_ID and not _is_current_or_retry(m, asked_pid, asked_epoch):
            # KIP-360: a producer resuming with an id and epoch that are no longer the current ones is a zombie
            return answer(_fenced(INIT_PRODUCER_ID, version))
        if m.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT, TxnState.PREPARE_EPOCH_FENCE,
                       TxnState.DEAD):
            return answer(ErrorCode.CONCURRENT_TRANSACTIONS)
        if m.state is TxnState.ONGOING:
            # fence the previous producer: its transaction aborts under a bumped epoch; we retry meanwhile
            result = self._fence_and_abort(m, now_ms)
            R_body = R(throttle_time_ms=0, error_code=ErrorCode.CONCURRENT_TRANSACTIONS,
                       producer_id=NO_PRODUCER_ID, producer_epoch=NO_PRODUCER_EPOCH)
            result.responses.append((token, R_body))
            return result
        # Empty, CompleteCommit, CompleteAbort: the next epoch, or a new id once the epochs run out
        if m.producer_epoch + 1 >= MAX_EPOCH:
            try:
                pid = self._allocate()
            except Exception:
                return answer(ErrorCode.COORDINATOR_NOT_AVAILABLE)
            nxt = m.transition_to(TxnState.EMPTY, now_ms, producer_id=pid, producer_epoch=0,
                                  previous_producer_id=m.producer_id, timeout_ms=timeout,
                                  partitions=frozenset(), start_ms=-1)
        else:
            nxt = m.transition_to(TxnState.EMPTY, now_ms, producer_epoch=m.producer_epoch + 1, timeout_ms=timeout,
                                  partitions=frozenset(), start_ms=-1)
        return answer(ErrorCode.NONE, nxt.producer_id, nxt.producer_epoch, [TxnRecord(tid, nxt)])

    def _fence_and_abort(self, m: TxnMetadata, now_ms: int) -> TxnResult:
        """Ongoing -> PrepareEpochFence -> PrepareAbort under epoch + 1 (only the last is written, as Kafka
        writes it), with the abort markers to follow and the timeout disarmed."""
        fenced = m.transition_to(TxnState.PREPARE_EPOCH_FENCE, now_ms)
        if fenced.producer_epoch + 1 <= 32767:
            fenced = fenced.transition_to(TxnState.PREPARE_ABORT, now_ms, producer_epoch=m.producer_epoch + 1)
        else:  # no epoch left to fence with: abort under the current one (the producer must start over)
            fenced = fenced.transition_to(TxnState.PREPARE_ABORT, now_ms)
        return TxnResult(records=[TxnRecord(m.transactional_id, fenced)], markers=[_job(fenced)],
                         timers=[CancelTimer(TIMEOUT_TIMER + m.transactional_id)])

    # --- AddPartitionsToTxn, AddOffsetsToTxn ---------------------------------------------------------------

    def _check_producer(self, api_key: int, version: int, tid: str, pid: int, epoch: int,
                        ahead: dict[str, TxnMetadata] | None = None) -> tuple[int, TxnMetadata | None]:
        """The error for a request of producer ``pid``/``epoch`` on ``tid`` (NONE and the metadata if it may
        proceed to look at the state); ``ahead`` holds metadata written earlier in the same request."""
        m = (ahead or {}).get(tid) or self._txns.get(tid)
        if m is None or m.producer_id != pid:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING, None
        if m.producer_epoch != epoch:
            return _fenced(api_key, version), None
        if m.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT, TxnState.PREPARE_EPOCH_FENCE):
            return ErrorCode.CONCURRENT_TRANSACTIONS, None
        if m.state is TxnState.DEAD:
            return ErrorCode.INVALID_TXN_STATE, None
        return ErrorCode.NONE, m

    def _open(self, m: TxnMetadata, partitions: Iterable[TopicPartition], now_ms: int,
              client_version: int | None = None) -> TxnResult:
        """Add ``partitions`` to ``m``'s transaction, starting one if none is open; no record if none is new.
        A transaction started with ``client_version`` (2: opened by a TV2 client's Produce) records it."""
        wanted = frozenset(partitions)
        if m.state is TxnState.ONGOING and wanted <= m.partitions:
            return TxnResult()
        starting = m.state is not TxnState.ONGOING
        start = now_ms if starting else m.start_ms
        version = m.client_transaction_version if client_version is None or not starting else client_version
        nxt = m.transition_to(TxnState.ONGOING, now_ms, partitions=m.partitions | wanted, start_ms=start,
                              client_transaction_version=version)
        result = TxnResult(records=[TxnRecord(m.transactional_id, nxt)])
        if starting:
            result.timers.append(ScheduleTimer(TIMEOUT_TIMER + m.transactional_id, start + m.timeout_ms))
        return result

    def _add_partitions(self, request: ShardRequest, now_ms: int, view: TxnTopicsView) -> TxnResult:
        req, version = request.body, request.version
        R = APIS[ADD_PARTITIONS_TO_TXN].Response
        if version >= 4:  # the brokers' batched form: several transactions, verify_only
            return self._add_partitions_batched(request, now_ms, view)
        topics = [(t.name, list(t.partitions)) for t in req.v3_and_below_topics]
        codes = self._add_partitions_one(version, req.v3_and_below_transactional_id, req.v3_and_below_producer_id,
                                         req.v3_and_below_producer_epoch, topics, False, now_ms, view)
        code_map, result = codes
        body = R(throttle_time_ms=0, results_by_topic_v3_and_below=_topic_results(R, topics, code_map))
        result.responses.append((request.token, body))
        return result

    def _add_partitions_batched(self, request: ShardRequest, now_ms: int, view: TxnTopicsView) -> TxnResult:
        R = APIS[ADD_PARTITIONS_TO_TXN].Response
        result = TxnResult()
        out = []
        ahead: dict[str, TxnMetadata] = {}  # records of this batch, not yet replayed
        for txn in request.body.transactions:
            topics = [(t.name, list(t.partitions)) for t in txn.topics]
            code_map, part = self._add_partitions_one(request.version, txn.transactional_id, txn.producer_id,
                                                      txn.producer_epoch, topics, txn.verify_only, now_ms, view,
                                                      ahead)
            for record in part.records:  # a later entry for the same id sees what the earlier one added
                if record.metadata is not None:
                    ahead[record.transactional_id] = record.metadata
            result.extend(part)
            out.append(R.AddPartitionsToTxnResult(transactional_id=txn.transactional_id,
                                                  topic_results=_topic_results(R, topics, code_map)))
        result.responses.append((request.token, R(throttle_time_ms=0, error_code=0, results_by_transaction=out)))
        return result

    def _add_partitions_one(self, version: int, tid: str, pid: int, epoch: int,
                            topics: list[tuple[str, list[int]]], verify_only: bool, now_ms: int,
                            view: TxnTopicsView, ahead: dict[str, TxnMetadata] | None = None,
                            ) -> tuple[dict[TopicPartition, int], TxnResult]:
        wanted = [TopicPartition(t, p) for t, ps in topics for p in ps]
        unknown = {tp for tp in wanted if not _exists(view, tp)}
        code, m = self._check_producer(ADD_PARTITIONS_TO_TXN, version, tid, pid, epoch, ahead)
        if code == ErrorCode.NONE and unknown:
            return {tp: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if tp in unknown else ErrorCode.OPERATION_NOT_ATTEMPTED
                    for tp in wanted}, TxnResult()  # fmt: skip
        if code != ErrorCode.NONE or m is None:
            return {tp: code for tp in wanted}, TxnResult()
        if verify_only:  # KIP-890 part 1: is each partition already in the ongoing transaction?
            ongoing = m.state is TxnState.ONGOING
            return {tp: ErrorCode.NONE if ongoing and tp in m.partitions else ErrorCode.INVALID_TXN_STATE
                    for tp in wanted}, TxnResult()  # fmt: skip
        # v4+ without verify_only: the broker adds the partition of a TV2 client's Produce (KIP-890 part 2)
        tv = 2 if version >= 4 and self.config.transaction_version >= 2 else None
        return {tp: ErrorCode.NONE for tp in wanted}, self._open(m, wanted, now_ms, tv)

    def _add_offsets(self, request: ShardRequest, now_ms: int, view: TxnTopicsView) -> TxnResult:
        req = request.body
        R = APIS[ADD_OFFSETS_TO_TXN].Response
        code, m = self._check_producer(ADD_OFFSETS_TO_TXN, request.version, req.transactional_id, req.producer_id,
                                       req.producer_epoch)
        result = TxnResult()
        if code == ErrorCode.NONE and m is not None:
            # the group's __consumer_offsets partition joins the transaction: it gets the marker that makes the
            # transaction's offsets visible (or drops them)
            result = self._open(m, [view.offsets_partition(req.group_id)], now_ms)
        result.responses.append((request.token, R(throttle_time_ms=0, error_code=code)))
        return result

    # --- EndTxn ------------------------------------------------------------------------------------------------

    def _end_txn(self, request: ShardRequest, now_ms: int) -> TxnResult:
        req, version = request.body, request.version
        R = APIS[END_TXN].Response
        commit: bool = req.committed

        def answer(code: int, m: TxnMetadata | None = None, result: TxnResult | None = None) -> TxnResult:
            out = result or TxnResult()
            pid, epoch = (m.producer_id, m.producer_epoch) if m is not None and code == ErrorCode.NONE else (-1, -1)
            out.responses.append((request.token, R(throttle_time_ms=0, error_code=code, producer_id=pid,
                                                   producer_epoch=epoch)))
            return out

        m = self._txns.get(req.transactional_id)
        if m is not None and version >= 5 and self.config.transaction_version >= 2:
            return self._end_txn_v2(request, m, now_ms, answer)
        if m is None or m.producer_id != req.producer_id:
            return answer(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
        if m.producer_epoch != req.producer_epoch:
            return answer(_fenced(END_TXN, version))
        state = m.state
        if state is TxnState.ONGOING:
            target = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
            nxt = m.transition_to(target, now_ms)
            return answer(ErrorCode.NONE, nxt, TxnResult(records=[TxnRecord(m.transactional_id, nxt)],
                                                         markers=[_job(nxt)],
                                                         timers=[CancelTimer(TIMEOUT_TIMER + m.transactional_id)]))
        if state is TxnState.PREPARE_COMMIT:
            return answer(ErrorCode.CONCURRENT_TRANSACTIONS if commit else ErrorCode.INVALID_TXN_STATE)
        if state is TxnState.PREPARE_ABORT:
            return answer(ErrorCode.INVALID_TXN_STATE if commit else ErrorCode.CONCURRENT_TRANSACTIONS)
        if state is TxnState.COMPLETE_COMMIT:  # a retry of the commit that completed
            return answer(ErrorCode.NONE if commit else ErrorCode.INVALID_TXN_STATE, m)
        if state is TxnState.COMPLETE_ABORT:
            return answer(ErrorCode.INVALID_TXN_STATE if commit else ErrorCode.NONE, m)
        if state is TxnState.PREPARE_EPOCH_FENCE:
            return answer(ErrorCode.CONCURRENT_TRANSACTIONS)
        return answer(ErrorCode.INVALID_TXN_STATE)  # Empty (nothing was added), Dead

    def _end_txn_v2(self, request: ShardRequest, m: TxnMetadata, now_ms: int,
                    answer: Callable[..., TxnResult]) -> TxnResult:
        """KIP-890 part 2: every end bumps the epoch (Prepare record, markers and the answer carry epoch + 1).
        A retry of an end already decided carries the epoch before the bump (or, after a move to a new producer
        id, the previous id) and is answered as the first was; an abort with nothing added is a bumped, empty
        abort; a commit with nothing added is INVALID_TXN_STATE."""
        req = request.body
        commit: bool = req.committed
        state = m.state
        retry = ((req.producer_id == m.producer_id and req.producer_epoch + 1 == m.producer_epoch)
                 or (req.producer_id == m.previous_producer_id and m.producer_epoch == 0
                     and state in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)))  # fmt: skip
        if retry and state is not TxnState.ONGOING and state is not TxnState.EMPTY:
            if state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT, TxnState.PREPARE_EPOCH_FENCE):
                wanted = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
                return answer(ErrorCode.CONCURRENT_TRANSACTIONS if state is wanted or state is
                              TxnState.PREPARE_EPOCH_FENCE else ErrorCode.INVALID_TXN_STATE)
            done = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
            return answer(ErrorCode.NONE, m) if state is done else answer(ErrorCode.INVALID_TXN_STATE)
        if m.producer_id != req.producer_id:
            return answer(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
        if m.producer_epoch != req.producer_epoch:
            return answer(_fenced(END_TXN, request.version))
        if state.is_preparing or state is TxnState.PREPARE_EPOCH_FENCE:
            return answer(ErrorCode.CONCURRENT_TRANSACTIONS)
        if state is TxnState.DEAD or (state is not TxnState.ONGOING and commit):
            return answer(ErrorCode.INVALID_TXN_STATE)
        changes: dict[str, Any] = {"producer_epoch": m.producer_epoch + 1, "client_transaction_version": 2}
        if m.producer_epoch + 1 >= MAX_EPOCH:  # the epochs run out: the next transaction gets a new id
            try:
                changes["next_producer_id"] = self._allocate()
            except Exception:
                return answer(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        target = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
        if state is not TxnState.ONGOING:
            changes.update(partitions=frozenset(), start_ms=now_ms)  # nothing was added: an empty abort
        nxt = m.transition_to(target, now_ms, **changes)
        shown = nxt if nxt.next_producer_id == NO_PRODUCER_ID else replace(
            nxt, producer_id=nxt.next_producer_id, producer_epoch=0)
        return answer(ErrorCode.NONE, shown, TxnResult(records=[TxnRecord(m.transactional_id, nxt)],
                                                       markers=[_job(nxt)],
                                                       timers=[CancelTimer(TIMEOUT_TIMER + m.transactional_id)]))

    # --- DescribeTransactions, ListTransactions ---------------------------------------------------------------

    def _describe(self, request: ShardRequest) -> TxnResult:
        R = APIS[DESCRIBE_TRANSACTIONS].Response
        S = R.TransactionState
        out = []
        for tid in request.body.transactional_ids:
            m = self._txns.get(tid)
            if m is None:
                out.append(S(error_code=ErrorCode.TRANSACTIONAL_ID_NOT_FOUND, transactional_id=tid,
                             transaction_state="", transaction_timeout_ms=0, transaction_start_time_ms=-1,
                             producer_id=-1, producer_epoch=-1, topics=[]))
                continue
            out.append(S(error_code=0, transactional_id=tid, transaction_state=m.state.wire_name,
                         transaction_timeout_ms=m.timeout_ms, transaction_start_time_ms=m.start_ms,
                         producer_id=m.producer_id, producer_epoch=m.producer_epoch,
                         topics=[S.TopicData(topic=t, partitions=ps) for t, ps in m.topic_partitions().items()]))
        return TxnResult(responses=[(request.token, R(throttle_time_ms=0, transaction_states=out))])

    def _list(self, request: ShardRequest, now_ms: int) -> TxnResult:
        req = request.body
        R = APIS[LIST_TRANSACTIONS].Response
        states = {TxnState.from_wire_name(s) for s in req.state_filters} - {None}
        unknown = [s for s in req.state_filters if TxnState.from_wire_name(s) is None]
        pids = set(req.producer_id_filters)
        duration = getattr(req, "duration_filter", -1)
        pattern_text = getattr(req, "transactional_id_pattern", None)
        try:
            pattern = re.compile(pattern_text) if pattern_text else None
        except re.error:
            return TxnResult(responses=[(request.token, R(throttle_time_ms=0,
                                                          error_code=ErrorCode.INVALID_REGULAR_EXPRESSION,
                                                          unknown_state_filters=[], transaction_states=[]))])
        out = []
        for tid, m in sorted(self._txns.items()):
            if req.state_filters and m.state not in states:
                continue
            if pids and m.producer_id not in pids:
                continue
            if duration >= 0 and (m.state is not TxnState.ONGOING or now_ms - m.start_ms <= duration):
                continue
            if pattern is not None and not pattern.fullmatch(tid):
                continue
            out.append(R.ListedTransactionState(transactional_id=tid, producer_id=m.producer_id,
                                                transaction_state=m.state.wire_name))
        body = R(throttle_time_ms=0, error_code=0, unknown_state_filters=unknown, transaction_states=out)
        return TxnResult(responses=[(request.token, body)])


def _job(m: TxnMetadata) -> MarkerJob:
    return MarkerJob(m.transactional_id, m.producer_id, m.producer_epoch, m.state is TxnState.PREPARE_COMMIT,
                     m.partitions)


def _fenced(api_key: int, version: int) -> int:
    return ErrorCode.PRODUCER_FENCED if version >= _FENCED_SINCE[api_key] else ErrorCode.INVALID_PRODUCER_EPOCH


def _is_current_or_retry(m: TxnMetadata, pid: int, epoch: int) -> bool:
    """KIP-360: the producer's id and epoch are the current ones (or it is the producer whose id was just
    replaced because its epochs ran out)."""
    if pid == m.producer_id:
        return epoch == m.producer_epoch
    return pid == m.previous_producer_id and m.producer_epoch == 0 and epoch >= MAX_EPOCH - 1


def _exists(view: TxnTopicsView, tp: TopicPartition) -> bool:
    count = view.partition_count(tp[0])
    return count is not None and 0 <= tp[1] < count


def _topic_results(R: Any, topics: list[tuple[str, list[int]]], codes: dict[TopicPartition, int]) -> list[Any]:
    T = R.AddPartitionsToTxnTopicResult
    P = T.AddPartitionsToTxnPartitionResult
    return [T(name=t, results_by_partition=[P(partition_index=p, partition_error_code=codes[TopicPartition(t, p)]) for p in ps])
            for t, ps in topics]
