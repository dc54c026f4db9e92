"""The blocking façade over the network core (`SyncClient`, `NodeChannel`): version negotiation and every way a
peer can fail, on real sockets against scripted peers, and plain requests against a real ``groupstream broker``.

These are what the old blocking connection's tests proved, now proved of the one core the Producer and
Consumer use too (negotiation itself is `NodeConnection`'s; `tests/client/net` checks it without sockets)."""

from __future__ import annotations

import re
import socket
import uuid
from pathlib import Path

import confluent_kafka as ck
import pytest
from scripted_peers import ScriptedPeer, hang_up, old_broker, silent, wrong_correlation

from groupstream.client.admin import Admin, NewTopic
from groupstream.client.errors import KafkaConnectionError, UnsupportedVersionError
from groupstream.client.net.config import NetworkConfig, parse_bootstrap
from groupstream.client.net.sync_client import SyncClient
from groupstream.protocol.messages import APIS, by_name
from support.brokers import BrokerKind, BrokerProcess

HOST = "127.0.0.1"


def _unused_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        port: int = s.getsockname()[1]
    return port


def _client(*ports: int, timeout_ms: int = 5000) -> SyncClient:
    servers = tuple((HOST, p) for p in ports)
    return SyncClient(NetworkConfig(servers, client_id="t", request_timeout_ms=timeout_ms,
                                    connection_setup_timeout_ms=timeout_ms))  # fmt: skip


def test_falls_back_to_api_versions_v0_on_the_same_connection_when_the_broker_lacks_v3() -> None:
    with ScriptedPeer(old_broker) as peer, _client(peer.port) as client:
        channel = client.bootstrap()
        assert channel.version_for("Metadata") == 1
        assert channel.version_for("Metadata", max_version=0) == 0
        assert channel.supports("ApiVersions") and not channel.supports("Produce")
        with pytest.raises(UnsupportedVersionError, match="does not serve Produce"):
            channel.version_for("Produce")
        client.close()
    # ApiVersions v3, answered in v0 format with UNSUPPORTED_VERSION, then v0; then the core's first Metadata
    assert peer.seen[:2] == [(18, 3), (18, 0)] and all(key == 3 for key, _ in peer.seen[2:])


def test_refused_connection_names_host_and_port_once() -> None:
    port = _unused_port()
    with _client(port) as client, pytest.raises(KafkaConnectionError) as info:
        client.bootstrap()
    assert str(info.value) == f"{HOST}:{port}: connection refused"


def test_every_unreachable_bootstrap_server_is_named() -> None:
    a, b = _unused_port(), _unused_port()
    with _client(a, b) as client, pytest.raises(KafkaConnectionError) as info:
        client.bootstrap()
    assert f"{HOST}:{a}: connection refused" in str(info.value) and f"{HOST}:{b}: connection refused" in str(info.value)


def test_a_silent_peer_times_out_saying_what_it_did_not_answer() -> None:
    with ScriptedPeer(silent) as peer, _client(peer.port, timeout_ms=300) as client:
        with pytest.raises(KafkaConnectionError) as info:
            client.bootstrap()
        client.close()
    assert str(info.value) == (
        f"{HOST}:{peer.port}: ApiVersions (negotiation) to {HOST}:{peer.port} got no response within 300 ms"
    )


def test_a_peer_that_hangs_up_is_reported_as_closed() -> None:
    with ScriptedPeer(hang_up) as peer, _client(peer.port) as client, pytest.raises(KafkaConnectionError) as info:
        client.bootstrap()
    assert re.match(rf"{HOST}:{peer.port}: .*(closed the connection|lost)", str(info.value)), str(info.value)


def test_a_response_to_a_request_never_sent_fails_the_connection() -> None:
    with ScriptedPeer(wrong_correlation) as peer, _client(peer.port) as client:
        with pytest.raises(KafkaConnectionError) as info:
            client.bootstrap()
        client.close()
    assert f"{HOST}:{peer.port}" in str(info.value) and "correlation id 4242" in str(info.value), str(info.value)
    assert peer.seen == [(18, 3), (18, 0)]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("127.0.0.1:9092", [("127.0.0.1", 9092)]),
        ("a:1, b:2", [("a", 1), ("b", 2)]),
        ("[::1]:9092", [("::1", 9092)]),
    ],
)
def test_parse_bootstrap(text: str, expected: list[tuple[str, int]]) -> None:
    assert parse_bootstrap(text) == expected


