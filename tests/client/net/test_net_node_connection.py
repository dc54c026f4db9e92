"""`NodeConnection` with a manual clock and the broker-side codec: states, negotiation, backoff, timeouts."""

from __future__ import annotations

import itertools

import pytest
from net_wire import API_VERSIONS, METADATA, WireBroker, all_versions, config, ready_connection

from groupstream.client.errors import KafkaProtocolError, UnsupportedVersionError
from groupstream.client.net.node_connection import CONNECTION_STATES, ConnectionState, NodeConnection
from groupstream.protocol.connection import Request
from groupstream.protocol.error_codes import ErrorCode
from groupstream.protocol.messages import by_name
from groupstream.state_table import InvalidTransition

PRODUCE = by_name("Produce")
S = ConnectionState
VALID = {
    (S.DISCONNECTED, S.CONNECTING),
    (S.CONNECTING, S.NEGOTIATING),
    (S.NEGOTIATING, S.READY),
    (S.CONNECTING, S.DISCONNECTED),
    (S.NEGOTIATING, S.DISCONNECTED),
    (S.READY, S.DISCONNECTED),
    # TLS (SSL, SASL_SSL) and SASL (SASL_PLAINTEXT, SASL_SSL)
    (S.CONNECTING, S.TLS_HANDSHAKE),
    (S.TLS_HANDSHAKE, S.NEGOTIATING),
    (S.NEGOTIATING, S.AUTHENTICATING),
    (S.AUTHENTICATING, S.READY),
    (S.TLS_HANDSHAKE, S.DISCONNECTED),
    (S.AUTHENTICATING, S.DISCONNECTED),
}


@pytest.mark.parametrize(("old", "new"), list(itertools.product(S, S)), ids=lambda s: s.value)
def test_transition_table(old: ConnectionState, new: ConnectionState) -> None:
    conn = NodeConnection(1, "h", 1, config())
    conn.state = old
    if (old, new) in VALID:
        conn._transition_to(new)
        assert conn.state is new
    else:
        with pytest.raises(InvalidTransition):
            conn._transition_to(new)
        assert conn.state is old
    assert CONNECTION_STATES.pairs() == VALID


def test_events_out_of_order_are_refused() -> None:
    conn = NodeConnection(1, "h", 1, config())
    with pytest.raises(InvalidTransition):
        conn.connect_established(0)  # not connecting
    with pytest.raises(InvalidTransition):
        conn.on_data(b"\x00", 0)  # nothing to read from
    conn.connect_started(0)
    with pytest.raises(InvalidTransition):
        conn.connect_started(0)
    assert not conn.can_send()


def test_negotiates_at_v3_then_uses_the_highest_common_version() -> None:
    conn = NodeConnection(1, "h", 1, config())
    conn.connect_started(0)
    conn.connect_established(0)
    assert conn.state is S.NEGOTIATING and not conn.can_send()
    wire = WireBroker(conn)
    req = wire.one_request()
    assert (req.api.name, req.version) == ("ApiVersions", 3)
    assert req.body.client_software_name == "groupstream"
    R = API_VERSIONS.Response
    keys = [
        R.ApiVersion(api_key=18, min_version=0, max_version=4),
        R.ApiVersion(api_key=3, min_version=1, max_version=9),
    ]
    assert wire.reply(req, R(error_code=0, api_keys=keys), 0).failure is None
    assert conn.is_ready and conn.can_send()
    assert conn.version_for(METADATA) == 9
    assert conn.version_for(METADATA, max_version=4) == 4
    with pytest.raises(UnsupportedVersionError, match="does not serve Produce"):
        conn.version_for(PRODUCE)
    with pytest.raises(UnsupportedVersionError):
        conn.version_for(METADATA, max_version=0)


