"""The transaction coordinator shard, pure and on a manual clock: the driver plays the runtime (records are
replayed when a result is applied, timers are data), so every step and every answer is checked directly.

Covered: InitProducerId (new id, epoch bump, KIP-360 resume, zombie ids, epoch exhaustion, timeouts), the
transaction's life (AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, markers, Complete*), fencing of an ongoing
transaction by a new producer, abort at the timeout, the errors of each request in each state,
DescribeTransactions and ListTransactions filters, reloading (replay gives the same state, Prepare* finishes,
Ongoing gets its timer back)."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from groupstream.coordinator.request import ShardRequest
from groupstream.coordinator.result import apply_timer_ops
from groupstream.protocol.error_codes import ErrorCode as E
from groupstream.protocol.messages import APIS
from groupstream.transaction.records import TxnRecord, decode_record, encode_record
from groupstream.transaction.shard import MAX_EPOCH, MarkerJob, TransactionCoordinatorConfig, TransactionShard
from groupstream.transaction.state import TxnState

OFFSETS_PARTITIONS = 50


class View:
    topics = {"t": 3, "u": 1}

    def partition_count(self, topic: str) -> int | None:
        return self.topics.get(topic)

    def offsets_partition(self, group_id: str) -> tuple[str, int]:
        return "__consumer_offsets", len(group_id) % OFFSETS_PARTITIONS


class Driver:
    """The runtime, by hand: a clock, the log of written records, timers and pending marker jobs."""

    def __init__(self, max_timeout_ms: int = 900_000, first_pid: int = 1000) -> None:
        self.now = 1_000_000
        self.ids = itertools.count(first_pid)
        self.shard = TransactionShard(0, TransactionCoordinatorConfig(max_timeout_ms), lambda: next(self.ids))
        self.log: list[bytes | None] = []
        self.encoded: list[tuple[bytes, bytes | None]] = []
        self.timers: dict[str, int] = {}
        self.markers: list[MarkerJob] = []
        self.tokens = itertools.count(1)
        self.view = View()

    def apply(self, result: Any) -> list[Any]:
        for record in result.records:
            self.encoded.append(encode_record(record))  # through the real codec, as the log holds them
            self.shard.replay(record)
        apply_timer_ops(self.timers, result.timers)
        self.markers.extend(result.markers)
        return [body for _, body in result.responses]

    def call(self, api_key: int, version: int, **fields: Any) -> Any:
        body = APIS[api_key].Request(**fields)
        answers = self.apply(self.shard.handle(ShardRequest(api_key, version, body, next(self.tokens)), self.now,
                                               self.view))  # fmt: skip
        assert len(answers) == 1
        return answers[0]

    # the requests, as clients send them
    def init(self, tid: str = "tx", timeout: int = 60_000, version: int = 4, pid: int = -1, epoch: int = -1) -> Any:
        return self.call(22, version, transactional_id=tid, transaction_timeout_ms=timeout, producer_id=pid,
                         producer_epoch=epoch)  # fmt: skip

    def add(self, pid: int, epoch: int, parts: dict[str, list[int]], tid: str = "tx", version: int = 3) -> dict[Any, int]:
        T = APIS[24].Request.AddPartitionsToTxnTopic
        r = self.call(24, version, v3_and_below_transactional_id=tid, v3_and_below_producer_id=pid,
                      v3_and_below_producer_epoch=epoch,
                      v3_and_below_topics=[T(name=t, partitions=ps) for t, ps in parts.items()])  # fmt: skip
        return {(t.name, p.partition_index): p.partition_error_code for t in r.results_by_topic_v3_and_below
                for p in t.results_by_partition}  # fmt: skip

    def add_offsets(self, pid: int, epoch: int, group: str, tid: str = "tx") -> int:
        return int(self.call(25, 3, transactional_id=tid, producer_id=pid, producer_epoch=epoch, group_id=group).error_code)

    def end(self, pid: int, epoch: int, commit: bool, tid: str = "tx", version: int = 3) -> Any:
        return self.call(26, version, transactional_id=tid, producer_id=pid, producer_epoch=epoch, committed=commit)

    def finish_markers(self) -> list[MarkerJob]:
        jobs, self.markers = self.markers, []
        for job in jobs:
            self.apply(self.shard.markers_written(job.transactional_id, job.producer_id, job.producer_epoch, self.now))
        return jobs

    def advance(self, ms: int) -> None:
        """Move the clock, firing due timers in deadline order."""
        self.now += ms
        for key, deadline in sorted(self.timers.items(), key=lambda kv: kv[1]):
            if deadline <= self.now and self.timers.get(key) == deadline:
                del self.timers[key]
                self.apply(self.shard.on_timer(key, self.now, self.view))

    def state(self, tid: str = "tx") -> TxnState:
        m = self.shard.get(tid)
        assert m is not None
        return m.state


def test_a_committed_transaction() -> None:
    d = Driver()
    r = d.init()
    assert (r.error_code, r.producer_id, r.producer_epoch) == (E.NONE, 1000, 0)
    assert d.state() is TxnState.EMPTY
    assert d.add(1000, 0, {"t": [0, 2]}) == {("t", 0): E.NONE, ("t", 2): E.NONE}
    assert d.state() is TxnState.ONGOING
    assert d.timers == {"txn-timeout:tx": d.now + 60_000}
    n = len(d.encoded)
    assert d.add(1000, 0, {"t": [0]}) == {("t", 0): E.NONE}
    assert len(d.encoded) == n  # nothing new: no record
    assert d.add_offsets(1000, 0, "grp") == E.NONE
    r = d.end(1000, 0, True)
    assert r.error_code == E.NONE
    assert d.state() is TxnState.PREPARE_COMMIT
    assert d.timers == {}
    assert d.markers == [MarkerJob("tx", 1000, 0, True, frozenset({("t", 0), ("t", 2), ("__consumer_offsets", 3)}))]
    assert d.end(1000, 0, True).error_code == E.CONCURRENT_TRANSACTIONS  # markers in flight: retry
    assert d.end(1000, 0, False).error_code == E.INVALID_TXN_STATE
    assert d.add(1000, 0, {"t": [1]}) == {("t", 1): E.CONCURRENT_TRANSACTIONS}
    d.finish_markers()
    m = d.shard.get("tx")
    assert m is not None and (m.state, m.partitions) == (TxnState.COMPLETE_COMMIT, frozenset())
    assert d.end(1000, 0, True).error_code == E.NONE  # a retried commit that completed
    assert d.end(1000, 0, False).error_code == E.INVALID_TXN_STATE
    # the next transaction of the same producer
    assert d.add(1000, 0, {"u": [0]}) == {("u", 0): E.NONE}
    assert d.end(1000, 0, False).error_code == E.NONE
    assert d.finish_markers() == [MarkerJob("tx", 1000, 0, False, frozenset({("u", 0)}))]
    assert d.state() is TxnState.COMPLETE_ABORT


def test_init_bumps_the_epoch_and_fences_the_old_producer() -> None:
    d = Driver()
    d.init()
    r = d.init()
    assert (r.error_code, r.producer_id, r.producer_epoch) == (E.NONE, 1000, 1)
    # the old epoch is fenced everywhere; clients of old versions get INVALID_PRODUCER_EPOCH
    assert d.add(1000, 0, {"t": [0]}) == {("t", 0): E.PRODUCER_FENCED}
    assert d.add(1000, 0, {"t": [0]}, version=1) == {("t", 0): E.INVALID_PRODUCER_EPOCH}
    assert d.end(1000, 0, True).error_code == E.PRODUCER_FENCED
    assert d.end(1000, 0, True, version=1).error_code == E.INVALID_PRODUCER_EPOCH
    assert d.add_offsets(1000, 0, "g") == E.PRODUCER_FENCED
    assert d.add(999, 1, {"t": [0]}) == {("t", 0): E.INVALID_PRODUCER_ID_MAPPING}
    assert d.end(1000, 1, True, tid="nobody").error_code == E.INVALID_PRODUCER_ID_MAPPING
    assert d.end(1000, 1, True).error_code == E.INVALID_TXN_STATE  # nothing was added


def test_a_new_producer_aborts_the_ongoing_transaction_first() -> None:
    d = Driver()
    d.init()
    d.add(1000, 0, {"t": [1]})
    r = d.init()
    assert r.error_code == E.CONCURRENT_TRANSACTIONS
    m = d.shard.get("tx")
    assert m is not None and (m.state, m.producer_epoch) == (TxnState.PREPARE_ABORT, 1)
    assert d.markers == [MarkerJob("tx", 1000, 1, False, frozenset({("t", 1)}))]  # under the bumped epoch
    assert d.init().error_code == E.CONCURRENT_TRANSACTIONS  # still aborting
    assert d.end(1000, 0, True).error_code == E.PRODUCER_FENCED  # the zombie cannot commit
    d.finish_markers()
    r = d.init()
    assert (r.error_code, r.producer_id, r.producer_epoch) == (E.NONE, 1000, 2)


def test_kip_360_resume_with_id_and_epoch() -> None:
    d = Driver()
    d.init()
    r = d.init(pid=1000, epoch=0)
    assert (r.error_code, r.producer_epoch) == (E.NONE, 1)
    assert d.init(pid=1000, epoch=0).error_code == E.PRODUCER_FENCED  # no longer current
    assert d.init(pid=1000, epoch=0, version=3).error_code == E.INVALID_PRODUCER_EPOCH
    assert d.init(pid=55, epoch=1).error_code == E.PRODUCER_FENCED


def test_epoch_exhaustion_gives_a_new_producer_id() -> None:
    d = Driver()
    d.init()
    m = d.shard.get("tx")
    assert m is not None
    d.apply(type("R", (), {"records": [TxnRecord("tx", m.transition_to(TxnState.EMPTY, d.now,
                                                                          producer_epoch=MAX_EPOCH - 1))],
                           "timers": [], "markers": [], "responses": []})())  # fmt: skip
    r = d.init()
    assert (r.error_code, r.producer_id, r.producer_epoch) == (E.NONE, 1001, 0)
    m = d.shard.get("tx")
    assert m is not None and m.previous_producer_id == 1000
    assert d.init(pid=1000, epoch=5).error_code == E.PRODUCER_FENCED  # an older epoch of the replaced id


@pytest.mark.parametrize("timeout", [0, -1, 900_001])
def test_timeouts_outside_the_range_are_refused(timeout: int) -> None:
    d = Driver()
    assert d.init(timeout=timeout).error_code == E.INVALID_TRANSACTION_TIMEOUT
    assert d.init(tid="").error_code == E.INVALID_REQUEST
    assert d.shard.transactions() == {}


def test_an_expired_transaction_is_aborted_with_an_epoch_bump() -> None:
    d = Driver()
    d.init(timeout=10_000)
    d.add(1000, 0, {"t": [0]})
    d.advance(9_999)
    assert d.state() is TxnState.ONGOING
    d.advance(1)
    m = d.shard.get("tx")
    assert m is not None and (m.state, m.producer_epoch) == (TxnState.PREPARE_ABORT, 1)
    assert d.markers == [MarkerJob("tx", 1000, 1, False, frozenset({("t", 0)}))]
    assert d.end(1000, 0, True).error_code == E.PRODUCER_FENCED
    d.finish_markers()
    assert d.state() is TxnState.COMPLETE_ABORT


def test_a_stale_timer_after_commit_does_nothing() -> None:
    d = Driver()
    d.init(timeout=10_000)
    d.add(1000, 0, {"t": [0]})
    d.end(1000, 0, True)
    d.finish_markers()
    n = len(d.encoded)
    assert d.shard.on_timer("txn-timeout:tx", d.now + 20_000, d.view).records == []
    assert len(d.encoded) == n


def test_unknown_partitions_and_invalid_states() -> None:
    d = Driver()
    d.init()
    assert d.add(1000, 0, {"t": [0, 3], "nope": [0]}) == {
        ("t", 0): E.OPERATION_NOT_ATTEMPTED, ("t", 3): E.UNKNOWN_TOPIC_OR_PARTITION,
        ("nope", 0): E.UNKNOWN_TOPIC_OR_PARTITION}  # fmt: skip
    assert d.state() is TxnState.EMPTY


def test_batched_verification_form() -> None:
    d = Driver()
    d.init()
    d.add(1000, 0, {"t": [0]})
    Req = APIS[24].Request
    Tx, T = Req.AddPartitionsToTxnTransaction, Req.AddPartitionsToTxnTopic
    r = d.call(24, 5, transactions=[
        Tx(transactional_id="tx", producer_id=1000, producer_epoch=0, verify_only=True,
           topics=[T(name="t", partitions=[0, 1])])])  # fmt: skip
    codes = {p.partition_index: p.partition_error_code for p in r.results_by_transaction[0].topic_results[0].results_by_partition}
    assert codes == {0: E.NONE, 1: E.INVALID_TXN_STATE}
    m = d.shard.get("tx")
    assert m is not None and m.partitions == frozenset({("t", 0)})  # verify_only adds nothing


def test_describe_and_list() -> None:
    d = Driver()
    d.init("a")
    d.init("b")
    d.add(1001, 0, {"t": [2, 0]}, tid="b")
    d.init("c")
    r = d.call(65, 0, transactional_ids=["b", "zz"])
    b, zz = r.transaction_states
    assert (b.error_code, b.transaction_state, b.producer_id, b.producer_epoch, b.transaction_timeout_ms) == (
        0, "Ongoing", 1001, 0, 60_000)
    assert b.transaction_start_time_ms == d.now
    assert [(t.topic, t.partitions) for t in b.topics] == [("t", [0, 2])]
    assert zz.error_code == E.TRANSACTIONAL_ID_NOT_FOUND

    def listed(version: int = 1, **f: Any) -> tuple[int, list[str], list[str]]:
        f.setdefault("state_filters", [])
        f.setdefault("producer_id_filters", [])
        r = d.call(66, version, **f)
        return r.error_code, list(r.unknown_state_filters), [s.transactional_id for s in r.transaction_states]

    assert listed() == (0, [], ["a", "b", "c"])
    assert listed(state_filters=["Ongoing", "Nope"]) == (0, ["Nope"], ["b"])
    assert listed(producer_id_filters=[1000, 1002]) == (0, [], ["a", "c"])
    assert listed(duration_filter=5_000) == (0, [], [])
    d.now += 5_001
    assert listed(duration_filter=5_000) == (0, [], ["b"])
    assert listed(2, transactional_id_pattern="[ab]") == (0, [], ["a", "b"])
    assert listed(2, transactional_id_pattern="(") == (E.INVALID_REGULAR_EXPRESSION, [], [])


def test_replay_rebuilds_the_same_state_and_reload_finishes_what_was_decided() -> None:
    d = Driver()
    d.init("done")
    d.add(1000, 0, {"t": [0]}, tid="done")
    d.end(1000, 0, True, tid="done")
    d.finish_markers()
    d.init("preparing")
    d.add(1001, 0, {"t": [1]}, tid="preparing")
    d.end(1001, 0, False, tid="preparing")  # the broker dies before the markers are written
    d.init("open", timeout=30_000)
    d.add(1002, 0, {"u": [0]}, tid="open")
    started = d.now
    fresh = TransactionShard(0, TransactionCoordinatorConfig(), lambda: 1 / 0)  # type: ignore[arg-type,return-value]
    for key, value in d.encoded:
        fresh.replay(decode_record(key, value))
    assert fresh.transactions() == d.shard.transactions()
    d.now += 1_000
    loaded = fresh.on_loaded(d.now)
    assert loaded.markers == [MarkerJob("preparing", 1001, 0, False, frozenset({("t", 1)}))]
    timers: dict[str, int] = {}
    apply_timer_ops(timers, loaded.timers)
    # the original deadline, not a new one; and the periodic check for idle ids
    assert timers == {"txn-timeout:open": started + 30_000, "txn-expiration": d.now + 3_600_000}
    assert loaded.records == [] and loaded.responses == []


def test_idle_transactional_ids_expire() -> None:
    d = Driver()
    d.shard = TransactionShard(0, TransactionCoordinatorConfig(id_expiration_ms=10_000, expiration_check_interval_ms=1_000),
                               lambda: next(d.ids))  # fmt: skip
    d.apply(d.shard.on_loaded(d.now))
    d.init("idle")
    d.init("busy")
    d.add(1001, 0, {"t": [0]}, tid="busy")
    d.init("done")
    d.add(1002, 0, {"t": [1]}, tid="done")
    d.end(1002, 0, True, tid="done")
    d.finish_markers()
    d.advance(9_000)
    assert sorted(d.shard.transactions()) == ["busy", "done", "idle"]
    d.advance(1_000)  # 10 s idle: "idle" and "done" go; "busy" has an open transaction (its timeout is 60 s)
    assert sorted(d.shard.transactions()) == ["busy"]
    assert [decode_record(k, v) for k, v in d.encoded[-2:]] == [TxnRecord("done", None), TxnRecord("idle", None)]
    assert d.timers["txn-expiration"] == d.now + 1_000  # checked again
    r = d.init("idle")  # a new producer with an expired id starts afresh, with a new producer id
    assert (r.error_code, r.producer_id, r.producer_epoch) == (E.NONE, 1003, 0)


# --- transaction.version 2 (KIP-890 part 2) ------------------------------------------------------------------


def _add_v5(d: Driver, pid: int, epoch: int, parts: dict[str, list[int]], tid: str = "tx") -> dict[Any, int]:
    """What the broker sends for a TV2 client's Produce: the batched form without verify_only."""
    Req = APIS[24].Request
    Tx, T = Req.AddPartitionsToTxnTransaction, Req.AddPartitionsToTxnTopic
    r = d.call(24, 5, transactions=[Tx(transactional_id=tid, producer_id=pid, producer_epoch=epoch, verify_only=False,
                                       topics=[T(name=t, partitions=ps) for t, ps in parts.items()])])  # fmt: skip
    return {(t.name, p.partition_index): p.partition_error_code for t in r.results_by_transaction[0].topic_results
            for p in t.results_by_partition}  # fmt: skip


