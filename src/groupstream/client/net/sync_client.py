"""A blocking façade over the network core, for callers that want one answer before they ask the next question
(the Admin, the CLI, the region control plane's setup, tests).

It is not a second wire client: connections, version negotiation, in-flight limits, timeouts, reconnect backoff
and the metadata cache are `NetworkClient`'s, `NodeConnection`'s and `MetadataCache`'s, exactly as the Producer
and Consumer use them. Only the driving differs: instead of a background `NetworkThread`, the calling thread
runs ``NetworkClient.poll`` until its own request is answered. An Admin call has nothing else to do while it
waits, so a thread and the events to reach it would only add a hop; one client per calling thread is the rule,
as for the Admin it serves.

Errors keep the Admin's and the CLI's vocabulary: a request that fails because its node could not be reached,
dropped the connection or did not answer in time raises `KafkaConnectionError` naming the node's address (the
CLI prints it as one line); a failure the broker reported stays in the response body for the caller.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from groupstream.client.closing import ClosesOnExit
from groupstream.client.errors import KafkaConnectionError, KafkaError
from groupstream.client.net.config import NetworkConfig
from groupstream.client.net.metadata import MetadataCache
from groupstream.client.net.network_client import NetworkClient
from groupstream.client.net.network_thread import monotonic_ms
from groupstream.client.net.node_connection import NodeConnection
from groupstream.client.net.requests import ClientResponse, UnsentRequest
from groupstream.protocol.compiler import CompiledApi
from groupstream.protocol.error_codes import ErrorCode
from groupstream.protocol.messages import by_name

# Node ids for addresses learnt outside Metadata (a coordinator, a controller named by host and port); far
# above any broker id, so such a node gets a connection of its own, as Java's coordinator connections do.
_EXTRA_NODE_BASE = 1 << 30
# Errors the network client gives a request it could not send or get answered: the connection's fault.
_CONNECTION_ERRORS = frozenset({ErrorCode.NETWORK_EXCEPTION, ErrorCode.REQUEST_TIMED_OUT})


class SyncClient(ClosesOnExit):
    """A `NetworkClient` driven on the calling thread. Not thread-safe: one caller at a time."""

    def __init__(self, config: NetworkConfig, *, clock: Callable[[], int] = monotonic_ms) -> None:
        self.config = config
        self._clock = clock
        self.metadata = MetadataCache(max_age_ms=config.metadata_max_age_ms, retry_backoff_ms=config.retry_backoff_ms)
        self._client = NetworkClient(config, self.metadata, clock, warn_unreachable=False)
        self._extra: dict[tuple[str, int], int] = {}
        self._closed = False

    # --- nodes --------------------------------------------------------------------------------------------

    def bootstrap(self) -> NodeChannel:
        """A channel to the first bootstrap server that answers ApiVersions, trying each in turn; raises
        `KafkaConnectionError` naming every address and why it failed when none does."""
        failures: list[KafkaConnectionError] = []
        for node_id in self._client.bootstrap_nodes:
            channel = NodeChannel(self, node_id)
            try:
                channel.wait_ready()
            except KafkaConnectionError as e:
                failures.append(e)
                continue
            return channel
        if len(failures) == 1:
            raise failures[0]
        raise KafkaConnectionError(
            ",".join(f.address for f in failures),
            "no bootstrap server reachable (" + "; ".join(str(f) for f in failures) + ")",
        )

    def node_at(self, host: str, port: int) -> NodeChannel:
        """A channel to whatever broker listens at ``host:port``: the bootstrap server or broker already known
        there, else a node of its own (a coordinator the metadata does not name under that address)."""
        for node_id, address in self._client.bootstrap_nodes.items():
            if address == (host, port) and self._is_ready(node_id):
                return NodeChannel(self, node_id)
        for broker in self.metadata.brokers.values():
            if (broker.host, broker.port) == (host, port):
                return NodeChannel(self, broker.node_id)
        extra = self._extra.get((host, port))
        if extra is None:
            extra = self._extra[(host, port)] = _EXTRA_NODE_BASE + len(self._extra)
            self.metadata.add_broker(extra, host, port)
        return NodeChannel(self, extra)

    def address(self, node_id: int) -> tuple[str, int]:
        address = self._client.address(node_id)
        if address is None:
            raise KafkaError(ErrorCode.NETWORK_EXCEPTION, f"node {node_id} is not in the cluster metadata")
        return address

    def connection(self, node_id: int) -> NodeConnection | None:
        """The core's connection state of ``node_id`` (its negotiated versions), once it was first used."""
        return self._client.connection(node_id)

    def _is_ready(self, node_id: int) -> bool:
        conn = self._client.connection(node_id)
        return conn is not None and conn.is_ready

    # --- driving the core -------------------------------------------------------------------------------

    def wait_ready(self, node_id: int) -> None:
        """Connect to ``node_id`` and negotiate versions, or raise `KafkaConnectionError` once an attempt fails
        (after waiting out the reconnect backoff of an earlier failure)."""
        self._check_open(node_id)
        # Take in what happened while nobody polled: a connection that looks ready may have been closed by its
        # broker since the last call (a restart), and would fail the request about to go on it.
        now = self._client.poll(0, self._clock())
        conn = self._client.connection(node_id)
        failures_before = conn.failures if conn is not None else 0
        deadline = now + self.config.connection_setup_timeout_ms + self.config.request_timeout_ms
        while True:
            try:
                if self._client.ready(node_id, now):
                    return
            except KafkaError as e:
                raise KafkaConnectionError(f"node {node_id}", e.detail) from None
            conn = self._client.connection(node_id)
            assert conn is not None  # ready() created it
            if self._client.fatal is not None:  # a refused authentication: raised as the broker's refusal
                raise self._client.fatal
            if conn.failures > failures_before:
                raise _connection_error(conn.address, conn.last_failure or "connection failed")
            if now >= deadline:
                raise KafkaConnectionError(conn.address, "not ready in time")
            wait = deadline - now
            due = conn.next_deadline_ms()  # a reconnect backoff to wait out is no I/O the selector would see
            if due is not None:
                wait = min(wait, max(0, due - now))
            now = self._client.poll(wait, now)

    def send(self, request: UnsentRequest) -> ClientResponse:
        """Send ``request`` (its handler is replaced) and drive the network until it completes."""
        self._check_open(request.node_id)
        done: list[ClientResponse] = []
        request.handler = done.append
        now = self._clock()
        self._client.send(request, now)
        while not done:
            now = self._client.poll(None, now, lambda: bool(done))
        return done[0]

    def _check_open(self, node_id: int | None) -> None:
        if self._closed:
            address = self._client.address(node_id) if node_id is not None else None
            raise KafkaConnectionError(
                f"{address[0]}:{address[1]}" if address else f"node {node_id}", "the client is closed"
            )

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        self._closed = True
        self._client.close()


