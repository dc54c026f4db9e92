"""The Admin client's channels: one `SyncClient` of the network core (connections, version negotiation and
metadata shared with the Producer and Consumer), the bootstrap broker it reached first, and channels to the
other brokers calls are sent to (leaders, coordinators, the controller)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from groupstream.client.closing import ClosesOnExit
from groupstream.client.net.config import NETWORK_PROPERTIES, NetworkConfig, PropertyReader
from groupstream.client.net.sync_client import NodeChannel, SyncClient


class AdminBase(ClosesOnExit):
    """Takes the network core's properties under Kafka's names (``bootstrap.servers``, ``client.id``,
    ``request.timeout.ms``, ``socket.connection.setup.timeout.ms``, the backoffs, ...), as keyword aliases too."""

    def __init__(self, config: Mapping[str, Any] | None = None, **aliases: Any) -> None:
        reader = PropertyReader({**(config or {}), **aliases}, NETWORK_PROPERTIES, what="admin property")
        self.config = NetworkConfig.read(reader, "groupstream-admin")
        self._client = SyncClient(self.config)
        try:
            self._conn = self._client.bootstrap()
        except BaseException:
            self._client.close()
            raise

    @property
    def connection(self) -> NodeChannel:
        """The channel to the bootstrap broker (valid while this Admin is open)."""
        return self._conn

    def _timeout_ms(self) -> int:
        return self.config.request_timeout_ms

    def _request(self, conn: NodeChannel, api: str, body: Any, version: int) -> Any:
        return conn.request(api, body, version)

    def _conn_to(self, host: str, port: int) -> NodeChannel:
        """The channel to the broker at ``host:port`` (the bootstrap one when it is that broker)."""
        if (host, port) == (self._conn.host, self._conn.port):
            return self._conn
        return self._client.node_at(host, port)

    # --- lifecycle ------------------------------------------------------------------------------------

    def close(self) -> None:
        self._client.close()

    def __repr__(self) -> str:
        return f"Admin({self._conn.address})"