def test_tv2_every_end_bumps_the_epoch() -> None:
    d = Driver()
    d.init()
    assert _add_v5(d, 1000, 0, {"t": [0, 1]}) == {("t", 0): E.NONE, ("t", 1): E.NONE}
    m = d.shard.get("tx")
    assert m is not None and (m.state, m.client_transaction_version) == (TxnState.ONGOING, 2)
    r = d.end(1000, 0, True, version=5)
    assert (r.error_code, r.producer_id, r.producer_epoch) == (E.NONE, 1000, 1)
    assert d.state() is TxnState.PREPARE_COMMIT
    assert d.markers == [MarkerJob("tx", 1000, 1, True, frozenset({("t", 0), ("t", 1)}))]  # the bumped epoch
    assert decode_record(*d.encoded[-1]).metadata == d.shard.get("tx")  # client_transaction_version 2 round-trips
    assert d.end(1000, 0, True, version=5).error_code == E.CONCURRENT_TRANSACTIONS  # a retry: markers in flight
    assert d.end(1000, 0, False, version=5).error_code == E.INVALID_TXN_STATE
    d.finish_markers()
    r = d.end(1000, 0, True, version=5)  # a retry of the completed commit: answered as the first was
    assert (r.error_code, r.producer_id, r.producer_epoch) == (E.NONE, 1000, 1)
    assert d.end(1000, 0, False, version=5).error_code == E.INVALID_TXN_STATE
    # the next transaction runs at epoch 1; the old epoch is fenced
    assert _add_v5(d, 1000, 0, {"u": [0]}) == {("u", 0): E.PRODUCER_FENCED}
    assert _add_v5(d, 1000, 1, {"u": [0]}) == {("u", 0): E.NONE}
    r = d.end(1000, 1, False, version=5)
    assert (r.error_code, r.producer_epoch) == (E.NONE, 2)
    assert d.finish_markers() == [MarkerJob("tx", 1000, 2, False, frozenset({("u", 0)}))]
    assert d.state() is TxnState.COMPLETE_ABORT


