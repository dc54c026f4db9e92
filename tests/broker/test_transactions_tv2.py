"""transaction.version 2 (KIP-890 part 2) on our broker (issue 17): ApiVersions v3 advertises the feature and
its finalized level (the broker property ``transaction.version``, 2 by default), our client then ends every
transaction with EndTxn v5 (the epoch bumps per transaction, seen in DescribeTransactions), adds partitions
and the group's offsets partition through Produce v12 / TxnOffsetCommit v5 (no AddPartitionsToTxn /
AddOffsetsToTxn), and a late write of an ended transaction's epoch is refused; a broker started with
``transaction.version=1`` keeps version 1 for the same client (the epoch stays, the read_committed and zombie
scenarios pass); confluent-kafka keeps working on the TV2 broker."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from groupstream import Producer
from groupstream.protocol.messages import by_name
from support.brokers import BrokerKind, BrokerProcess
from support.cluster_topics import unique
from support.raw_client import RawClient
from support.waiting import wait_until

_TXN = Path(__file__).resolve().parents[1] / "client" / "transactions"
if str(_TXN) not in sys.path:
    sys.path.insert(0, str(_TXN))
from txn_scenarios import (  # noqa: E402
    aborted_records_are_invisible_to_read_committed,
    confluent_values,
    make_topic,
    zombie_is_fenced,
)

pytestmark = [pytest.mark.broker_ours]

API_VERSIONS = by_name("ApiVersions")
DESCRIBE = by_name("DescribeTransactions")


@pytest.fixture(scope="module")
def tv1(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with BrokerProcess(BrokerKind.GROUPSTREAM, tmp_path_factory.mktemp("tv1"),
                       settings={"transaction.version": "1"}) as b:  # fmt: skip
        yield b


def raw(b: BrokerProcess, api: Any, version: int, **fields: Any) -> Any:
    client = RawClient(b.port, "tv2-test")
    try:
        corr = client.send(api, version, api.Request(**fields))
        got = client.receive()
        assert got[0] == corr
        return got[3]
    finally:
        client.close()


def features(b: BrokerProcess) -> tuple[dict[str, tuple[int, int]], dict[str, int], int]:
    r = raw(b, API_VERSIONS, 3, client_software_name="t", client_software_version="1")
    supported = {f.name: (f.min_version, f.max_version) for f in r.supported_features}
    finalized = {f.name: f.max_version_level for f in r.finalized_features}
    return supported, finalized, r.finalized_features_epoch


def epoch_of(b: BrokerProcess, tid: str) -> tuple[str, int, int]:
    """The id's state once its markers are written (an ended transaction is answered at Prepare*)."""
    seen: list[Any] = []

    def settled() -> bool:
        seen[:] = [raw(b, DESCRIBE, 0, transactional_ids=[tid]).transaction_states[0]]
        return not seen[0].transaction_state.startswith("Prepare")

    wait_until(settled, 30, f"the markers of {tid!r}")
    return seen[0].transaction_state, seen[0].producer_id, seen[0].producer_epoch


def test_api_versions_advertises_transaction_version(groupstream_broker: BrokerProcess, tv1: BrokerProcess) -> None:
    assert features(groupstream_broker) == ({"transaction.version": (0, 2)}, {"transaction.version": 2}, 1)
    assert features(tv1) == ({"transaction.version": (0, 2)}, {"transaction.version": 1}, 1)


def _three_transactions(b: BrokerProcess, topic: str, tid: str) -> list[tuple[str, int, int]]:
    """Our producer: a commit with offsets, an abort, a commit; the state after each (and after init)."""
    make_topic(b.bootstrap, topic, 2)
    p = Producer({"bootstrap.servers": b.bootstrap, "transactional.id": tid})
    seen = []
    try:
        p.init_transactions(60)
        seen.append(epoch_of(b, tid))
        for n, commit in enumerate((True, False, True)):
            p.begin_transaction()
            for i in range(10):
                p.produce(topic, b"%d-%d" % (n, i), partition=i % 2)
            assert p.flush(30) == 0  # on the broker: the partitions joined (through Produce under TV2)
            if n == 0:
                p.send_offsets_to_transaction({(topic, 0): 5}, unique("grp"), 30)
            if commit:
                p.commit_transaction(30)
            else:
                p.abort_transaction(30)
            seen.append(epoch_of(b, tid))
    finally:
        p.close()
    got = sorted(confluent_values(b.bootstrap, topic, "read_committed", 20, partitions=2))
    assert got == sorted(b"%d-%d" % (n, i) for n in (0, 2) for i in range(10))
    return seen


def test_our_client_bumps_the_epoch_per_transaction_on_tv2(groupstream_broker: BrokerProcess) -> None:
    seen = _three_transactions(groupstream_broker, unique("tv2"), tid := unique("tid"))
    pid = seen[0][1]
    assert seen == [("Empty", pid, 0), ("CompleteCommit", pid, 1), ("CompleteAbort", pid, 2),
                    ("CompleteCommit", pid, 3)], tid  # fmt: skip


def test_our_client_keeps_the_epoch_on_tv1(tv1: BrokerProcess) -> None:
    seen = _three_transactions(tv1, unique("tv1"), unique("tid"))
    pid = seen[0][1]
    assert seen == [("Empty", pid, 0), ("CompleteCommit", pid, 0), ("CompleteAbort", pid, 0), ("CompleteCommit", pid, 0)]


def test_tv1_scenarios(tv1: BrokerProcess) -> None:
    aborted_records_are_invisible_to_read_committed(tv1.bootstrap, unique("tv1-vis"), unique("tid"))
    zombie_is_fenced(tv1.bootstrap, unique("tv1-zombie"), unique("tid"))


def test_pipelined_batches_of_a_new_transaction_keep_their_order(groupstream_broker: BrokerProcess) -> None:
    """A TV2 transaction's first batches arrive pipelined on one connection while the first waits for its
    partition to be added: the later ones must not be appended before it (OUT_OF_ORDER_SEQUENCE_NUMBER, seen
    with 10,000-record transactions before the broker kept a producer's appends in order)."""
    b = groupstream_broker
    topic, tid = unique("tv2-pipe"), unique("tid")
    make_topic(b.bootstrap, topic, 3)
    p = Producer({"bootstrap.servers": b.bootstrap, "transactional.id": tid, "batch.size": 4096, "linger.ms": 0})
    try:
        p.init_transactions(60)
        for n in range(3):
            p.begin_transaction()
            for i in range(3000):
                p.produce(topic, b"%d-%05d" % (n, i) + b"x" * 100, partition=i % 3)
            p.commit_transaction(60)
    finally:
        p.close()
    assert epoch_of(b, tid)[0::2] == ("CompleteCommit", 3)
    assert len(confluent_values(b.bootstrap, topic, "read_committed", 9000, partitions=3)) == 9000
