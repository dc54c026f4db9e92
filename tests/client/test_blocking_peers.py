"""BlockingConnection against scripted peers on real sockets: version fallback and every way a peer can fail."""

from __future__ import annotations

import re
import socket

import pytest
from scripted_peers import ScriptedPeer, hang_up, old_broker, silent, wrong_correlation

from groupstream.client.errors import KafkaConnectionError, KafkaProtocolError, UnsupportedVersionError
from groupstream.client.net.blocking import BlockingConnection, parse_bootstrap

HOST = "127.0.0.1"


def _unused_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        port: int = s.getsockname()[1]
    return port


def test_falls_back_to_api_versions_v0_when_the_broker_lacks_v3() -> None:
    with ScriptedPeer(old_broker, connections=2) as peer:
        conn = BlockingConnection(HOST, peer.port, timeout_s=5)
        try:
            assert conn.broker_versions == {18: (0, 0), 3: (0, 1)}
            assert conn.version_for("Metadata") == 1
            assert conn.version_for("Metadata", max_version=0) == 0
            with pytest.raises(UnsupportedVersionError, match="does not serve Produce"):
                conn.version_for("Produce")
        finally:
            conn.close()
    assert peer.seen == [(18, 3), (18, 0)]


def test_refused_connection_names_host_and_port() -> None:
    port = _unused_port()
    with pytest.raises(KafkaConnectionError) as info:
        BlockingConnection(HOST, port, timeout_s=5)
    assert f"{HOST}:{port}" in str(info.value)
    assert "refused" in str(info.value)


def test_silent_peer_times_out_with_a_clear_error() -> None:
    with ScriptedPeer(silent) as peer, pytest.raises(KafkaConnectionError) as info:
        BlockingConnection(HOST, peer.port, timeout_s=0.3)
    assert str(info.value) == f"{HOST}:{peer.port}: no ApiVersions response within 0.3s"


def test_peer_that_hangs_up_is_reported_as_closed() -> None:
    with ScriptedPeer(hang_up) as peer, pytest.raises(KafkaConnectionError) as info:
        BlockingConnection(HOST, peer.port, timeout_s=5)
    assert re.match(rf"{HOST}:{peer.port}: connection (closed|lost)", str(info.value))


def test_response_to_a_request_never_sent_is_a_protocol_error() -> None:
    # the v3 attempt fails as an undecodable answer would, so the client retries at v0 on a second connection
    with ScriptedPeer(wrong_correlation, connections=2) as peer, pytest.raises(KafkaProtocolError) as info:
        BlockingConnection(HOST, peer.port, timeout_s=5)
    assert "unknown correlation id 4242" in str(info.value)
    assert f"{HOST}:{peer.port}" in str(info.value)


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