@pytest.mark.parametrize("text", ["", "localhost", "host:port", "host:0", "host:70000", ":9092"])
def test_parse_bootstrap_rejects_bad_addresses(text: str) -> None:
    with pytest.raises(ValueError):
        parse_bootstrap(text)


@pytest.mark.broker_ours
def test_negotiates_the_highest_common_version_of_every_api(groupstream_broker: BrokerProcess) -> None:
    with _client(groupstream_broker.port) as client:
        channel = client.bootstrap()
        conn = client.connection(channel.node_id)
        assert conn is not None and conn.api_versions and set(conn.api_versions) <= set(APIS)
        for key, (low, high) in conn.api_versions.items():
            api = APIS[key]
            assert channel.version_for(api.name) == min(high, api.max_version)
            assert low <= channel.version_for(api.name, max_version=low) == max(low, api.min_version)
        with pytest.raises(UnsupportedVersionError, match="this client sends v0--1"):
            channel.version_for("Metadata", max_version=-1)


@pytest.mark.broker_ours
def test_request_takes_a_mapping_or_a_message_at_any_common_version(groupstream_broker: BrokerProcess) -> None:
    with _client(groupstream_broker.port) as client:
        channel = client.bootstrap()
        newest = channel.request("Metadata", {"topics": []})
        assert [b.port for b in newest.brokers] == [groupstream_broker.port]
        v1 = channel.request("Metadata", by_name("Metadata").Request(topics=[]), version=1)
        assert [(b.node_id, b.host, b.port) for b in v1.brokers] == [(b.node_id, b.host, b.port) for b in newest.brokers]
        # the broker the metadata names is the same one: its channel is the bootstrap connection's peer
        broker = newest.brokers[0]
        other = client.node_at(broker.host, broker.port)
        assert other.request("Metadata", {"topics": []}).cluster_id == newest.cluster_id
    with pytest.raises(KafkaConnectionError, match="closed"):
        channel.request("Metadata", {"topics": []})


@pytest.mark.broker_ours
def test_an_admin_outlives_a_restart_of_its_bootstrap_broker(tmp_path: Path) -> None:
    """The old blocking connection died with its socket; the core reconnects (after its backoff) and
    negotiates again, so one Admin serves on across a broker restart."""
    with BrokerProcess(BrokerKind.GROUPSTREAM, tmp_path) as broker, Admin(bootstrap_servers=broker.bootstrap) as admin:
        admin.create_topics([NewTopic("before", 1)])
        broker.restart(kill=True)
        assert "before" in admin.list_topics()
        admin.create_topics([NewTopic("after", 1)])
        assert {"before", "after"} <= set(admin.list_topics())


def test_negotiates_with_each_broker_and_answers_admin_calls(broker: BrokerProcess) -> None:
    """Ours and Tansu: every version picked lies in both sides' ranges, and plain Admin calls work on it."""
    with Admin(bootstrap_servers=broker.bootstrap) as admin:
        channel = admin.connection
        conn = channel.client.connection(channel.node_id)
        assert conn is not None and conn.is_ready
        for key, (low, high) in conn.api_versions.items():
            api = APIS.get(key)
            if api is None or high < api.min_version or low > api.max_version:
                continue
            assert max(low, api.min_version) <= channel.version_for(api.name) == min(high, api.max_version)
        assert [b.port for b in admin.describe_cluster().brokers] == [broker.port]
        name = f"sync-{uuid.uuid4().hex[:8]}"
        admin.create_topics([NewTopic(name, 2)])
        assert admin.describe_topics([name])[name].partition_count == 2


@pytest.mark.compat
def test_negotiates_with_librdkafkas_mock_cluster() -> None:
    """A third implementation of the broker side of ApiVersions and Metadata (confluent-kafka's mock cluster)."""
    producer = ck.Producer({"test.mock.num.brokers": 1, "log_level": 3})
    try:
        mock = next(iter(producer.list_topics(timeout=10).brokers.values()))
        with _client(mock.port) as client:
            channel = client.bootstrap()
            assert channel.supports("Metadata") and channel.version_for("Metadata") >= 1
            answer = channel.request("Metadata", {"topics": []})
            assert [(b.node_id, b.port) for b in answer.brokers] == [(mock.id, mock.port)]
    finally:
        del producer  # the mock cluster lives as long as its client
