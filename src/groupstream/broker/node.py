"""One broker node: the catalog of logs, the server socket, and the services handlers share."""

from __future__ import annotations

import asyncio
import logging
import secrets
import ssl
import time
import uuid
from collections.abc import Callable
from concurrent.futures import Executor, ThreadPoolExecutor
from typing import Any, cast

from groupstream.broker.authorizer import Authorizer
from groupstream.broker.cleaner import LogCleaner
from groupstream.broker.config import BrokerConfig, ConfigError, ListenerConfig
from groupstream.broker.console import BrokerConsole
from groupstream.broker.coordinator_runtime import CoordinatorRuntime, ShardFactory
from groupstream.broker.coordinator_wiring import CatalogTopics, default_shard_factory
from groupstream.broker.descriptors import nofile_limit, open_descriptors
from groupstream.broker.flusher import Flusher
from groupstream.broker.handlers import Handler, load_all
from groupstream.broker.http import HttpServer
from groupstream.broker.listener import Acceptor, ConnectionLimits, ConnectionTable
from groupstream.broker.metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from groupstream.broker.metrics import BrokerMetrics
from groupstream.broker.offsets_topic import OFFSETS_TOPIC, ensure_offsets_topic
from groupstream.broker.producer_ids import ProducerIdAllocator
from groupstream.broker.purgatory import FetchPurgatory
from groupstream.broker.rate_limited_log import RateLimitedLog
from groupstream.broker.security_handlers import SECURITY_HANDLERS
from groupstream.broker.server import ANONYMOUS, KafkaConnection
from groupstream.broker.transaction_wiring import TransactionCoordinator
from groupstream.coordinator.offsets import coordinator_log_records
from groupstream.protocol.compiler import CompiledApi
from groupstream.protocol.messages import APIS
from groupstream.security.acl_store import AclFileError
from groupstream.security.credentials import CredentialFileError, CredentialStore
from groupstream.security.tls import TlsConfigError, server_context
from groupstream.storage.catalog import Catalog
from groupstream.storage.config import LogConfig
from groupstream.storage.dir_lock import DataDirLock, DataDirLockedError
from groupstream.transaction.shard import TransactionCoordinatorConfig