class NodeChannel:
    """Requests to one node of a `SyncClient`, one answer at a time: what the Admin's calls are written
    against (pick the version, build the body for it, read the response)."""

    def __init__(self, client: SyncClient, node_id: int) -> None:
        self.client = client
        self.node_id = node_id

    @property
    def host(self) -> str:
        return self.client.address(self.node_id)[0]

    @property
    def port(self) -> int:
        return self.client.address(self.node_id)[1]

    @property
    def address(self) -> str:
        host, port = self.client.address(self.node_id)
        return f"{host}:{port}"

    def wait_ready(self) -> None:
        self.client.wait_ready(self.node_id)

    def version_for(self, api_name: str, max_version: int | None = None) -> int:
        """The highest version of ``api_name`` both sides support (at most ``max_version``), negotiated by
        the node's connection (connecting first if need be)."""
        self.wait_ready()
        conn = self.client.connection(self.node_id)
        assert conn is not None
        return conn.version_for(_api(api_name), max_version)

    def supports(self, api_name: str) -> bool:
        self.wait_ready()
        conn = self.client.connection(self.node_id)
        assert conn is not None
        return conn.supports(_api(api_name))

    def request(
        self,
        api_name: str,
        body: Mapping[str, Any] | Any = None,
        version: int | None = None,
        *,
        expect_response: bool = True,
        timeout_ms: int | None = None,
    ) -> Any:
        """Send one request at ``version`` (default: the highest both sides know) and return the decoded
        response body (None with ``expect_response=False``). ``body`` is the API's Request value or a mapping
        of its fields. Raises `KafkaConnectionError` when the node cannot be reached or does not answer within
        ``timeout_ms`` (default ``request.timeout.ms``)."""
        api = _api(api_name)
        if version is None:
            version = self.version_for(api_name)
        if body is None:
            body = api.Request()
        elif isinstance(body, Mapping):
            body = api.Request(**body)
        request = UnsentRequest(
            api, _AtVersion(api, version, body), _unset, node_id=self.node_id, max_version=version,
            expect_response=expect_response, timeout_ms=timeout_ms,
        )  # fmt: skip
        response = self.client.send(request)
        error = response.error
        if isinstance(error, KafkaError) and error.code in _CONNECTION_ERRORS:
            raise KafkaConnectionError(self.address, error.detail) from None
        if error is not None:
            raise error
        return response.body

    def __repr__(self) -> str:
        return f"NodeChannel(node {self.node_id})"


