"""One connection to one broker node, as a state machine that does no I/O and reads no clock.

States (each lists the states it may be entered from, checked by one ``_transition_to``)::

    DISCONNECTED --connect_started--> CONNECTING --connect_established--> [TLS_HANDSHAKE] --> NEGOTIATING
    NEGOTIATING --ApiVersions--> [AUTHENTICATING --SaslHandshake, SaslAuthenticate...-->] READY
    any other state --disconnected--> DISCONNECTED

TLS_HANDSHAKE is entered with ``security.protocol`` SSL or SASL_SSL: OpenSSL runs over memory BIOs
(`TlsSession`), so the handshake is bytes in and bytes out like the rest, and every byte after it is encrypted
here before the shell sees it. AUTHENTICATING is entered with SASL_PLAINTEXT or SASL_SSL once versions are known:
SaslHandshake v1 names the mechanism, then SaslAuthenticate carries the tokens (`SaslExchange`). A refused
authentication is fatal (``DataResult.fatal``): the shell fails the application's requests with it instead of
retrying, as Java's client does with an AuthenticationException. When SaslAuthenticate reports a session
lifetime (KIP-368, the broker's ``connections.max.reauth.ms``), the connection re-authenticates at 85% of it on
the same connection (SaslHandshake, then SaslAuthenticate again), holding new requests back meanwhile while the
state stays READY; the requests already in flight are answered first, in order.

The I/O shell (`NetworkClient`) opens the socket and reports what happened; this object decides what to send,
keeps the in-flight requests with their deadlines, picks the API version for each request (the highest both
sides know) and computes the reconnect backoff (``reconnect.backoff.ms`` doubling up to
``reconnect.backoff.max.ms``, reset by a successful negotiation, as Java's ``ClusterConnectionStates`` does).

Version negotiation follows the Java client: ApiVersions at v3 first. A broker that lacks v3 answers with
UNSUPPORTED_VERSION (35) in a v0-format body, which may not even decode as v3; on either signal we ask again on
the same connection, at the ApiVersions version the broker listed, else v0.
"""

from __future__ import annotations

import struct
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any

from groupstream.client.errors import KafkaProtocolError, UnsupportedVersionError
from groupstream.client.net.config import NetworkConfig, exponential_backoff_ms
from groupstream.client.net.security import SaslAuthenticationError, SaslExchange
from groupstream.protocol.compiler import CompiledApi
from groupstream.protocol.connection import ClientConnection
from groupstream.protocol.error_codes import ErrorCode, describe
from groupstream.protocol.errors import LocalProtocolError, PeerProtocolError
from groupstream.protocol.messages import APIS, by_name
from groupstream.security.tls_session import TlsClosed, TlsError, TlsSession
from groupstream.state_table import InvalidTransition, TransitionTable

CLIENT_SOFTWARE_NAME = "groupstream"
CLIENT_SOFTWARE_VERSION = "0.1.0"
_API_VERSIONS = by_name("ApiVersions")
_SASL_HANDSHAKE = by_name("SaslHandshake")
_SASL_AUTHENTICATE = by_name("SaslAuthenticate")
_TLS_READ = 256 * 1024
_SETUP_STEP = {"ApiVersions": "negotiation", "SaslHandshake": "authentication", "SaslAuthenticate": "authentication"}
_FIRST_API_VERSIONS_VERSION = 3
_MAX_CHUNKS_PER_SEND = 64
_JOIN_BELOW = 16_384  # request pieces smaller than this are joined with their neighbours, larger ones sent in place


class ConnectionState(Enum):
    DISCONNECTED = "disconnected"
    CONNECTING = "connecting"
    TLS_HANDSHAKE = "tls handshake"
    NEGOTIATING = "negotiating"
    AUTHENTICATING = "authenticating"
    READY = "ready"


_S = ConnectionState
CONNECTION_STATES = TransitionTable("a connection", ConnectionState, {
    _S.DISCONNECTED: frozenset({_S.CONNECTING, _S.TLS_HANDSHAKE, _S.NEGOTIATING, _S.AUTHENTICATING, _S.READY}),
    _S.CONNECTING: frozenset({_S.DISCONNECTED}),
    _S.TLS_HANDSHAKE: frozenset({_S.CONNECTING}),
    _S.NEGOTIATING: frozenset({_S.CONNECTING, _S.TLS_HANDSHAKE}),
    _S.AUTHENTICATING: frozenset({_S.NEGOTIATING}),
    _S.READY: frozenset({_S.NEGOTIATING, _S.AUTHENTICATING}),
})
SETTING_UP = frozenset({_S.CONNECTING, _S.TLS_HANDSHAKE, _S.NEGOTIATING, _S.AUTHENTICATING})
"""The states of a connection on its way to READY."""