def test_tv2_abort_with_nothing_added_and_commit_refused() -> None:
    d = Driver()
    d.init()
    assert d.end(1000, 0, True, version=5).error_code == E.INVALID_TXN_STATE  # nothing to commit
    r = d.end(1000, 0, False, version=5)  # an abort still bumps: a late write of the old epoch is fenced
    assert (r.error_code, r.producer_epoch) == (E.NONE, 1)
    assert d.finish_markers() == [MarkerJob("tx", 1000, 1, False, frozenset())]
    assert d.state() is TxnState.COMPLETE_ABORT


def test_tv2_epoch_exhaustion_moves_to_a_new_producer_id_at_the_end() -> None:
    d = Driver()
    d.init()
    m = d.shard.get("tx")
    assert m is not None
    last = MAX_EPOCH - 1  # the bump reaches MAX_EPOCH: the last end of this id
    d.apply(type("R", (), {"records": [TxnRecord("tx", m.transition_to(TxnState.EMPTY, d.now, producer_epoch=last))],
                           "timers": [], "markers": [], "responses": []})())  # fmt: skip
    _add_v5(d, 1000, last, {"t": [0]})
    r = d.end(1000, last, True, version=5)
    assert (r.error_code, r.producer_id, r.producer_epoch) == (E.NONE, 1001, 0)
    assert d.finish_markers() == [MarkerJob("tx", 1000, last + 1, True, frozenset({("t", 0)}))]
    m = d.shard.get("tx")
    assert m is not None and (m.producer_id, m.producer_epoch, m.previous_producer_id) == (1001, 0, 1000)
    r = d.end(1000, last, True, version=5)  # the retry from the replaced id
    assert (r.error_code, r.producer_id, r.producer_epoch) == (E.NONE, 1001, 0)
    assert _add_v5(d, 1001, 0, {"t": [0]}) == {("t", 0): E.NONE}