class BrokerChannel(NodeChannel, ClosesOnExit):
    """A channel to the broker at ``host:port`` on a `SyncClient` of its own, connected and negotiated on
    construction (else `KafkaConnectionError`); closing it closes that client. For tools and tests that talk to
    one broker (a coordinator, a broker under test) without an Admin."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        client_id: str = "groupstream",
        request_timeout_ms: int = 30_000,
        connection_setup_timeout_ms: int | None = None,
        max_response_bytes: int = NetworkConfig.max_response_bytes,
    ) -> None:
        config = NetworkConfig(
            bootstrap_servers=((host, port),),
            client_id=client_id,
            request_timeout_ms=request_timeout_ms,
            connection_setup_timeout_ms=(
                request_timeout_ms if connection_setup_timeout_ms is None else connection_setup_timeout_ms
            ),
            max_response_bytes=max_response_bytes,
        )
        client = SyncClient(config)
        try:
            node_id = client.bootstrap().node_id
        except BaseException:
            client.close()
            raise
        super().__init__(client, node_id)

    @property
    def closed(self) -> bool:
        return self.client.closed

    def close(self) -> None:
        self.client.close()


class _AtVersion:
    """A body built for one version: the connection may have been renegotiated (a broker restarted at another
    version) between ``version_for`` and the send, and a body must not go out at a version it was not built
    for."""

    __slots__ = ("api", "body", "version")

    def __init__(self, api: CompiledApi, version: int, body: Any) -> None:
        self.api, self.version, self.body = api, version, body

    def __call__(self, version: int) -> Any:
        if version != self.version:
            raise KafkaError(
                ErrorCode.UNSUPPORTED_VERSION,
                f"{self.api.name} was built for v{self.version}; the reconnected broker allows v{version}",
            )
        return self.body


def _unset(response: ClientResponse) -> None:
    raise AssertionError("SyncClient.send sets the handler")


def _connection_error(address: str, reason: str) -> KafkaConnectionError:
    """The network client words its reasons ``host:port: why``; the error names the address once."""
    return KafkaConnectionError(address, reason.removeprefix(f"{address}: "))


def _api(name: str) -> CompiledApi:
    try:
        return by_name(name)
    except KeyError:
        raise ValueError(f"unknown API {name!r}") from None
