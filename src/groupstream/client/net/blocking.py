"""``BlockingConnection``: a `BrokerChannel` of the network core under its old name and timeouts in seconds, for
the Spark executor until it reads through the consumer's fetch path (issue 14); then this module goes.

It used to be a second wire client (its own socket, framing and ApiVersions negotiation); connecting,
negotiation, timeouts and errors are now `NetworkClient`'s.
"""

from __future__ import annotations

from groupstream.client.net.sync_client import BrokerChannel
from groupstream.protocol.framing import DEFAULT_MAX_FRAME


class BlockingConnection(BrokerChannel):
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
        super().__init__(
            host, port, client_id=client_id, request_timeout_ms=max(1, int(timeout_s * 1000)),
            connection_setup_timeout_ms=None if connect_timeout_s is None else max(1, int(connect_timeout_s * 1000)),
            max_response_bytes=max_frame,
        )  # fmt: skip
