"""Read committed on our broker (issue 17): Fetch and ListOffsets with isolation_level 1 over transactional
batches and markers appended straight to the broker's partition log (as the transaction coordinator writes
them), read by raw requests and by confluent-kafka's consumer with isolation.level=read_committed."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, TopicPartition

from groupstream.protocol.messages import by_name
from groupstream.protocol.records.batch import BatchBuilder, iter_record_batches
from groupstream.storage.log import PartitionLog
from support import inprocess
from support.raw_client import RawClient
from support.waiting import wait_until

FETCH = by_name("Fetch")
LIST_OFFSETS = by_name("ListOffsets")
A, B = 4000, 5000


class OnLoop(inprocess.OnLoop):
    """Our broker in this process, with appends of data batches and markers on its event loop."""

    def append(self, topic: str, batch: bytes) -> int:
        """A data batch through the produce path's check, waking fetches as a produce does."""

        def go() -> int:
            plog = self.broker.catalog.log(topic, 0)
            info = plog.append_checked(bytearray(batch), int(time.time() * 1000))
            assert not isinstance(info, type(None)) and hasattr(info, "base_offset"), info
            self.broker.purgatory.notify((topic, 0), len(batch))
            return int(info.base_offset)  # type: ignore[union-attr]

        return self.run(go)

    def marker(self, topic: str, pid: int, commit: bool) -> int:
        def go() -> int:
            plog: PartitionLog = self.broker.catalog.log(topic, 0)
            info = plog.append_marker(pid, 0, commit, 1, int(time.time() * 1000))
            self.broker.purgatory.notify((topic, 0), 70)
            return info.base_offset

        return self.run(go)


@contextmanager
def broker_on_loop(data_dir: Path) -> Iterator[OnLoop]:
    with inprocess.broker_on_loop(data_dir) as b:
        yield OnLoop(b.broker, b.loop)


def txn(pid: int, seq: int, values: list[bytes], ts: int | None = None, epoch: int = 0) -> bytes:
    b = BatchBuilder(producer_id=pid, producer_epoch=epoch, base_sequence=seq, transactional=True)
    for v in values:
        b.append(int(time.time() * 1000) if ts is None else ts, None, v)
    return b.build()


def fetch(raw: RawClient, topic: str, offset: int, isolation: int, *, min_bytes: int = 0, wait_ms: int = 0) -> Any:
    R = FETCH.Request
    T_ = R.FetchTopic
    req = R(replica_id=-1, max_wait_ms=wait_ms, min_bytes=min_bytes, max_bytes=1 << 20, isolation_level=isolation,
            session_id=0, session_epoch=-1, topics=[T_(topic=topic, partitions=[T_.FetchPartition(
                partition=0, fetch_offset=offset, log_start_offset=-1, partition_max_bytes=1 << 20)])],
            forgotten_topics_data=[], rack_id="")  # fmt: skip
    raw.send(FETCH, 12, req)
    return raw.receive()[3].responses[0].partitions[0]


def values(records: bytes | None) -> list[bytes]:
    return [r.value or b"" for b in iter_record_batches(records or b"") if not b.is_control for r in b.records()]


def latest(raw: RawClient, topic: str, isolation: int, timestamp: int = -1) -> int:
    R = LIST_OFFSETS.Request
    T_ = R.ListOffsetsTopic
    raw.send(LIST_OFFSETS, 5, R(replica_id=-1, isolation_level=isolation, topics=[T_(name=topic, partitions=[
        T_.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1, timestamp=timestamp)])]))  # fmt: skip
    part = raw.receive()[3].topics[0].partitions[0]
    assert part.error_code == 0, part
    return int(part.offset)


