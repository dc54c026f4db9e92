"""The Admin client's connections: the bootstrap broker, others it is sent to (leaders, coordinators, the
controller), and closing them."""

from __future__ import annotations

from collections.abc import Mapping
from types import TracebackType
from typing import Any, Self

from groupstream.client.config import AdminConfig
from groupstream.client.errors import KafkaConnectionError
from groupstream.client.net.blocking import BlockingConnection


class AdminBase:
    def __init__(self, config: Mapping[str, Any] | None = None, **aliases: Any) -> None:
        self.config = AdminConfig.from_mapping(config, aliases)
        self._others: dict[str, BlockingConnection] = {}  # connections to other brokers (coordinators)
        self._conn = self._connect()

    def _connect(self) -> BlockingConnection:
        failures: list[KafkaConnectionError] = []
        for host, port in self.config.bootstrap_servers:
            try:
                return BlockingConnection(
                    host,
                    port,
                    client_id=self.config.client_id,
                    timeout_s=self.config.request_timeout_ms / 1000,
                    connect_timeout_s=self.config.connection_setup_timeout_ms / 1000,
                )
            except KafkaConnectionError as e:
                failures.append(e)
        if len(failures) == 1:
            raise failures[0]
        raise KafkaConnectionError(
            ",".join(f.address for f in failures),
            "no bootstrap server reachable (" + "; ".join(str(f) for f in failures) + ")",
        )

    @property
    def connection(self) -> BlockingConnection:
        """The broker connection, for the lite produce/fetch helpers (valid while this Admin is open)."""
        return self._conn

    def _timeout_ms(self) -> int:
        return self.config.request_timeout_ms

    def _request(self, conn: BlockingConnection, api: str, body: Any, version: int) -> Any:
        return conn.request(api, body, version)

    def _conn_to(self, host: str, port: int) -> BlockingConnection:
        """The bootstrap connection when it is that broker, else one more connection kept until close()."""
        if (host, port) == (self._conn.host, self._conn.port):
            return self._conn
        key = f"{host}:{port}"
        conn = self._others.get(key)
        if conn is None or conn.closed:
            conn = BlockingConnection(
                host,
                port,
                client_id=self.config.client_id,
                timeout_s=self.config.request_timeout_ms / 1000,
                connect_timeout_s=self.config.connection_setup_timeout_ms / 1000,
            )
            self._others[key] = conn
        return conn

    def _drop(self, address: str) -> None:
        conn = self._others.pop(address, None)
        if conn is not None:
            conn.close()

    # --- lifecycle ------------------------------------------------------------------------------------

    def close(self) -> None:
        self._conn.close()
        for conn in self._others.values():
            conn.close()
        self._others.clear()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Admin({self._conn.address})"