def test_error_35_in_a_v0_body_makes_it_ask_again_at_the_listed_version() -> None:
    conn = NodeConnection(1, "h", 1, config())
    conn.connect_started(0)
    conn.connect_established(0)
    wire = WireBroker(conn)
    req = wire.one_request()
    R = API_VERSIONS.Response
    old = [
        R.ApiVersion(api_key=18, min_version=0, max_version=0),
        R.ApiVersion(api_key=3, min_version=0, max_version=1),
    ]
    # an old broker answers the v3 request in v0 format: error 35 and its own ApiVersions range
    result = wire.reply(req, R(error_code=ErrorCode.UNSUPPORTED_VERSION, api_keys=old), 0, version=0)
    assert result.failure is None and conn.state is S.NEGOTIATING
    again = wire.one_request()
    assert (again.api.name, again.version) == ("ApiVersions", 0)
    wire.reply(again, R(error_code=0, api_keys=old), 0)
    assert conn.is_ready
    assert conn.version_for(METADATA) == 1


def test_a_v3_answer_that_does_not_decode_falls_back_to_v0() -> None:
    conn = NodeConnection(1, "h", 1, config())
    conn.connect_started(0)
    conn.connect_established(0)
    wire = WireBroker(conn)
    req = wire.one_request()
    corr = req.header.correlation_id
    # header (corr) + error 35 + a truncated body: not a valid v3 ApiVersions response
    frame = corr.to_bytes(4, "big") + (35).to_bytes(2, "big") + b"\xff\xff"
    result = conn.on_data(len(frame).to_bytes(4, "big") + frame, 0)
    assert result.failure is None
    again = wire.one_request()
    assert again.version == 0
    wire.reply(again, API_VERSIONS.Response(error_code=0, api_keys=all_versions()), 0)
    assert conn.is_ready


def test_refused_negotiation_is_a_failure_naming_the_broker() -> None:
    conn = NodeConnection(1, "h", 7, config())
    conn.connect_started(0)
    conn.connect_established(0)
    wire = WireBroker(conn)
    req = wire.one_request()
    result = wire.reply(req, API_VERSIONS.Response(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED), 0)
    assert result.failure is not None and "h:7 refused ApiVersions" in result.failure


def test_responses_complete_in_order_and_carry_the_tag() -> None:
    conn, wire = ready_connection()
    conn.send("first", METADATA, 12, METADATA.Request(topics=None), 10)
    conn.send("second", METADATA, 12, METADATA.Request(topics=[]), 11)
    assert conn.in_flight == 2
    a, b = wire.requests()
    assert isinstance(a, Request) and isinstance(b, Request)
    body = METADATA.Response(brokers=[], topics=[])
    res_b = wire.reply(b, body, 20)
    res_a = wire.reply(a, body, 21)
    assert [c.tag for c in res_b.completions] == ["second"]
    assert [c.tag for c in res_a.completions] == ["first"]
    assert conn.in_flight == 0


def test_in_flight_limit() -> None:
    conn, _ = ready_connection(max_in_flight=2)
    conn.send(1, METADATA, 12, METADATA.Request(), 0)
    assert conn.can_send()
    conn.send(2, METADATA, 12, METADATA.Request(), 0)
    assert not conn.can_send()
    with pytest.raises(InvalidTransition):
        conn.send(3, METADATA, 12, METADATA.Request(), 0)


def test_a_body_that_cannot_be_encoded_fails_only_that_request() -> None:
    conn, _ = ready_connection()
    with pytest.raises(KafkaProtocolError, match="cannot encode Metadata v0"):
        conn.send(1, METADATA, 0, METADATA.Request(topics=[], allow_auto_topic_creation=False), 0)
    assert conn.is_ready and conn.in_flight == 0 and not conn.has_output()


def test_requests_without_a_response_are_not_in_flight() -> None:
    conn, wire = ready_connection()
    conn.send("p", PRODUCE, 9, PRODUCE.Request(acks=0, timeout_ms=1, topic_data=[]), 0, expect_response=False)
    assert conn.in_flight == 0 and conn.has_output()
    assert len(wire.requests()) == 1


def test_request_timeout_names_the_overdue_request() -> None:
    conn, _ = ready_connection(request_timeout_ms=1000)
    conn.send("slow", METADATA, 12, METADATA.Request(), 100)
    conn.send("custom", METADATA, 12, METADATA.Request(), 100, timeout_ms=300)
    assert conn.next_deadline_ms() == 400
    assert conn.check_timeouts(399) is None
    reason, tag = conn.check_timeouts(400) or ("", None)
    assert tag == "custom" and "no response within 300 ms" in reason
    assert conn.disconnected(400, reason) == ["slow", "custom"]
    assert conn.state is S.DISCONNECTED and conn.in_flight == 0 and not conn.has_output()


