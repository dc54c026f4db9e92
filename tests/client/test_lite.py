"""The lite produce/fetch helpers against a real ``groupstream broker`` process."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator

import pytest

from groupstream.client.admin import Admin, NewTopic
from groupstream.client.errors import KafkaError
from groupstream.client.lite import ConsumedRecord, ProducerRecord, fetch_partitions, fetch_range, produce
from groupstream.client.net.blocking import BlockingConnection
from groupstream.protocol.error_codes import ErrorCode
from groupstream.protocol.partitioner import default_partition
from support.brokers import BrokerProcess
from support.waiting import wait_until

pytestmark = pytest.mark.broker_ours


@pytest.fixture
def admin(groupstream_broker: BrokerProcess) -> Iterator[Admin]:
    with Admin({"bootstrap.servers": groupstream_broker.bootstrap}) as a:
        yield a


def _topic(admin: Admin, partitions: int) -> str:
    name = f"lite-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(name, partitions)])
    return name


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_round_trip_with_each_codec(admin: Admin, codec: str) -> None:
    name = _topic(admin, 1)
    records = [
        ProducerRecord(b"value-%d " % i * (i % 7), key=None if i % 5 == 0 else b"k%d" % i, timestamp_ms=1_000 + i,
                       headers=(("h", b"%d" % i), ("null", None)))
        for i in range(3000)
    ]
    result = produce(admin.connection, name, records, compression=codec)
    assert result.records == 3000
    assert (result.partitions[0].first_offset, result.partitions[0].last_offset) == (0, 2999)
    got = list(fetch_range(admin.connection, name, 0, 0))
    assert [(r.offset, r.key, r.value, r.timestamp, r.headers) for r in got] == [
        (i, r.key, r.value, r.timestamp_ms, r.headers) for i, r in enumerate(records)
    ]


def test_keyed_records_go_where_the_java_client_puts_them(admin: Admin) -> None:
    name = _topic(admin, 4)
    keys = [b"user-%d" % i for i in range(200)]
    produce(admin.connection, name, [(k, b"v") for k in keys])
    got = list(fetch_partitions(admin.connection, name, dict.fromkeys(range(4), 0)))
    assert len(got) == 200
    assert all(r.partition == default_partition(r.key or b"", 4) for r in got)
    assert len({r.partition for r in got}) == 4


def test_unkeyed_records_stick_to_a_partition_until_its_batch_is_full(admin: Admin) -> None:
    name = _topic(admin, 3)
    result = produce(admin.connection, name, [b"x" * 100] * 600, batch_size=1000)
    counts = [result.partitions[p].records for p in sorted(result.partitions)]
    assert sum(counts) == 600
    assert len(counts) == 3 and min(counts) > 0  # batches rotate over every partition
    got = list(fetch_partitions(admin.connection, name, dict.fromkeys(range(3), 0)))
    assert sorted(r.partition for r in got) == sorted(p for p, n in enumerate(counts) for _ in range(n))


def test_explicit_partition_and_bad_partition(admin: Admin) -> None:
    name = _topic(admin, 2)
    result = produce(admin.connection, name, [b"a", b"b"], partition=1)
    assert list(result.partitions) == [1]
    with pytest.raises(KafkaError, match="has 2 partitions; there is no partition 5"):
        produce(admin.connection, name, [b"a"], partition=5)


def test_unknown_topic_is_not_auto_created(admin: Admin) -> None:
    name = f"nosuch-{uuid.uuid4().hex[:8]}"
    with pytest.raises(KafkaError) as info:
        produce(admin.connection, name, [b"a"])
    assert info.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert name not in admin.list_topics()


def test_acks_zero_gets_no_offsets_but_lands(admin: Admin) -> None:
    name = _topic(admin, 1)
    result = produce(admin.connection, name, [b"a", b"b", b"c"], acks=0)
    assert result.partitions[0].first_offset == -1
    # the next request on the same connection is answered after the acks=0 produce was handled
    assert admin.list_offsets({(name, 0): "latest"})[(name, 0)].offset == 3


def test_fetch_from_the_middle_of_a_batch_and_max_records(admin: Admin) -> None:
    name = _topic(admin, 1)
    produce(admin.connection, name, [b"%d" % i for i in range(100)])  # one batch
    got = list(fetch_range(admin.connection, name, 0, 37, max_records=10))
    assert [r.offset for r in got] == list(range(37, 47))
    assert [r.value for r in got] == [b"%d" % i for i in range(37, 47)]
    assert list(fetch_range(admin.connection, name, 0, 100)) == []


def test_fetch_beyond_the_end_is_offset_out_of_range(admin: Admin) -> None:
    name = _topic(admin, 1)
    produce(admin.connection, name, [b"a"])
    with pytest.raises(KafkaError) as info:
        list(fetch_range(admin.connection, name, 0, 50))
    assert info.value.code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert "offset 50" in str(info.value)


def test_follow_mode_waits_for_new_records(admin: Admin, groupstream_broker: BrokerProcess) -> None:
    name = _topic(admin, 1)
    produce(admin.connection, name, [b"old"])
    got: list[ConsumedRecord] = []
    errors: list[BaseException] = []

    def follow() -> None:
        try:
            with BlockingConnection(groupstream_broker.host, groupstream_broker.port) as conn:
                for rec in fetch_range(conn, name, 0, 0, max_records=2, stop_at_end=False, max_wait_ms=200):
                    got.append(rec)
        except BaseException as e:  # reported to the test thread
            errors.append(e)

    thread = threading.Thread(target=follow)
    thread.start()
    wait_until(lambda: len(got) == 1 or bool(errors) or not thread.is_alive(), 30.0, "the follower to read 'old'")
    assert thread.is_alive() and not errors  # past the end it keeps polling instead of stopping
    produce(admin.connection, name, [b"new"])
    thread.join(30)
    assert not thread.is_alive() and not errors
    assert [r.value for r in got] == [b"old", b"new"]


