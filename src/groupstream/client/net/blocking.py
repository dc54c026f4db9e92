"""``BlockingConnection``: a `NodeChannel` of its own `SyncClient` to one broker, for the Spark executor until it
reads through the consumer's fetch path (issue 14); then this module goes.

It used to be a second wire client (its own socket, framing and ApiVersions negotiation); it is now only a
constructor over the network core: connecting, negotiation, timeouts and errors are `NetworkClient`'s.
"""

from __future__ import annotations

from types import TracebackType

from groupstream.client.net.config import NetworkConfig
from groupstream.client.net.sync_client import NodeChannel, SyncClient
from groupstream.protocol.framing import DEFAULT_MAX_FRAME


class BlockingConnection(NodeChannel):
    """A channel to the broker at ``host:port`` (connected and negotiated on construction, else
    `KafkaConnectionError`); ``close`` closes its client."""

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
        setup_s = timeout_s if connect_timeout_s is None else connect_timeout_s
        config = NetworkConfig(
            bootstrap_servers=((host, port),),
            client_id=client_id,
            request_timeout_ms=max(1, int(timeout_s * 1000)),
            connection_setup_timeout_ms=max(1, int(setup_s * 1000)),
            max_response_bytes=max_frame,
        )
        client = SyncClient(config)
        try:
            node_id = client.bootstrap().node_id
        except BaseException:
            client.close()
            raise
        super().__init__(client, node_id)

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> BlockingConnection:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