def test_read_committed_fetch_stops_at_the_lso_and_names_aborted_transactions(tmp_path: Path) -> None:
    with broker_on_loop(tmp_path) as b:
        b.run(lambda: b.broker.catalog.create_topic("rc", 1, {}))
        assert b.append("rc", txn(A, 0, [b"a0", b"a1"], ts=1000)) == 0
        assert b.append("rc", txn(B, 0, [b"b0"], ts=2000)) == 2
        assert b.marker("rc", A, commit=False) == 3
        raw = RawClient(b.broker.config.port, "rc-test")
        try:
            committed = fetch(raw, "rc", 0, 1)
            assert committed.error_code == 0
            assert (committed.high_watermark, committed.last_stable_offset) == (4, 2)
            assert values(committed.records) == [b"a0", b"a1"]  # B's open transaction at 2 is not readable
            assert [(t.producer_id, t.first_offset) for t in committed.aborted_transactions] == [(A, 0)]
            uncommitted = fetch(raw, "rc", 0, 0)
            assert values(uncommitted.records) == [b"a0", b"a1", b"b0"]
            assert uncommitted.last_stable_offset == 2 and uncommitted.aborted_transactions is None
            assert (latest(raw, "rc", 1), latest(raw, "rc", 0)) == (2, 4)
            # A search by timestamp finds nothing at or past the LSO under read_committed (Kafka's rule).
            assert (latest(raw, "rc", 1, timestamp=1500), latest(raw, "rc", 0, timestamp=1500)) == (-1, 2)
            assert latest(raw, "rc", 1, timestamp=500) == 0
            # B's commit moves the LSO to the end; A's abort marker (3) is still in a fetch from 2, so A is
            # named (Kafka's rule), and past its marker nothing is.
            assert b.marker("rc", B, commit=True) == 4
            after = fetch(raw, "rc", 2, 1)
            assert after.last_stable_offset == 5 and values(after.records) == [b"b0"]
            assert [(t.producer_id, t.first_offset) for t in after.aborted_transactions] == [(A, 0)]
            assert fetch(raw, "rc", 4, 1).aborted_transactions == []
            assert latest(raw, "rc", 1) == 5
            assert latest(raw, "rc", 1, timestamp=1500) == 2
        finally:
            raw.close()


def test_a_read_committed_long_poll_waits_through_open_transaction_bytes_for_the_marker(tmp_path: Path) -> None:
    with broker_on_loop(tmp_path) as b:
        b.run(lambda: b.broker.catalog.create_topic("poll", 1, {}))
        raw = RawClient(b.broker.config.port, "poll-test")
        try:
            R = FETCH.Request
            T_ = R.FetchTopic
            raw.send(FETCH, 12, R(replica_id=-1, max_wait_ms=20_000, min_bytes=1, max_bytes=1 << 20,
                                  isolation_level=1, session_id=0, session_epoch=-1,
                                  topics=[T_(topic="poll", partitions=[T_.FetchPartition(
                                      partition=0, fetch_offset=0, log_start_offset=-1,
                                      partition_max_bytes=1 << 20)])],
                                  forgotten_topics_data=[], rack_id=""))  # fmt: skip
            wait_until(lambda: len(b.broker.purgatory) == 1, timeout_s=10, what="the fetch is parked")
            began = time.monotonic()
            b.append("poll", txn(A, 0, [b"x"]))  # wakes the fetch, which finds nothing readable and waits on
            wait_until(lambda: b.run(lambda: len(b.broker.purgatory)) == 1, timeout_s=10, what="the fetch parks again")
            b.marker("poll", A, commit=True)
            part = raw.receive()[3].responses[0].partitions[0]
            assert values(part.records) == [b"x"] and part.last_stable_offset == 2
            assert time.monotonic() - began < 15
        finally:
            raw.close()


def test_confluent_kafka_read_committed_skips_aborted_records_and_waits_at_the_lso(tmp_path: Path) -> None:
    with broker_on_loop(tmp_path) as b:
        b.run(lambda: b.broker.catalog.create_topic("ck", 1, {}))
        b.append("ck", txn(A, 0, [b"aborted-1", b"aborted-2"]))
        b.append("ck", txn(B, 0, [b"committed-1"]))
        b.append("ck", txn(A, 2, [b"aborted-3"]))
        b.marker("ck", A, commit=False)
        b.marker("ck", B, commit=True)
        b.append("ck", txn(B, 1, [b"open"]))  # open: read_committed stops before it
        port = b.broker.config.port

        def consume(isolation: str, want: int) -> list[bytes]:
            c = Consumer({"bootstrap.servers": f"127.0.0.1:{port}", "group.id": f"g-{isolation}",
                          "isolation.level": isolation, "enable.auto.commit": False,
                          "fetch.wait.max.ms": 100})  # fmt: skip
            try:
                c.assign([TopicPartition("ck", 0, 0)])
                got: list[bytes] = []

                def more() -> bool:
                    m = c.poll(0.2)
                    if m is not None and m.error() is None:
                        got.append(m.value())
                    return len(got) >= want

                wait_until(more, timeout_s=20, what=f"{want} records under {isolation}")
                # Nothing more is readable: a fetch of the open transaction's record would land within this
                # poll (fetch.wait.max.ms is 100), and it must not.
                extra = c.poll(1.0)
                assert extra is None or extra.error() is not None, extra.value()
                return got
            finally:
                c.close()

        assert consume("read_uncommitted", 5) == [b"aborted-1", b"aborted-2", b"committed-1", b"aborted-3", b"open"]
        assert consume("read_committed", 1) == [b"committed-1"]
        b.marker("ck", B, commit=True)  # the open transaction commits: now it is visible, still once
        assert consume("read_committed", 2) == [b"committed-1", b"open"]


