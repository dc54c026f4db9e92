"""A blocking, one-request-at-a-time connection to one broker, for the Admin, the CLI and tests.

It negotiates versions the way Kafka clients do: ApiVersions first at v3; a broker too old for v3 answers
with a v0-format body carrying UNSUPPORTED_VERSION (35), which cannot be decoded as v3, so on either signal we
ask again at v0 on the same socket. Every later request goes at the highest version both sides know.

The threaded client of a later issue drives `ClientConnection` from its own network thread and does not use
this class; keeping it small and synchronous is deliberate.
"""

from __future__ import annotations

import socket
from collections.abc import Mapping
from types import TracebackType
from typing import Any

from groupstream.client.errors import (
    KafkaConnectionError,
    KafkaError,
    KafkaProtocolError,
    UnsupportedVersionError,
)
from groupstream.protocol.compiler import CompiledApi
from groupstream.protocol.connection import ClientConnection
from groupstream.protocol.error_codes import ErrorCode
from groupstream.protocol.errors import ProtocolError
from groupstream.protocol.framing import DEFAULT_MAX_FRAME
from groupstream.protocol.messages import APIS, by_name

CLIENT_SOFTWARE_NAME = "groupstream"
CLIENT_SOFTWARE_VERSION = "0.1.0"
_API_VERSIONS = "ApiVersions"
_FIRST_API_VERSIONS_VERSION = 3
_RECV_SIZE = 256 * 1024


def parse_bootstrap(servers: str) -> list[tuple[str, int]]:
    """``host:port[,host:port...]`` (IPv6 hosts in brackets) into pairs; raises ValueError naming the bad one."""
    out: list[tuple[str, int]] = []
    for item in servers.split(","):
        item = item.strip()
        if not item:
            continue
        host, sep, port_s = item.rpartition(":")
        if not sep or not host or not port_s.isdigit() or not 0 < int(port_s) < 65536:
            raise ValueError(f"bootstrap server {item!r} is not HOST:PORT")
        out.append((host.strip("[]"), int(port_s)))
    if not out:
        raise ValueError("no bootstrap servers given")
    return out


