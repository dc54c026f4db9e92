"""The transaction manager without a broker (seed 002: managers return requests; the test answers them), on a
manual clock: the order of its requests, the partitions it registers before their batches may go, EndTxn only
once every batch is settled, CONCURRENT_TRANSACTIONS retried after 5 ms, and a fenced EndTxn ending the producer
for good."""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

import pytest

from groupstream.client.net.metadata import MetadataCache
from groupstream.client.net.requests import ClientResponse, UnsentRequest
from groupstream.client.producer.errors import TransactionFatalError, TransactionStateError
from groupstream.client.producer.idempotence import IdempotenceManager
from groupstream.client.producer.transactions import TransactionManager, TxnState
from groupstream.protocol.error_codes import ErrorCode


class Harness:
    """A manager wired to plain values standing in for the accumulator and sender."""

    def __init__(self, transaction_version: int = 0) -> None:
        self.queued: list[tuple[str, int]] = []
        self.settled = True
        self.refusal: BaseException | None = None
        self.idem = IdempotenceManager(retry_backoff_ms=100, retry_backoff_max_ms=1000, in_flight_batches=lambda: 0)
        self.idem.transactional = True
        self.txn = TransactionManager(
            "tx", 60_000, self.idem, MetadataCache(), retry_backoff_ms=100, retry_backoff_max_ms=1000,
            queued_partitions=lambda: self.queued, settled=lambda: self.settled, abort_queued=lambda e: None,
            refuse=self._refuse, admit=self._admit, begin_flush=lambda: None, end_flush=lambda: None,
            feature_level=lambda node, name: transaction_version if name == "transaction.version" else 0,
        )  # fmt: skip
        self.now = 1_000

    def _refuse(self, e: BaseException) -> None:
        self.refusal = e

    def _admit(self) -> None:
        self.refusal = None

    def call(self, kind: str) -> Future[None]:
        f: Future[None] = Future()
        self.txn.start(kind, f)
        return f

    def request(self) -> UnsentRequest:
        result = self.txn.poll(self.now)
        assert len(result.unsent_requests) == 1, result
        return result.unsent_requests[0]

    def answer(self, req: UnsentRequest, version: int, **fields: Any) -> None:
        body = req.api.Response(**fields)
        req.handler(ClientResponse(req, 1, version, body, None, self.now))

    def find(self) -> None:
        req = self.request()
        assert req.api.name == "FindCoordinator" and req.body_for(4).key_type == 1
        C = req.api.Response.Coordinator
        self.answer(req, 4, coordinators=[C(key="tx", node_id=1, host="127.0.0.1", port=9092, error_code=0)])

    def init(self) -> None:
        f = self.call("init")
        self.find()
        req = self.request()
        assert req.api.name == "InitProducerId" and req.body_for(4).transactional_id == "tx"
        self.answer(req, 4, error_code=0, producer_id=7, producer_epoch=2)
        assert f.done() and f.result() is None and self.txn.state is TxnState.READY
        assert (self.idem.producer_id, self.idem.producer_epoch) == (7, 2)


def add_partitions_answer(h: Harness, req: UnsentRequest, code: int = 0) -> None:
    R = req.api.Response
    T, P = R.AddPartitionsToTxnTopicResult, R.AddPartitionsToTxnTopicResult.AddPartitionsToTxnPartitionResult
    body = req.body_for(3)
    topics = [T(name=t.name, results_by_partition=[P(partition_index=p, partition_error_code=code) for p in t.partitions])
              for t in body.v3_and_below_topics]  # fmt: skip
    h.answer(req, 3, results_by_topic_v3_and_below=topics)