def test_connection_setup_timeout() -> None:
    conn = NodeConnection(1, "h", 1, config(connection_setup_timeout_ms=500))
    conn.connect_started(1000)
    assert conn.next_deadline_ms() == 1500
    assert conn.check_timeouts(1499) is None
    reason, tag = conn.check_timeouts(1500) or ("", "x")
    assert tag is None and "socket.connection.setup.timeout.ms=500" in reason


def test_negotiation_is_bounded_by_the_request_timeout() -> None:
    conn = NodeConnection(1, "h", 1, config(request_timeout_ms=700))
    conn.connect_started(0)
    conn.connect_established(10)
    reason, tag = conn.check_timeouts(710) or ("", "x")
    assert tag is None and "ApiVersions" in reason


def test_backoff_doubles_up_to_the_maximum_and_resets_after_a_good_connection() -> None:
    conn = NodeConnection(1, "h", 1, config(reconnect_backoff_ms=50, reconnect_backoff_max_ms=300))
    now = 0
    waits = []
    for _ in range(5):
        assert conn.can_connect(now)
        conn.connect_started(now)
        conn.disconnected(now, "refused")
        waits.append(conn.reconnect_at_ms - now)
        assert not conn.can_connect(conn.reconnect_at_ms - 1)
        now = conn.reconnect_at_ms
    assert waits == [50, 100, 200, 300, 300]
    conn.connect_started(now)
    conn.connect_established(now)
    WireBroker(conn).negotiate(now)
    assert conn.failures == 0
    conn.disconnected(now, "closed by the broker")
    assert conn.reconnect_at_ms - now == 50


def test_jitter_is_applied_to_the_backoff() -> None:
    conn = NodeConnection(1, "h", 1, config(reconnect_backoff_ms=100), jitter=lambda: 1.2)
    conn.connect_started(0)
    conn.disconnected(0, "refused")
    assert conn.reconnect_at_ms == 120


def test_a_response_to_nothing_in_flight_breaks_the_connection() -> None:
    conn, wire = ready_connection()
    conn.send("x", METADATA, 12, METADATA.Request(), 0)
    req = wire.one_request()
    result = wire.reply_raw(METADATA, 12, req.header.correlation_id + 7, METADATA.Response(), 0)
    assert result.failure is not None and "correlation id" in result.failure


def test_reconnecting_starts_a_fresh_codec() -> None:
    conn, _ = ready_connection()
    conn.send("x", METADATA, 12, METADATA.Request(), 0)
    conn.disconnected(5, "reset")
    conn.connect_started(conn.reconnect_at_ms)
    conn.connect_established(conn.reconnect_at_ms)
    fresh = WireBroker(conn)
    req = fresh.one_request()
    assert req.api.name == "ApiVersions" and req.header.correlation_id == 0


def test_a_produce_requests_record_batches_go_to_the_socket_from_their_own_buffers() -> None:
    """A record batch is not copied into the request: the chunk queued for ``sendmsg`` is a view of the
    batch's own buffer, the small pieces around it share one chunk, and the broker decodes the same request."""
    conn, wire = ready_connection()
    batches = [bytearray(b"%c" % (65 + i)) * (20_000 + i) for i in range(3)]  # stand-ins: the bytes are opaque
    R = PRODUCE.Request
    TD = R.TopicProduceData
    parts = [TD.PartitionProduceData(index=i, records=b) for i, b in enumerate(batches)]
    body = R(transactional_id=None, acks=-1, timeout_ms=1000, topic_data=[TD(name="t", partition_data=parts)])
    conn.send("p", PRODUCE, 9, body, 0)
    chunks = conn.output_chunks()
    in_place = [c for c in chunks if any(c.obj is b for b in batches)]
    assert [c.obj for c in in_place] == batches
    assert len(chunks) == 2 * len(batches) + 1  # header+lengths, batch, lengths, batch, ..., tagged fields
    req = wire.one_request()
    assert [bytes(p.records) for p in req.body.topic_data[0].partition_data] == [bytes(b) for b in batches]