class BlockingConnection:
    """One socket, requests sent and answered one at a time. Not thread-safe."""

    def __init__(
        self,
        host: str,
        port: int,
        client_id: str = "groupstream",
        timeout_s: float = 30.0,
        *,
        connect_timeout_s: float | None = None,
        max_frame: int = DEFAULT_MAX_FRAME,
    ) -> None:
        self.host = host
        self.port = port
        self.timeout_s = timeout_s
        self.connect_timeout_s = timeout_s if connect_timeout_s is None else connect_timeout_s
        self._client_id = client_id
        self._max_frame = max_frame
        self._conn = ClientConnection(APIS, client_id, max_frame)
        self._sock: socket.socket | None = self._connect()
        try:
            self.broker_versions: dict[int, tuple[int, int]] = self._negotiate()
        except BaseException:
            self.close()
            raise

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    # --- versions -------------------------------------------------------------------------------------

    def version_for(self, api_name: str, max_version: int | None = None) -> int:
        """The highest version of ``api_name`` both sides support (and at most ``max_version``)."""
        api = _api(api_name)
        broker = self.broker_versions.get(api.key)
        if broker is None:
            raise UnsupportedVersionError(f"broker {self.address} does not serve {api.name}")
        low = max(broker[0], api.min_version)
        high = min(broker[1], api.max_version)
        if max_version is not None:
            high = min(high, max_version)
        if high < low:
            raise UnsupportedVersionError(
                f"broker {self.address} serves {api.name} v{broker[0]}-{broker[1]}; "
                f"this client knows v{api.min_version}-{api.max_version}"
                + (f" (at most v{max_version} here)" if max_version is not None else "")
            )
        return high

    def supports(self, api_name: str) -> bool:
        return _api(api_name).key in self.broker_versions

    # --- requests -------------------------------------------------------------------------------------

    def request(
        self,
        api_name: str,
        body: Mapping[str, Any] | Any = None,
        version: int | None = None,
        *,
        expect_response: bool = True,
        timeout_s: float | None = None,
    ) -> Any:
        """Send one request and wait for its decoded response body.

        ``body`` is the API's Request named tuple or a mapping of its field names; fields a version lacks keep
        their defaults. With ``expect_response=False`` (Produce with acks=0) nothing is awaited and None is
        returned.
        """
        api = _api(api_name)
        if version is None:
            version = self.version_for(api_name)
        return self._roundtrip(api, version, body, expect_response, timeout_s)

    def _roundtrip(
        self, api: CompiledApi, version: int, body: Any, expect_response: bool, timeout_s: float | None
    ) -> Any:
        if body is None:
            body = api.Request()
        elif isinstance(body, Mapping):
            body = api.Request(**body)
        try:
            corr, wire = self._conn.send_request(api, version, body, expect_response)
        except ProtocolError as e:
            raise KafkaProtocolError(f"cannot encode {api.name} v{version}: {e}") from None
        self._send(wire, api.name)
        if not expect_response:
            return None
        while True:
            try:
                got = self._conn.next_response()
            except ProtocolError as e:
                self.close()
                raise KafkaProtocolError(f"bad {api.name} response from {self.address}: {e}") from None
            if got is not None:
                got_corr, _, _, response = got
                if got_corr != corr:  # cannot happen with one request in flight, unless the peer is broken
                    self.close()
                    raise KafkaProtocolError(f"{self.address} answered correlation id {got_corr}, not {corr}")
                return response
            self._receive(api.name, timeout_s)

    # --- ApiVersions ------------------------------------------------------------------------------------

    def _negotiate(self) -> dict[int, tuple[int, int]]:
        api = _api(_API_VERSIONS)
        v3 = api.Request(client_software_name=CLIENT_SOFTWARE_NAME, client_software_version=CLIENT_SOFTWARE_VERSION)
        try:
            resp = self._roundtrip(api, _FIRST_API_VERSIONS_VERSION, v3, True, None)
        except KafkaProtocolError:
            # A broker without v3 answers in v0 format, which does not decode as v3. The failed decode closed
            # the socket, so ask again at v0 on a fresh one.
            self._sock = self._connect()
            self._conn = ClientConnection(APIS, self._client_id, self._max_frame)
            resp = None
        if resp is None or resp.error_code == ErrorCode.UNSUPPORTED_VERSION:
            resp = self._roundtrip(api, 0, api.Request(), True, None)
        if resp.error_code != ErrorCode.NONE:
            self.close()
            raise KafkaProtocolError(f"{self.address} refused ApiVersions: {KafkaError(resp.error_code)}")
        return {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}

    # --- socket ---------------------------------------------------------------------------------------

    def _connect(self) -> socket.socket:
        try:
            sock = socket.create_connection((self.host, self.port), timeout=self.connect_timeout_s)
        except TimeoutError:
            raise KafkaConnectionError(self.address, f"no connection within {self.connect_timeout_s:g}s") from None
        except ConnectionRefusedError:
            raise KafkaConnectionError(self.address, "connection refused (is a broker running there?)") from None
        except socket.gaierror as e:
            raise KafkaConnectionError(self.address, f"cannot resolve host: {e.strerror}") from None
        except OSError as e:
            raise KafkaConnectionError(self.address, f"cannot connect: {e.strerror or e}") from None
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock

    def _live_socket(self) -> socket.socket:
        if self._sock is None:
            raise KafkaConnectionError(self.address, "connection is closed")
        return self._sock

    def _send(self, wire: bytes, what: str) -> None:
        sock = self._live_socket()
        try:
            sock.settimeout(self.timeout_s)
            sock.sendall(wire)
        except TimeoutError:
            self.close()
            raise KafkaConnectionError(self.address, f"timed out sending {what}") from None
        except OSError as e:
            self.close()
            raise KafkaConnectionError(self.address, f"connection lost sending {what}: {e.strerror or e}") from None

    def _receive(self, what: str, timeout_s: float | None) -> None:
        sock = self._live_socket()
        timeout = self.timeout_s if timeout_s is None else timeout_s
        try:
            sock.settimeout(timeout)
            data = sock.recv(_RECV_SIZE)
        except TimeoutError:
            self.close()
            raise KafkaConnectionError(self.address, f"no {what} response within {timeout:g}s") from None
        except OSError as e:
            self.close()
            raise KafkaConnectionError(self.address, f"connection lost awaiting {what}: {e.strerror or e}") from None
        if not data:
            self.close()
            raise KafkaConnectionError(self.address, f"connection closed by the broker awaiting {what}")
        self._conn.receive_data(data)

    def close(self) -> None:
        sock, self._sock = self._sock, None
        if sock is not None:
            sock.close()

    @property
    def closed(self) -> bool:
        return self._sock is None

    def __enter__(self) -> BlockingConnection:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"BlockingConnection({self.address}{', closed' if self.closed else ''})"


def _api(name: str) -> CompiledApi:
    try:
        return by_name(name)
    except KeyError:
        raise ValueError(f"unknown API {name!r}") from None
