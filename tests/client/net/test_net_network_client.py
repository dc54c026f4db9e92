"""`NetworkClient` on real sockets: against our broker and Tansu, and against peers that refuse, stay silent or
hang up. Every wait is a ``poll`` with a deadline; nothing sleeps."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from net_peers import Peer, negotiate_then_hang_up, silent, unused_port
from net_wire import config

from groupstream.client.errors import KafkaError
from groupstream.client.net.metadata import MetadataCache
from groupstream.client.net.network_client import NetworkClient
from groupstream.client.net.network_thread import monotonic_ms
from groupstream.client.net.node_connection import ConnectionState
from groupstream.client.net.requests import ClientResponse, UnsentRequest
from groupstream.protocol.error_codes import ErrorCode
from groupstream.protocol.messages import by_name
from support.brokers import BrokerProcess
from support.waiting import wait_until

API_VERSIONS = by_name("ApiVersions")
METADATA = by_name("Metadata")


def make_client(port: int, **cfg: Any) -> NetworkClient:
    return NetworkClient(
        config(bootstrap_servers=(("127.0.0.1", port),), **cfg), MetadataCache(), monotonic_ms
    )


@pytest.fixture
def closing() -> Iterator[list[NetworkClient]]:
    clients: list[NetworkClient] = []
    yield clients
    for c in clients:
        c.close()


def poll_until(client: NetworkClient, done: Callable[[], bool], timeout_s: float = 15) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():
        assert time.monotonic() < deadline, "timed out polling the network client"
        client.poll(100, monotonic_ms())


def request(api: Any, body: Any, got: list[ClientResponse], node: int | None = None) -> UnsentRequest:
    return UnsentRequest(api, body, got.append, node_id=node)


def test_talks_to_a_real_broker(broker: BrokerProcess, closing: list[NetworkClient]) -> None:
    client = make_client(broker.port)
    closing.append(client)
    got: list[ClientResponse] = []
    client.send(request(METADATA, lambda v: METADATA.Request(topics=None if v else []), got), monotonic_ms())
    poll_until(client, lambda: bool(got))
    resp = got[0]
    assert resp.error is None and resp.node_id < 0  # the bootstrap connection
    assert resp.version == min(METADATA.max_version, 12 if broker.kind == "tansu" else 13)
    assert resp.body.brokers and resp.body.brokers[0].port == broker.port
    # the metadata cache learned the brokers from its own first request
    poll_until(client, lambda: bool(client.metadata.brokers))
    node = next(iter(client.metadata.brokers))
    client.send(request(API_VERSIONS, API_VERSIONS.Request(), got, node=node), monotonic_ms())
    poll_until(client, lambda: len(got) == 2)
    assert got[1].error is None and got[1].node_id == node
    conn = client.connection(node)
    assert conn is not None and conn.state is ConnectionState.READY


def test_requests_to_one_node_keep_their_order(
    groupstream_broker: BrokerProcess, closing: list[NetworkClient]
) -> None:
    client = make_client(groupstream_broker.port, max_in_flight=1)
    closing.append(client)
    order: list[int] = []
    now = monotonic_ms()
    for i in range(5):

        def record(response: ClientResponse, i: int = i) -> None:
            order.append(i)

        client.send(UnsentRequest(METADATA, METADATA.Request(topics=[]), record, node_id=-1), now)
    poll_until(client, lambda: len(order) == 5)
    assert order == [0, 1, 2, 3, 4]


def test_a_refused_connection_fails_the_request_with_a_retriable_error(closing: list[NetworkClient]) -> None:
    port = unused_port()
    client = make_client(port, reconnect_backoff_ms=200)
    closing.append(client)
    got: list[ClientResponse] = []
    client.send(request(METADATA, METADATA.Request(topics=[]), got, node=-1), monotonic_ms())
    poll_until(client, lambda: bool(got))
    err = got[0].error
    assert isinstance(err, KafkaError) and err.code == ErrorCode.NETWORK_EXCEPTION and err.retriable
    assert f"127.0.0.1:{port}" in str(err)
    conn = client.connection(-1)
    assert conn is not None and conn.state is ConnectionState.DISCONNECTED
    assert conn.reconnect_at_ms > monotonic_ms() - 5 and conn.failures == 1


def test_a_request_to_any_node_waits_out_the_backoff_then_times_out(closing: list[NetworkClient]) -> None:
    client = make_client(unused_port(), reconnect_backoff_ms=50, request_timeout_ms=400)
    closing.append(client)
    got: list[ClientResponse] = []
    start = monotonic_ms()
    client.send(request(METADATA, METADATA.Request(topics=[]), got), start)
    poll_until(client, lambda: bool(got))
    err = got[0].error
    assert isinstance(err, KafkaError) and err.code == ErrorCode.REQUEST_TIMED_OUT
    assert monotonic_ms() - start >= 400
    conn = client.connection(-1)
    assert conn is not None and conn.failures >= 2  # it kept trying within the request timeout


def test_a_silent_peer_times_the_connection_out(closing: list[NetworkClient]) -> None:
    with Peer(silent) as peer:
        client = make_client(peer.port, request_timeout_ms=300)
        closing.append(client)
        got: list[ClientResponse] = []
        start = monotonic_ms()
        client.send(request(METADATA, METADATA.Request(topics=[]), got, node=-1), start)
        poll_until(client, lambda: bool(got))
        err = got[0].error
        assert isinstance(err, KafkaError) and err.retriable
        assert monotonic_ms() - start >= 300
        conn = client.connection(-1)
        assert conn is not None
        # the request may give up just before the negotiation does; the connection is closed either way
        poll_until(client, lambda: conn.state is ConnectionState.DISCONNECTED)
        assert conn.last_failure is not None and "ApiVersions" in conn.last_failure


def test_a_hang_up_fails_the_requests_in_flight(closing: list[NetworkClient]) -> None:
    with Peer(negotiate_then_hang_up) as peer:
        client = make_client(peer.port)
        closing.append(client)
        got: list[ClientResponse] = []
        client.send(request(METADATA, METADATA.Request(topics=[]), got, node=-1), monotonic_ms())
        poll_until(client, lambda: bool(got))
        err = got[0].error
        assert isinstance(err, KafkaError) and err.code == ErrorCode.NETWORK_EXCEPTION
        assert "closed the connection" in str(err)
        assert client.metadata.update_requested  # a dropped connection may mean a moved leader


def test_wakeup_interrupts_a_poll_without_deadline(closing: list[NetworkClient]) -> None:
    client = make_client(unused_port())
    closing.append(client)
    client.metadata.poll(0)  # the cache's first request is taken: nothing is due now
    returned = threading.Event()

    def run() -> None:
        client.poll(None, monotonic_ms())
        returned.set()

    t = threading.Thread(target=run)
    t.start()
    wait_until(lambda: client.sleeping, 5, "the poll to announce it is blocking", interval_s=0.001)
    assert not returned.is_set()
    client.wakeup()
    assert returned.wait(5)
    t.join()


def test_close_fails_what_is_unsent(closing: list[NetworkClient]) -> None:
    client = make_client(unused_port(), reconnect_backoff_ms=10_000)
    got: list[ClientResponse] = []
    client.send(request(METADATA, METADATA.Request(topics=[]), got), monotonic_ms())
    client.close()
    assert len(got) == 1 and got[0].error is not None
    client.send(request(METADATA, METADATA.Request(topics=[]), got), monotonic_ms())
    assert len(got) == 2 and "closed" in str(got[1].error)