def test_describe_producers_names_the_open_transaction_holding_the_lso_back(tmp_path: Path) -> None:
    api = by_name("DescribeProducers")
    with broker_on_loop(tmp_path) as b:
        b.run(lambda: b.broker.catalog.create_topic("dp", 2, {}))
        b.append("dp", txn(A, 0, [b"a0", b"a1"]))
        b.marker("dp", A, commit=False)
        b.append("dp", txn(B, 0, [b"b0", b"b1", b"b2"], ts=7000))  # open from offset 3
        raw = RawClient(b.broker.config.port, "dp-test")
        try:
            R = api.Request
            raw.send(api, 0, R(topics=[R.TopicRequest(name="dp", partition_indexes=[0, 1, 7]),
                                       R.TopicRequest(name="nope", partition_indexes=[0])]))  # fmt: skip
            topics = raw.receive()[3].topics
            p0, p1, p7 = topics[0].partitions
            assert [(p.partition_index, p.error_code) for p in (p0, p1, p7)] == [(0, 0), (1, 0), (7, 3)]
            got = {(s.producer_id, s.producer_epoch, s.last_sequence, s.coordinator_epoch, s.current_txn_start_offset)
                   for s in p0.active_producers}  # fmt: skip
            assert got == {(A, 0, 1, 1, -1), (B, 0, 2, -1, 3)}
            assert {s.producer_id: s.last_timestamp for s in p0.active_producers}[B] == 7000
            assert p1.active_producers == []
            assert topics[1].partitions[0].error_code == 3  # UNKNOWN_TOPIC_OR_PARTITION
        finally:
            raw.close()


# -- with the transaction coordinator: confluent-kafka's transactional producer and read_committed consumer --