def test_a_transaction_registers_its_partitions_then_commits_once_everything_is_settled() -> None:
    h = Harness()
    assert isinstance(h.refusal, TransactionStateError)  # produce() refused before begin_transaction
    h.init()
    h.call("begin").result()
    assert h.refusal is None and h.txn.state is TxnState.IN_TRANSACTION
    h.queued = [("a", 0), ("a", 1), ("b", 0)]
    assert not h.txn.may_send(("a", 0))
    req = h.request()
    body = req.body_for(3)
    assert req.api.name == "AddPartitionsToTxn" and (body.v3_and_below_producer_id, body.v3_and_below_producer_epoch) == (7, 2)
    assert sorted((t.name, p) for t in body.v3_and_below_topics for p in t.partitions) == sorted(h.queued)  # one request
    assert h.txn.poll(h.now).unsent_requests == ()  # one request at a time
    add_partitions_answer(h, req)
    assert all(h.txn.may_send(tp) for tp in h.queued) and not h.txn.may_send(("c", 0))
    h.settled = False  # batches in flight
    commit = h.call("commit")
    assert isinstance(h.refusal, TransactionStateError) and h.txn.poll(h.now).unsent_requests == ()
    h.settled = True
    req = h.request()
    assert req.api.name == "EndTxn" and req.body_for(3).committed is True and req.max_version == 4
    assert not commit.done()
    h.answer(req, 3, error_code=0)
    assert commit.result() is None and h.txn.state is TxnState.READY and h.txn.transactions == 1
    assert isinstance(h.refusal, TransactionStateError)  # until the next begin_transaction


def test_concurrent_transactions_is_retried_after_5_ms() -> None:
    h = Harness()
    h.init()
    h.call("begin").result()
    h.queued = [("a", 0)]
    add_partitions_answer(h, h.request(), ErrorCode.CONCURRENT_TRANSACTIONS)
    assert not h.txn.may_send(("a", 0))
    h.now += 4
    assert h.txn.poll(h.now).next_poll_delay_ms == 1
    h.now += 1
    add_partitions_answer(h, h.request())
    assert h.txn.may_send(("a", 0))


def test_a_fenced_end_txn_is_fatal_for_good() -> None:
    h = Harness()
    h.init()
    h.call("begin").result()
    h.queued = [("a", 0)]
    add_partitions_answer(h, h.request())
    commit = h.call("commit")
    h.answer(h.request(), 3, error_code=ErrorCode.PRODUCER_FENCED)
    with pytest.raises(TransactionFatalError, match="PRODUCER_FENCED") as info:
        commit.result()
    assert info.value.fatal and h.txn.state is TxnState.FATAL_ERROR
    assert h.idem.fatal_error is info.value and h.refusal is info.value  # the sender fails every batch with it
    later = h.call("begin")
    with pytest.raises(TransactionFatalError):
        later.result()


def test_calls_in_the_wrong_state_are_refused_with_what_to_do() -> None:
    h = Harness()
    with pytest.raises(TransactionStateError, match="call init_transactions"):
        h.call("begin")
    h.init()
    with pytest.raises(TransactionStateError, match="no transaction is open"):
        h.call("commit")


def test_transaction_version_2_adds_partitions_and_groups_implicitly_and_bumps_the_epoch_per_transaction() -> None:
    h = Harness(transaction_version=2)
    h.init()
    assert h.txn.transaction_version == 2
    h.call("begin").result()
    h.queued = [("a", 0)]
    assert h.txn.may_send(("a", 0))  # Produce v12 adds it: no AddPartitionsToTxn
    assert h.txn.poll(h.now).unsent_requests == ()
    offsets = Future()
    from groupstream.client.consumer.membership_api import GroupMetadata
    from groupstream.client.producer.txn_calls import TxnOffsets

    h.txn.start("offsets", offsets, TxnOffsets({("in", 0): (5, -1, None)}, GroupMetadata("g", 3, "m"), offsets))
    req = h.request()
    assert req.api.name == "FindCoordinator" and req.body_for(4).key_type == 0  # no AddOffsetsToTxn
    C = req.api.Response.Coordinator
    h.answer(req, 4, coordinators=[C(key="g", node_id=1, host="127.0.0.1", port=9092, error_code=0)])
    req = h.request()
    body = req.body_for(5)
    assert req.api.name == "TxnOffsetCommit" and (body.generation_id, body.member_id) == (3, "m")
    T = req.api.Response.TxnOffsetCommitResponseTopic
    h.answer(req, 5, topics=[T(name="in", partitions=[T.TxnOffsetCommitResponsePartition(partition_index=0, error_code=0)])])
    assert offsets.result() is None
    commit = h.call("commit")
    req = h.request()
    assert req.api.name == "EndTxn" and req.max_version == 5
    h.answer(req, 5, error_code=0, producer_id=7, producer_epoch=3)
    assert commit.result() is None and (h.idem.producer_id, h.idem.producer_epoch) == (7, 3)
