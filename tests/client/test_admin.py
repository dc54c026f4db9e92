"""The Admin against a real ``groupstream broker`` process: topics, partitions, configs, offsets and errors."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator

import pytest

from groupstream.client.admin import Admin, NewTopic, parse_offset_spec
from groupstream.client.errors import ClientConfigError, KafkaConnectionError, KafkaError
from groupstream.protocol.error_codes import ErrorCode
from support.brokers import BrokerProcess, free_port
from support.records import Out, produce_records

pytestmark = pytest.mark.broker_ours


@pytest.fixture
def admin(groupstream_broker: BrokerProcess) -> Iterator[Admin]:
    with Admin({"bootstrap.servers": groupstream_broker.bootstrap}) as a:
        yield a


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def test_topic_lifecycle(admin: Admin) -> None:
    name = _name("life")
    created = admin.create_topics([NewTopic(name, 3, config={"retention.ms": "60000"})])
    assert created[name].num_partitions == 3
    assert name in admin.list_topics()

    desc = admin.describe_topics([name])[name]
    assert [p.partition for p in desc.partitions] == [0, 1, 2]
    assert all(p.leader >= 0 and p.replicas == (p.leader,) for p in desc.partitions)
    assert desc.topic_id is not None and desc.topic_id == created[name].topic_id

    configs = admin.describe_configs(name)
    assert configs["retention.ms"].value == "60000"
    assert configs["retention.ms"].source == "DYNAMIC_TOPIC_CONFIG"
    assert not configs["retention.ms"].is_default
    assert any(c.is_default and c.source == "DEFAULT_CONFIG" for c in configs.values())

    admin.create_partitions(name, 5)
    assert admin.describe_topics([name])[name].partition_count == 5

    admin.delete_topics([name])
    assert name not in admin.list_topics()
    with pytest.raises(KafkaError) as info:
        admin.describe_topics([name])
    assert info.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_validate_only_creates_nothing(admin: Admin) -> None:
    name = _name("dry")
    assert admin.create_topics([NewTopic(name, 2)], validate_only=True)[name].num_partitions == 2
    assert name not in admin.list_topics()


def test_create_twice_is_topic_already_exists(admin: Admin) -> None:
    name = _name("twice")
    admin.create_topics([name])
    with pytest.raises(KafkaError) as info:
        admin.create_topics([name])
    assert info.value.code == ErrorCode.TOPIC_ALREADY_EXISTS
    assert info.value.resource == name
    assert "TOPIC_ALREADY_EXISTS" in str(info.value)


def test_invalid_config_and_partitions_are_refused_by_name(admin: Admin) -> None:
    with pytest.raises(KafkaError) as info:
        admin.create_topics([NewTopic(_name("badcfg"), 1, config={"retention.ms": "soon"})])
    assert info.value.code == ErrorCode.INVALID_CONFIG
    with pytest.raises(KafkaError) as info:
        admin.create_topics([NewTopic("bad/name", 1)])
    assert info.value.code == ErrorCode.INVALID_TOPIC_EXCEPTION

    name = _name("shrink")
    admin.create_topics([NewTopic(name, 3)])
    with pytest.raises(KafkaError) as info:
        admin.create_partitions(name, 2)
    assert info.value.code == ErrorCode.INVALID_PARTITIONS
    with pytest.raises(KafkaError) as info:
        admin.create_partitions(_name("absent"), 2)
    assert info.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_unknown_topics_are_errors_not_auto_created(admin: Admin) -> None:
    name = _name("ghost")
    with pytest.raises(KafkaError, match=f"topic '{name}' does not exist"):
        admin.describe_topics([name])
    with pytest.raises(KafkaError) as info:
        admin.describe_configs(name)
    assert info.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    with pytest.raises(KafkaError) as info:
        admin.delete_topics([name])
    assert info.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert name not in admin.list_topics()


def test_list_offsets_earliest_latest_and_by_timestamp(admin: Admin) -> None:
    name = _name("offsets")
    admin.create_topics([NewTopic(name, 2)])
    base = 1_700_000_000_000
    records = [Out(b"v%d" % i, timestamp_ms=base + 10 * i, partition=0) for i in range(20)]
    # one record a batch, so the time index has entries
    produce_records(admin.connection.address, name, records, config={"batch.size": 64, "batch.max.size": 64})

    tp0, tp1 = (name, 0), (name, 1)
    earliest = admin.list_offsets({tp0: "earliest", tp1: "earliest"})
    latest = admin.list_offsets({tp0: "latest", tp1: "latest"})
    assert (earliest[tp0].offset, latest[tp0].offset) == (0, 20)
    assert (earliest[tp1].offset, latest[tp1].offset) == (0, 0)

    at = admin.list_offsets({tp0: base + 55})[tp0]  # first record at or after the timestamp: offset 6
    assert (at.offset, at.timestamp) == (6, base + 60)
    assert admin.list_offsets({tp0: base + 10_000})[tp0].offset == -1
    newest = admin.list_offsets({tp0: "max-timestamp"})[tp0]
    assert (newest.offset, newest.timestamp) == (19, base + 190)

    with pytest.raises(KafkaError) as info:
        admin.list_offsets({(name, 7): "latest"})
    assert info.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_offset_specs() -> None:
    assert [parse_offset_spec(s) for s in ("earliest", "LATEST", "max_timestamp", "123", 0)] == [-2, -1, -3, 123, 0]
    for bad in ("soon", -7, "1.5"):
        with pytest.raises(ValueError):
            parse_offset_spec(bad)


def test_config_errors_name_the_property() -> None:
    with pytest.raises(ClientConfigError, match=re.escape("bootstrap.servers is required")):
        Admin({})
    with pytest.raises(ClientConfigError, match=re.escape("unknown admin property 'bootstrap.server'; did you mean "
                                                          "bootstrap.servers?")):  # fmt: skip
        Admin({"bootstrap.server": "127.0.0.1:9092"})
    with pytest.raises(ClientConfigError, match=re.escape("request.timeout.ms must be an integer")):
        Admin({"bootstrap.servers": "127.0.0.1:9092", "request.timeout.ms": "soon"})
    with pytest.raises(ClientConfigError, match=re.escape("bootstrap.servers: bootstrap server 'nohost' is not HOST:PORT")):
        Admin(bootstrap_servers="nohost")


def test_unreachable_bootstrap_servers_are_all_named() -> None:
    a, b = free_port(), free_port()
    with pytest.raises(KafkaConnectionError) as info:
        Admin(bootstrap_servers=f"127.0.0.1:{a},127.0.0.1:{b}")
    assert f"127.0.0.1:{a}" in str(info.value) and f"127.0.0.1:{b}" in str(info.value)


def test_second_bootstrap_server_is_used_when_the_first_is_down(groupstream_broker: BrokerProcess) -> None:
    with Admin(bootstrap_servers=f"127.0.0.1:{free_port()},{groupstream_broker.bootstrap}") as admin:
        assert admin.connection.port == groupstream_broker.port
        assert isinstance(admin.list_topics(), dict)


def test_describe_cluster(admin: Admin, groupstream_broker: BrokerProcess) -> None:
    cluster = admin.describe_cluster()
    assert [(b.host, b.port) for b in cluster.brokers] == [("127.0.0.1", groupstream_broker.port)]
    assert cluster.cluster_id and cluster.controller_id == cluster.brokers[0].node_id