@dataclass(slots=True)
class InFlight:
    tag: Any  # what the shell gets back: the UnsentRequest
    api: CompiledApi
    version: int
    sent_ms: int
    deadline_ms: int


@dataclass(frozen=True, slots=True)
class Completion:
    """A response to a request the shell sent through ``send``."""

    tag: Any
    version: int
    body: Any


@dataclass(frozen=True, slots=True)
class DataResult:
    """What ``on_data`` produced: completed requests, and a reason to close the connection if it broke."""

    completions: list[Completion]
    failure: str | None = None
    fatal: bool = False
    """The failure is a refused authentication: retrying with the same settings cannot succeed."""


class NodeConnection:
    """The protocol side of one broker connection. Not thread-safe: the network thread owns it."""

    def __init__(
        self,
        node_id: int,
        host: str,
        port: int,
        config: NetworkConfig,
        *,
        jitter: Callable[[], float] | None = None,
        nonce: Callable[[], str] | None = None,
    ) -> None:
        self.node_id = node_id
        self.host = host
        self.port = port
        self._config = config
        self._jitter = jitter or (lambda: 1.0)
        self.state = ConnectionState.DISCONNECTED
        self.failures = 0  # consecutive failed attempts, for the backoff
        self.reconnect_at_ms = 0
        self._setup_deadline_ms = 0
        self._codec: ClientConnection | None = None
        self._out: deque[memoryview] = deque()
        self._in_flight: dict[int, InFlight] = {}
        self._negotiation_corr = -1
        self._negotiation_version = _FIRST_API_VERSIONS_VERSION
        self.api_versions: dict[int, tuple[int, int]] = {}
        # the cluster's finalized feature levels (ApiVersions v3+), e.g. transaction.version 2 (KIP-890 part 2)
        self.finalized_features: dict[str, int] = {}
        self.last_failure: str | None = None
        self._nonce = nonce
        self._tls: TlsSession | None = None
        self._tls_buffer = bytearray(_TLS_READ) if config.security.protocol.tls else bytearray()
        self._sasl: SaslExchange | None = None
        self._sasl_version = 0
        self.session_lifetime_ms = 0
        """What the broker's SaslAuthenticate v1+ said the session lasts (0: no limit)."""
        self._reauth_at_ms: int | None = None
        self._reauthenticating = False
        self.reauthentications = 0

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def __repr__(self) -> str:
        return f"NodeConnection(node {self.node_id} at {self.address}, {self.state.value}, {self.in_flight} in flight)"

    # --- state -----------------------------------------------------------------------------------------

    def _transition_to(self, new: ConnectionState) -> None:
        self.state = CONNECTION_STATES.check(self.state, new, who=f"the connection to node {self.node_id}")

    def can_connect(self, now_ms: int) -> bool:
        """Disconnected and past the backoff: the shell may open a socket."""
        return self.state is ConnectionState.DISCONNECTED and now_ms >= self.reconnect_at_ms

    def connect_started(self, now_ms: int) -> None:
        """The shell began a non-blocking connect."""
        self._transition_to(ConnectionState.CONNECTING)
        self._setup_deadline_ms = now_ms + self._config.connection_setup_timeout_ms

    def connect_established(self, now_ms: int) -> None:
        """The TCP connection is up: the TLS handshake if there is one, then negotiate versions before anything
        else is sent."""
        self._codec = ClientConnection(APIS, self._config.client_id, self._config.max_response_bytes)
        security = self._config.security
        if security.ssl_context is not None:
            self._transition_to(ConnectionState.TLS_HANDSHAKE)
            self._tls = TlsSession(security.ssl_context, server_side=False, server_hostname=self.host)
            self._tls.receive(b"")  # the ClientHello
            self._take_tls_output()
            return
        self._transition_to(ConnectionState.NEGOTIATING)
        self._send_api_versions(_FIRST_API_VERSIONS_VERSION, now_ms)

    def disconnected(self, now_ms: int, reason: str) -> list[Any]:
        """The socket closed or failed (or the shell closed it). Returns the tags of the requests that were
        in flight, oldest first, so the shell can fail them; the next attempt waits for the backoff."""
        if self.state is ConnectionState.DISCONNECTED:
            return []
        was_ready = self.state is ConnectionState.READY
        self._transition_to(ConnectionState.DISCONNECTED)
        tags = [f.tag for f in self._in_flight.values() if f.tag is not None]
        self._in_flight.clear()
        self._out.clear()
        self._codec = None
        self._tls = None
        self._sasl = None
        self._reauth_at_ms = None
        self._reauthenticating = False
        self.last_failure = reason
        # a connection that worked and then dropped reconnects after the initial backoff, not a longer one
        self.failures = 1 if was_ready else self.failures + 1
        backoff = exponential_backoff_ms(
            self._config.reconnect_backoff_ms,
            self._config.reconnect_backoff_max_ms,
            self.failures,
            self._jitter(),
        )
        self.reconnect_at_ms = now_ms + backoff
        return tags

    @property
    def is_ready(self) -> bool:
        return self.state is ConnectionState.READY

    @property
    def in_flight(self) -> int:
        """Requests sent and not answered, ApiVersions included."""
        return len(self._in_flight)

    def can_send(self) -> bool:
        return (
            self.state is ConnectionState.READY
            and not self._reauthenticating
            and len(self._in_flight) < self._config.max_in_flight
        )

    def maybe_reauthenticate(self, now_ms: int) -> bool:
        """Begin KIP-368 re-authentication when the session is near its end; returns whether it began."""
        due = self._reauth_at_ms
        if due is None or now_ms < due or self.state is not ConnectionState.READY or self._reauthenticating:
            return False
        sasl = self._config.security.sasl
        assert sasl is not None
        self._reauth_at_ms = None
        self._reauthenticating = True
        self._send_internal(_SASL_HANDSHAKE, min(1, self.api_versions[_SASL_HANDSHAKE.key][1]),
                            _SASL_HANDSHAKE.Request(mechanism=sasl.mechanism), now_ms)  # fmt: skip
        return True

    def closed_hint(self) -> str:
        """Why a peer may close a connection before it is ready: most often a listener of another security
        protocol (it drops the bytes it cannot read). Empty once ready."""
        protocol = self._config.security.protocol.text
        if self.state is ConnectionState.TLS_HANDSHAKE:
            return (f" during the TLS handshake (security.protocol={protocol}): is it a TLS listener (SSL or "
                    f"SASL_SSL)?")  # fmt: skip
        if self.state is ConnectionState.NEGOTIATING:
            return (f" before answering ApiVersions (security.protocol={protocol}): is it a TLS or SASL listener of "
                    f"another protocol?")  # fmt: skip
        if self.state is ConnectionState.AUTHENTICATING:
            return f" during SASL authentication (security.protocol={protocol})"
        return ""

    # --- versions ----------------------------------------------------------------------------------------

    def version_for(self, api: CompiledApi, max_version: int | None = None) -> int:
        """The highest version of ``api`` both sides support (at most ``max_version``)."""
        broker = self.api_versions.get(api.key)
        if broker is None:
            raise UnsupportedVersionError(f"broker {self.address} does not serve {api.name}")
        low = max(broker[0], api.min_version)
        high = min(broker[1], api.max_version)
        if max_version is not None:
            high = min(high, max_version)
        if high < low:
            raise UnsupportedVersionError(
                f"broker {self.address} serves {api.name} v{broker[0]}-{broker[1]}; this client sends "
                f"v{api.min_version}-{api.max_version if max_version is None else min(max_version, api.max_version)}"
            )
        return high

    def supports(self, api: CompiledApi) -> bool:
        return api.key in self.api_versions

    # --- sending -----------------------------------------------------------------------------------------

    def send(
        self,
        tag: Any,
        api: CompiledApi,
        version: int,
        body: Any,
        now_ms: int,
        *,
        expect_response: bool = True,
        timeout_ms: int | None = None,
    ) -> None:
        """Queue a request; raises KafkaProtocolError when ``body`` cannot be encoded at ``version`` (nothing
        is queued then, and the connection stays usable)."""
        if not self.can_send() or self._codec is None:
            raise InvalidTransition(
                f"node {self.node_id} cannot send now ({self.state.value}, {self.in_flight} in flight)"
            )
        try:
            corr, wire = self._codec.send_request_parts(api, version, body, expect_response)
        except (LocalProtocolError, TypeError, ValueError, OverflowError, struct.error) as e:
            # a body that does not fit the version (or the schema): fail this request, keep the connection
            raise KafkaProtocolError(f"cannot encode {api.name} v{version}: {e}") from None
        self._queue(wire)
        if expect_response:
            timeout = self._config.request_timeout_ms if timeout_ms is None else timeout_ms
            self._in_flight[corr] = InFlight(tag, api, version, now_ms, now_ms + timeout)

    def _send_api_versions(self, version: int, now_ms: int) -> None:
        assert self._codec is not None
        body = _API_VERSIONS.Request(
            client_software_name=CLIENT_SOFTWARE_NAME if version >= 3 else "",
            client_software_version=CLIENT_SOFTWARE_VERSION if version >= 3 else "",
        )
        self._negotiation_corr = self._send_internal(_API_VERSIONS, version, body, now_ms)
        self._negotiation_version = version

    def _send_internal(self, api: CompiledApi, version: int, body: Any, now_ms: int) -> int:
        """A request of the connection's own (negotiation, authentication): in flight with no tag."""
        assert self._codec is not None
        corr, wire = self._codec.send_request_parts(api, version, body)
        self._queue(wire)
        self._in_flight[corr] = InFlight(None, api, version, now_ms, now_ms + self._config.request_timeout_ms)
        return corr

    def _queue(self, wire: list[bytes]) -> None:
        """Queue a request's pieces for the socket. Large pieces (a Produce request's record batches) are queued
        as views of their own buffers, not copied: ``sendmsg`` writes them from there; the small pieces between
        them (headers, lengths) are joined into one chunk each, so a request of many partitions still takes
        few of ``sendmsg``'s buffers."""
        if self._tls is None:
            out = self._out
            small: list[bytes] = []
            for part in wire:
                if len(part) < _JOIN_BELOW:
                    small.append(part)
                    continue
                if small:
                    out.append(memoryview(b"".join(small)))
                    small = []
                out.append(memoryview(part))
            if small:
                out.append(memoryview(b"".join(small)))
            return
        try:
            self._tls.encrypt(wire)
        except TlsError as e:
            raise KafkaProtocolError(f"cannot encrypt a request to {self.address}: {e}") from None
        self._take_tls_output()

    def _take_tls_output(self) -> None:
        assert self._tls is not None
        data = self._tls.data_to_send()
        if data:
            self._out.append(memoryview(data))

    def has_output(self) -> bool:
        return bool(self._out)

    def output_chunks(self) -> list[memoryview]:
        """The bytes waiting for the socket, in order (for one ``sendmsg``)."""
        out = self._out
        if len(out) <= _MAX_CHUNKS_PER_SEND:
            return list(out)
        return [out[i] for i in range(_MAX_CHUNKS_PER_SEND)]

    def on_sent(self, n: int) -> None:
        """The socket accepted ``n`` bytes of ``output_chunks``."""
        out = self._out
        while n > 0:
            head = out[0]
            if n >= len(head):
                n -= len(head)
                out.popleft()
            else:
                out[0] = head[n:]
                n = 0

    # --- receiving ----------------------------------------------------------------------------------------

    def on_data(self, data: bytes | bytearray | memoryview, now_ms: int) -> DataResult:
        """Bytes from the socket: decode every complete response. Negotiation is handled here; responses to
        the shell's requests come back as completions. A broken peer yields a ``failure`` reason, after which
        the shell must close the socket and call ``disconnected``."""
        codec = self._codec_for_data()
        if self._tls is not None:
            return self._tls_received(memoryview(data), now_ms)
        codec.receive_data(data)
        return self._responses(now_ms)

    def recv_buffer(self) -> memoryview:
        """Where the shell's next socket read should put its bytes (``recv_into``); then call ``on_received``.
        A large response is read straight into a buffer of its own, so its bytes are copied once."""
        codec = self._codec_for_data()
        if self._tls is not None:
            return memoryview(self._tls_buffer)
        return codec.recv_buffer()

    def on_received(self, n: int, now_ms: int) -> DataResult:
        """``n`` bytes were read into ``recv_buffer()``: as ``on_data``."""
        codec = self._codec_for_data()
        if self._tls is not None:
            return self._tls_received(memoryview(self._tls_buffer)[:n], now_ms)
        codec.advance(n)
        return self._responses(now_ms)

    def _tls_received(self, data: bytes | memoryview, now_ms: int) -> DataResult:
        tls = self._tls
        assert tls is not None and self._codec is not None
        handshaking = self.state is ConnectionState.TLS_HANDSHAKE
        try:
            plain = tls.receive(data)
        except TlsError as e:
            self._take_tls_output()
            return DataResult([], tls_failure(self.address, str(e), handshaking))
        except TlsClosed as e:
            # what came before the close_notify may be the answer that explains it (a refused authentication)
            self._codec.receive_data(e.plaintext)
            result = self._responses(now_ms)
            if result.failure is not None:
                return result
            return DataResult(result.completions, f"{self.address} closed the TLS session{self.closed_hint()}")
        self._take_tls_output()
        if handshaking and tls.established:
            self._transition_to(ConnectionState.NEGOTIATING)
            self._send_api_versions(_FIRST_API_VERSIONS_VERSION, now_ms)
        if plain:
            self._codec.receive_data(plain)  # copies: the plaintext view is the session's buffer
        return self._responses(now_ms)

    def _codec_for_data(self) -> ClientConnection:
        codec = self._codec
        if codec is None or self.state in (ConnectionState.DISCONNECTED, ConnectionState.CONNECTING):
            raise InvalidTransition(f"node {self.node_id}: data received while {self.state.value}")
        return codec

    def _responses(self, now_ms: int) -> DataResult:
        codec = self._codec
        assert codec is not None
        done: list[Completion] = []
        while True:
            try:
                got = codec.next_response()
            except PeerProtocolError as e:
                if self.state is ConnectionState.NEGOTIATING and self._negotiation_version > 0:
                    # a broker without our ApiVersions version answers in v0 format: ask again at v0
                    self._in_flight.pop(self._negotiation_corr, None)
                    self._send_api_versions(0, now_ms)
                    continue
                return DataResult(done, f"malformed response from {self.address}: {e}")
            if got is None:
                return DataResult(done)
            corr, _api, version, body = got
            flight = self._in_flight.pop(corr, None)
            if flight is None:
                return DataResult(
                    done, f"{self.address} answered correlation id {corr}, which is not in flight"
                )
            if flight.tag is None:
                if flight.api is _API_VERSIONS:
                    failure = self._on_api_versions(body, now_ms)
                    fatal = False
                else:
                    failure = self._on_sasl(flight.api, body, now_ms)
                    fatal = failure is not None
                if failure is not None:
                    return DataResult(done, failure, fatal)
                continue
            done.append(Completion(flight.tag, version, body))

    def _on_api_versions(self, body: Any, now_ms: int) -> str | None:
        code = body.error_code
        if code == ErrorCode.UNSUPPORTED_VERSION and self._negotiation_version > 0:
            listed = [k for k in body.api_keys if k.api_key == _API_VERSIONS.key]
            retry = min(listed[0].max_version, _API_VERSIONS.max_version) if listed else 0
            retry = max(0, min(retry, self._negotiation_version - 1))
            self._send_api_versions(retry, now_ms)
            return None
        if code != ErrorCode.NONE:
            return f"{self.address} refused ApiVersions v{self._negotiation_version}: {describe(code)} (error {code})"
        self.api_versions = {k.api_key: (k.min_version, k.max_version) for k in body.api_keys}
        self.finalized_features = {f.name: f.max_version_level for f in getattr(body, "finalized_features", None) or ()}
        sasl = self._config.security.sasl
        if sasl is None:
            self._ready()
            return None
        self._transition_to(ConnectionState.AUTHENTICATING)
        if not self.supports(_SASL_HANDSHAKE) or not self.supports(_SASL_AUTHENTICATE):
            return self._auth_failed("the broker does not serve SaslHandshake and SaslAuthenticate (is it a SASL listener?)")
        self._send_internal(_SASL_HANDSHAKE, min(1, self.api_versions[_SASL_HANDSHAKE.key][1]),
                            _SASL_HANDSHAKE.Request(mechanism=sasl.mechanism), now_ms)  # fmt: skip
        return None

    def _ready(self) -> None:
        self._transition_to(ConnectionState.READY)
        self.failures = 0
        self.last_failure = None

    def _auth_failed(self, why: str) -> str:
        sasl = self._config.security.sasl
        assert sasl is not None
        user = self._sasl.user if self._sasl is not None else sasl.username  # OAUTHBEARER: the token's
        return f"authentication failed for user {user} with {sasl.mechanism}: {why}"

    def _on_sasl(self, api: CompiledApi, body: Any, now_ms: int) -> str | None:
        sasl = self._config.security.sasl
        assert sasl is not None
        code = body.error_code
        if api is _SASL_HANDSHAKE:
            if code == ErrorCode.UNSUPPORTED_SASL_MECHANISM:
                return self._auth_failed(
                    f"the broker does not enable {sasl.mechanism} (it enables {', '.join(body.mechanisms) or 'none'})"
                )
            if code != ErrorCode.NONE:
                return self._auth_failed(f"SaslHandshake refused: {describe(code)} (error {code})")
            if self._nonce is None:
                raise InvalidTransition("SASL needs the nonce source the shell provides")
            try:
                self._sasl = SaslExchange(sasl, self._nonce)
            except SaslAuthenticationError as e:  # OAUTHBEARER: no token to present
                return self._auth_failed(str(e))
            self._sasl_version = self.version_for(_SASL_AUTHENTICATE, 2)
            self._send_authenticate(self._sasl.first_token(), now_ms)
            return None
        if code != ErrorCode.NONE:
            return self._auth_failed(getattr(body, "error_message", None) or f"{describe(code)} (error {code})")
        assert self._sasl is not None
        try:
            token = self._sasl.next_token(bytes(body.auth_bytes))
        except SaslAuthenticationError as e:
            return self._auth_failed(str(e))
        if token is not None:
            self._send_authenticate(token, now_ms)
            return None
        self.session_lifetime_ms = getattr(body, "session_lifetime_ms", 0) or 0
        if self.session_lifetime_ms > 0:
            self._reauth_at_ms = now_ms + self.session_lifetime_ms * 85 // 100
        self._sasl = None
        if self._reauthenticating:
            self._reauthenticating = False
            self.reauthentications += 1
        else:
            self._ready()
        return None

    def _send_authenticate(self, token: bytes, now_ms: int) -> None:
        self._send_internal(_SASL_AUTHENTICATE, self._sasl_version, _SASL_AUTHENTICATE.Request(auth_bytes=token), now_ms)

    # --- time ----------------------------------------------------------------------------------------------

    def check_timeouts(self, now_ms: int) -> tuple[str, Any] | None:
        """``(reason, tag)`` when the connection must be closed because connecting or a request took too
        long (``tag`` is the timed-out request's, None for the connection itself); None otherwise. Responses
        come in order, so one overdue request means the connection is stuck: Java closes it too."""
        if self.state in (ConnectionState.CONNECTING, ConnectionState.TLS_HANDSHAKE):
            if now_ms >= self._setup_deadline_ms:
                return (
                    f"no connection to {self.address} within "
                    f"socket.connection.setup.timeout.ms={self._config.connection_setup_timeout_ms}",
                    None,
                )
            return None
        for f in self._in_flight.values():
            if now_ms >= f.deadline_ms:
                what = f.api.name if f.tag is not None else f"{f.api.name} ({_SETUP_STEP[f.api.name]})"
                return (
                    f"{what} to {self.address} got no response within {f.deadline_ms - f.sent_ms} ms",
                    f.tag,
                )
        return None

    def next_deadline_ms(self) -> int | None:
        """When this connection next needs attention without any I/O: a timeout, or the end of the backoff."""
        if self.state is ConnectionState.DISCONNECTED:
            return self.reconnect_at_ms
        if self.state in (ConnectionState.CONNECTING, ConnectionState.TLS_HANDSHAKE):
            return self._setup_deadline_ms
        due = [f.deadline_ms for f in self._in_flight.values()]
        if self._reauth_at_ms is not None:
            due.append(self._reauth_at_ms)
        return min(due) if due else None


def tls_failure(address: str, reason: str, handshaking: bool) -> str:
    """The TLS error in the words a user acts on: the broker's certificate is not trusted, it is for another host
    name, or the peer does not speak TLS."""
    low = reason.lower()
    if "hostname mismatch" in low or "ip address mismatch" in low:
        cause = f"hostname mismatch: the broker's certificate is not valid for this address ({reason})"
    elif "certificate verify failed" in low:
        cause = f"certificate not trusted: {reason} (ssl.ca.location / ssl.truststore.location names the CA to trust)"
    elif "wrong version number" in low or "record layer failure" in low or "packet length too long" in low:
        cause = f"the peer does not speak TLS ({reason}): is it a PLAINTEXT or SASL_PLAINTEXT listener?"
    else:
        cause = reason
    return f"{address}: TLS {'handshake ' if handshaking else ''}failed: {cause}"