def test_tv1_ends_keep_the_epoch_on_a_tv2_broker_and_v5_on_a_tv1_broker() -> None:
    d = Driver()  # transaction.version 2 finalized: EndTxn v4 is still version 1
    d.init()
    d.add(1000, 0, {"t": [0]})
    assert d.end(1000, 0, True, version=4).error_code == E.NONE
    assert d.finish_markers() == [MarkerJob("tx", 1000, 0, True, frozenset({("t", 0)}))]
    d1 = Driver()
    d1.shard.config = TransactionCoordinatorConfig(transaction_version=1)
    d1.init()
    d1.add(1000, 0, {"t": [0]})
    r = d1.end(1000, 0, True, version=5)
    assert (r.error_code, r.producer_id, r.producer_epoch) == (E.NONE, 1000, 0)
    assert d1.finish_markers() == [MarkerJob("tx", 1000, 0, True, frozenset({("t", 0)}))]


def test_tv2_timeout_aborts_with_an_epoch_bump() -> None:
    d = Driver()
    d.init(timeout=10_000)
    _add_v5(d, 1000, 0, {"t": [0]})
    d.advance(10_001)
    assert d.markers == [MarkerJob("tx", 1000, 1, False, frozenset({("t", 0)}))]
    d.finish_markers()
    assert d.end(1000, 0, True, version=5).error_code == E.INVALID_TXN_STATE  # its commit cannot happen
    r = d.end(1000, 0, False, version=5)  # its abort is what happened: answered with the epoch to go on with
    assert (r.error_code, r.producer_epoch) == (E.NONE, 1)
    assert _add_v5(d, 1000, 0, {"t": [0]}) == {("t", 0): E.PRODUCER_FENCED}  # no write of the old epoch