def test_confluent_read_committed_waits_at_an_open_transaction_and_is_woken_by_its_commit(tmp_path: Path) -> None:
    """A read_committed long poll (fetch.wait.max.ms 30 s, so only a wake answers it in time) parked behind an
    open transaction sees its records as soon as the commit marker moves the LSO, and not before."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    from support.brokers import BrokerKind, BrokerProcess

    with BrokerProcess(BrokerKind.GROUPSTREAM, tmp_path / "b") as broker:
        bootstrap = broker.bootstrap
        admin = AdminClient({"bootstrap.servers": bootstrap})
        assert admin.create_topics([NewTopic("wake", 1, 1)])["wake"].result(30) is None
        p = Producer({"bootstrap.servers": bootstrap, "transactional.id": "wake-1", "linger.ms": 0})
        p.init_transactions(30)
        p.begin_transaction()
        p.produce("wake", b"before")
        p.commit_transaction(30)
        p.begin_transaction()
        p.produce("wake", b"open")
        assert p.flush(30) == 0  # written, not committed
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": "wake-reader", "isolation.level": "read_committed",
                      "enable.auto.commit": False, "fetch.wait.max.ms": 30_000})  # fmt: skip
        try:
            c.assign([TopicPartition("wake", 0, 0)])
            got: list[bytes] = []

            def receive(n: int) -> bool:
                m = c.poll(0.1)
                if m is not None and m.error() is None:
                    got.append(m.value())
                return len(got) >= n

            wait_until(lambda: receive(1), timeout_s=30, what="the committed record")
            assert got == [b"before"]
            c.poll(1.0)  # the consumer's next fetch parks at the LSO
            assert got == [b"before"]
            began = time.monotonic()
            p.commit_transaction(30)
            wait_until(lambda: receive(2), timeout_s=60, what="the record of the committed transaction")
            assert got == [b"before", b"open"]
            assert time.monotonic() - began < 10, "the commit marker did not wake the parked read_committed fetch"
        finally:
            c.close()


def test_aiokafka_and_kafka_python_read_committed_skip_aborted_records(tmp_path: Path) -> None:
    """Two more read_committed consumers over transactions of confluent-kafka's producer: each drops the aborted
    transaction's records by the fetch response's aborted_transactions list, and stops before the open one."""
    import asyncio as aio

    from aiokafka import AIOKafkaConsumer
    from aiokafka.structs import TopicPartition as AioTP
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KpTP

    from support.brokers import BrokerKind, BrokerProcess

    with BrokerProcess(BrokerKind.GROUPSTREAM, tmp_path / "b") as broker:
        bootstrap = broker.bootstrap
        admin = AdminClient({"bootstrap.servers": bootstrap})
        assert admin.create_topics([NewTopic("peers", 1, 1)])["peers"].result(30) is None
        p = Producer({"bootstrap.servers": bootstrap, "transactional.id": "peers-1", "linger.ms": 0})
        p.init_transactions(30)
        for value, commit in ((b"c1", True), (b"a1", False), (b"c2", True), (b"a2", False), (b"c3", True)):
            p.begin_transaction()
            p.produce("peers", value)
            p.produce("peers", value + b"-second")
            assert p.flush(30) == 0  # in the log before the abort (an abort drops what is still unsent)
            (p.commit_transaction if commit else p.abort_transaction)(30)
        p.begin_transaction()
        p.produce("peers", b"open")
        assert p.flush(30) == 0
        expected = [b"c1", b"c1-second", b"c2", b"c2-second", b"c3", b"c3-second"]

        async def with_aiokafka() -> list[bytes]:
            c = AIOKafkaConsumer(bootstrap_servers=bootstrap, isolation_level="read_committed",
                                 enable_auto_commit=False, fetch_max_wait_ms=100)  # fmt: skip
            await c.start()
            try:
                tp = AioTP("peers", 0)
                c.assign([tp])
                await c.seek_to_beginning(tp)
                got: list[bytes] = []
                deadline = time.monotonic() + 30
                while len(got) < len(expected) and time.monotonic() < deadline:
                    batch = await c.getmany(tp, timeout_ms=200)
                    got.extend(m.value for m in batch.get(tp, []))
                got.extend(m.value for m in (await c.getmany(tp, timeout_ms=1000)).get(tp, []))  # nothing more
                return got
            finally:
                await c.stop()

        assert aio.run(with_aiokafka()) == expected
        for isolation, want in (("read_committed", expected), ("read_uncommitted", None)):
            kc = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation, enable_auto_commit=False,
                               fetch_max_wait_ms=100, consumer_timeout_ms=1500)  # fmt: skip
            try:
                kc.assign([KpTP("peers", 0)])
                kc.seek_to_beginning()
                got = [m.value for m in kc]  # the iterator ends after 1.5 s without a record
            finally:
                kc.close()
            if want is not None:
                assert got == want
            else:  # the aborted records are in the log: only the isolation level hides them
                assert got == [b"c1", b"c1-second", b"a1", b"a1-second", b"c2", b"c2-second", b"a2", b"a2-second",
                               b"c3", b"c3-second", b"open"]  # fmt: skip
        p.abort_transaction(30)


def test_write_txn_markers_ends_a_transaction_and_refuses_stale_epochs(tmp_path: Path) -> None:
    api = by_name("WriteTxnMarkers")
    R = api.Request
    M = R.WritableTxnMarker

    def marker(pid: int, epoch: int, commit: bool, coordinator_epoch: int, partitions: list[int]) -> Any:
        return M(producer_id=pid, producer_epoch=epoch, transaction_result=commit, coordinator_epoch=coordinator_epoch,
                 topics=[M.WritableTxnMarkerTopic(name="wm", partition_indexes=partitions)])  # fmt: skip

    with broker_on_loop(tmp_path) as b:
        b.run(lambda: b.broker.catalog.create_topic("wm", 1, {}))
        b.append("wm", txn(A, 0, [b"hanging"]))
        raw = RawClient(b.broker.config.port, "wm-test")
        try:
            for version in (1, 2):
                raw.send(api, version, R(markers=[marker(B, 0, False, 0, [0, 5])]))  # B has nothing open: no-op
                (result,) = raw.receive()[3].markers
                assert [(p.partition_index, p.error_code) for p in result.topics[0].partitions] == [(0, 0), (5, 3)]
            raw.send(api, 2, R(markers=[marker(A, 0, False, 3, [0])]))  # abort A's hanging transaction
            assert raw.receive()[3].markers[0].topics[0].partitions[0].error_code == 0
            committed = fetch(raw, "wm", 0, 1)
            assert committed.last_stable_offset == committed.high_watermark == 4
            assert values(committed.records) == [b"hanging"]  # read by its aborted-transaction entry, not skipped here
            assert [(t.producer_id, t.first_offset) for t in committed.aborted_transactions] == [(A, 0)]
            raw.send(api, 2, R(markers=[marker(A, 0, True, 2, [0])]))  # an older coordinator epoch
            assert raw.receive()[3].markers[0].topics[0].partitions[0].error_code == 52  # COORDINATOR_FENCED
            b.append("wm", txn(A, 0, [b"next"], epoch=1))  # A's next epoch opens a transaction
            raw.send(api, 2, R(markers=[marker(A, 0, True, 3, [0])]))  # a marker of the fenced epoch
            assert raw.receive()[3].markers[0].topics[0].partitions[0].error_code == 47  # INVALID_PRODUCER_EPOCH
            assert fetch(raw, "wm", 0, 1).last_stable_offset == 4  # still open at 4
        finally:
            raw.close()
