"""The broker side of a `NodeConnection`, sans-IO: read the requests it queued, write answers back into it.

Built on the real codec (`ServerConnection`), so the pure tests exercise the bytes a broker would see and send.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from groupstream.client.net.config import NetworkConfig
from groupstream.client.net.node_connection import DataResult, NodeConnection
from groupstream.protocol.compiler import CompiledApi
from groupstream.protocol.connection import Request, ServerConnection, UnsupportedRequest
from groupstream.protocol.messages import APIS, by_name

API_VERSIONS = by_name("ApiVersions")
METADATA = by_name("Metadata")


def config(**overrides: Any) -> NetworkConfig:
    base: dict[str, Any] = {"bootstrap_servers": (("127.0.0.1", 9092),), "client_id": "test"}
    base.update(overrides)
    return NetworkConfig(**base)


def all_versions() -> list[Any]:
    R = API_VERSIONS.Response
    return [
        R.ApiVersion(api_key=k, min_version=a.min_version, max_version=a.max_version) for k, a in APIS.items()
    ]


@dataclass
class WireBroker:
    """Decodes what the connection sends and encodes replies into it."""

    conn: NodeConnection
    server: ServerConnection = field(default_factory=lambda: ServerConnection(APIS))

    def requests(self) -> list[Request | UnsupportedRequest]:
        out: list[Request | UnsupportedRequest] = []
        for chunk in self.conn.output_chunks():
            self.server.receive_data(chunk)
            self.conn.on_sent(len(chunk))
        while (event := self.server.next_event()) is not None:
            out.append(event)
        return out

    def one_request(self) -> Request:
        got = self.requests()
        assert len(got) == 1 and isinstance(got[0], Request), got
        return got[0]

    def reply(self, request: Request, body: Any, now_ms: int, *, version: int | None = None) -> DataResult:
        return self.reply_raw(request.api, request.version if version is None else version,
                              request.header.correlation_id, body, now_ms)  # fmt: skip

    def reply_raw(self, api: CompiledApi, version: int, corr: int, body: Any, now_ms: int) -> DataResult:
        data = b"".join(ServerConnection.encode_response(api, version, corr, body))
        return self.conn.on_data(data, now_ms)

    def negotiate(self, now_ms: int, keys: list[Any] | None = None) -> None:
        """Answer the ApiVersions request the connection sends once connected."""
        req = self.one_request()
        assert req.api.name == "ApiVersions"
        body = API_VERSIONS.Response(error_code=0, api_keys=all_versions() if keys is None else keys)
        result = self.reply(req, body, now_ms)
        assert result.failure is None and not result.completions


def ready_connection(now_ms: int = 0, **cfg: Any) -> tuple[NodeConnection, WireBroker]:
    conn = NodeConnection(1, "127.0.0.1", 9092, config(**cfg))
    conn.connect_started(now_ms)
    conn.connect_established(now_ms)
    wire = WireBroker(conn)
    wire.negotiate(now_ms)
    return conn, wire