log = logging.getLogger("groupstream.broker")


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class Broker:
    """Owns everything a handler may touch; handlers run on the event loop thread only."""

    def __init__(self, config: BrokerConfig, shard_factory: ShardFactory | None = None) -> None:
        """``shard_factory`` replaces the real coordinator shard (tests script their own)."""
        self.config = config
        self.listeners: list[ListenerConfig] = config.resolve_listeners()
        self.apis: dict[int, CompiledApi] = APIS
        self.handlers: dict[int, Handler] = {**load_all(), **SECURITY_HANDLERS}
        self.connections = ConnectionTable()
        self.purgatory = FetchPurgatory()
        try:
            self.default_log_config = LogConfig.from_properties(config.topic_defaults)
        except ValueError as e:
            raise ConfigError(str(e)) from None
        config.data_dir.mkdir(parents=True, exist_ok=True)
        try:
            self.dir_lock = DataDirLock(config.data_dir).acquire()
        except DataDirLockedError as e:
            raise ConfigError(str(e)) from None
        except OSError as e:
            raise ConfigError(f"cannot lock data dir {config.data_dir}: {e.strerror or e}") from None
        self.flusher = Flusher(self.default_log_config.flush_interval_ms)
        try:
            self.cluster_id = self._load_cluster_id()
            self.credentials = self._load_credentials()
            self.authorizer = self._load_authorizer()
            self.producer_ids = ProducerIdAllocator(config.data_dir)
            self.catalog = Catalog(config.data_dir, self.default_log_config, wall_clock_ms())
        except BaseException:
            self.dir_lock.release()
            raise
        try:
            partitions = ensure_offsets_topic(
                self.catalog, config.offsets_topic_num_partitions, config.offsets_topic_segment_bytes
            )
        except BaseException:
            self.catalog.close()
            self.dir_lock.release()
            raise
        self.coordinator = CoordinatorRuntime(
            self, OFFSETS_TOPIC, partitions, shard_factory or default_shard_factory(config),
            metadata=CatalogTopics(self.catalog), decode=coordinator_log_records,
        )
        try:
            self.transactions = TransactionCoordinator(
                self, config.transaction_state_num_partitions, config.transaction_state_segment_bytes,
                TransactionCoordinatorConfig(config.transaction_max_timeout_ms, config.transactional_id_expiration_ms,
                                             config.transaction_cleanup_interval_ms, config.transaction_version),
                partitions,
            )
        except BaseException:
            self.catalog.close()
            self.dir_lock.release()
            raise
        self.transactions.on_offsets_marker = self._offsets_marker
        self.cleaner = LogCleaner(self.catalog, self.now_ms, config.log_cleaner_backoff_ms)
        # The peer of the request being dispatched, as Kafka reports client hosts ("/127.0.0.1"); the server
        # sets it before each handler call (handlers run one at a time on the loop).
        self.current_client_host = "/?"
        self.current_principal = ANONYMOUS  # likewise, the principal of the client being served
        self.sasl_secret = secrets.token_bytes(32)  # the stand-in SCRAM salts of unknown users derive from it
        self.auth_clock: Callable[[], int] = wall_clock_ms  # SASL session lifetimes (tests set their own)
        self._auth_executor: ThreadPoolExecutor | None = None
        self.credentials_lock = asyncio.Lock()  # AlterUserScramCredentials: one change to the file at a time
        self.acceptor: Acceptor | None = None  # the first listener's
        self.acceptors: list[Acceptor] = []
        self._retention_task: asyncio.Task[None] | None = None
        self._api_versions_cache: dict[int, Any] = {}
        self.metrics = BrokerMetrics(self)
        self.flusher.timed = self.metrics.log_flush.observe
        self.http: HttpServer | None = None
        self.console: BrokerConsole | None = None
        self._console_task: asyncio.Task[None] | None = None
        self.storage_warnings = RateLimitedLog(logging.getLogger("groupstream.broker.produce"), logging.WARNING)
        """Produce refused by the disk: a full disk refuses every produce, and the log must not fill the rest."""

    def _offsets_marker(self, partition: int, producer_id: int, producer_epoch: int, commit: bool) -> None:
        """A transaction's marker reached a `__consumer_offsets` partition: its group shard replays it (the
        transaction's offsets become committed, or are dropped)."""
        self.coordinator.call(partition, lambda shard, now: cast(Any, shard).on_transaction_marker(
            producer_id, commit, now))

    @staticmethod
    def now_ms() -> int:
        return wall_clock_ms()

    def _load_credentials(self) -> CredentialStore:
        try:
            return CredentialStore(self.config.data_dir)
        except CredentialFileError as e:
            raise ConfigError(f"cannot load the SCRAM credentials: {e}") from None
        except OSError as e:
            raise ConfigError(f"cannot read the SCRAM credentials in {self.config.data_dir}: {e.strerror or e}") from None

    def _load_authorizer(self) -> Authorizer:
        try:
            return Authorizer(self, self.config.data_dir)
        except AclFileError as e:
            raise ConfigError(f"cannot load the ACLs: {e}") from None
        except OSError as e:
            raise ConfigError(f"cannot read the ACLs in {self.config.data_dir}: {e.strerror or e}") from None

    def auth_executor(self) -> Executor:
        """Threads for PLAIN password checks (PBKDF2 releases the GIL), created on first use."""
        if self._auth_executor is None:
            self._auth_executor = ThreadPoolExecutor(max_workers=2, thread_name_prefix="groupstream-sasl")
        return self._auth_executor

    def _load_cluster_id(self) -> str:
        path = self.config.data_dir / "cluster-id"
        if path.exists():
            return path.read_text().strip()
        cid = uuid.uuid4().hex[:22]
        path.write_text(cid)
        return cid

    # --- ApiVersions ----------------------------------------------------------------------------------

    def api_versions_body(self, error_code: int) -> Any:
        body = self._api_versions_cache.get(error_code)
        if body is None:
            api = self.apis[18]
            keys = [
                api.Response.ApiVersion(api_key=k, min_version=self.apis[k].min_version, max_version=self.apis[k].max_version)
                for k in sorted(self.handlers)
            ]
            body = api.Response(error_code=error_code, api_keys=keys)
            self._api_versions_cache[error_code] = body
        return body

    # --- lifecycle ------------------------------------------------------------------------------------

    async def start(self) -> None:
        # The logs are open: what is in use now stays in use, and the default max.connections leaves a share of
        # the rest for the segments and partitions to come.
        limits = ConnectionLimits.resolve(self.config, nofile_limit(), open_descriptors())
        try:
            contexts = {lc.name: self._tls_context(lc) for lc in self.listeners}
            for lc in self.listeners:
                acceptor = Acceptor(self.connections, limits, self._connection_factory(lc, contexts[lc.name]))
                self.acceptors.append(acceptor)
                try:
                    lc.port = acceptor.listen(lc.host, lc.port)
                except OSError as e:
                    raise ConfigError(
                        f"cannot listen on {lc.host}:{lc.port} (listener {lc.name}): {e.strerror or e}"
                    ) from None
            if self.config.http is not None:
                self.console = BrokerConsole(self)
                self.http = HttpServer({"/metrics": lambda _: (METRICS_CONTENT_TYPE, self.metrics.exposition()),
                                        **self.console.routes()})  # fmt: skip
                try:
                    self.config.http = await self.http.start(*self.config.http)
                except OSError as e:
                    raise ConfigError(f"cannot listen on {self.config.http[0]}:{self.config.http[1]} (--http): "
                                      f"{e.strerror or e}") from None  # fmt: skip
        except BaseException:
            for acceptor in self.acceptors:
                acceptor.close()
            self.acceptors.clear()
            if self.http is not None:
                await self.http.close()
            self.catalog.close()
            self.dir_lock.release()
            raise
        first = self.listeners[0]
        self.config.host, self.config.port = first.host, first.port
        self.acceptor = self.acceptors[0]
        self.connections.start(limits, self._connection_closed)
        self._retention_task = asyncio.create_task(self._retention_loop())
        self.coordinator.start()
        self.transactions.start()
        if self.config.log_cleaner_enable:
            self.cleaner.start()
        for lc in self.listeners:
            host, port = lc.advertised
            log.info("groupstream broker %d listening on %s (advertised %s:%d)%s", self.config.node_id, lc, host, port,
                     self._describe_security(lc))  # fmt: skip
        log.info("data in %s; %d users with SCRAM credentials", self.config.data_dir,
                 len(self.credentials.snapshot()))  # fmt: skip
        log.info("connection limits: %s", limits.describe())
        if self.console is not None:
            self._console_task = asyncio.create_task(self.console.sample_forever())
        if self.config.http is not None:
            log.info("console on http://%s:%d/ and metrics on http://%s:%d/metrics", *self.config.http,
                     *self.config.http)  # fmt: skip

    def _tls_context(self, lc: ListenerConfig) -> ssl.SSLContext | None:
        security = lc.security
        if security is None or security.tls is None:
            return None
        try:
            return server_context(security.tls)
        except TlsConfigError as e:
            raise ConfigError(f"listener {lc}: {e}") from None

    def _connection_factory(self, lc: ListenerConfig, context: ssl.SSLContext | None) -> Any:
        def make(sock: Any, peer: Any) -> KafkaConnection:
            return KafkaConnection(self, sock, peer, lc, context)

        return make

    def _connection_closed(self) -> None:
        for acceptor in self.acceptors:
            acceptor.connection_closed()

    @staticmethod
    def _describe_security(lc: ListenerConfig) -> str:
        security = lc.security
        if security is None:
            return ""
        parts = []
        if security.tls is not None:
            parts.append(f"TLS {','.join(security.tls.enabled_protocols)}, client auth {security.tls.client_auth}")
        if security.mechanisms:
            parts.append(f"SASL {','.join(security.mechanisms)}")
        if security.max_reauth_ms:
            parts.append(f"connections.max.reauth.ms={security.max_reauth_ms}")
        return f" [{'; '.join(parts)}]" if parts else ""

    async def stop(self) -> None:
        # Connections go first, at once: a broker asked to stop under a connection storm must not wait on them.
        for acceptor in self.acceptors:
            acceptor.close()
        self.connections.close_all()
        if self.http is not None:
            await self.http.close()
        if self._console_task is not None:
            self._console_task.cancel()
        if self._auth_executor is not None:
            self._auth_executor.shutdown(wait=False, cancel_futures=True)
        self.purgatory.wake_all()
        if self._retention_task is not None:
            self._retention_task.cancel()
        await self.coordinator.close()
        await self.transactions.close()
        await self.cleaner.close()
        await self.flusher.close()
        self.catalog.close()
        self.storage_warnings.close()
        self.dir_lock.release()
        log.info("groupstream broker stopped cleanly")

    async def _retention_loop(self) -> None:
        interval = self.config.retention_check_interval_ms / 1000.0
        while True:
            await asyncio.sleep(interval)
            try:
                self.catalog.enforce_retention(self.now_ms())
            except Exception:
                log.exception("retention check failed")
