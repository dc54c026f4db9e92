"""The Producer: records appended by the calling thread straight into their partition's batch; everything that
talks to a broker runs on the background network thread.

The producer's parts, each a module of its own: ``produce`` appends one record (``record_path``);
``produce_batch`` and ``produce_arrow`` append many rows per call of the C encoder and return one
`BulkDelivery` (``bulk``); the network thread completes batches and the application thread runs the
``on_delivery`` callbacks asked for per record in ``poll`` (``deliveries``); ``flush`` and ``close`` end the
work (``lifecycle``). What they share is in ``core``; this module wires them together.

The network thread (seed 002) does the rest: InitProducerId and sequences, draining ready batches into
Produce requests, retries, metadata, and completing each batch's outcome. ``on_delivery`` callbacks run on the
application thread inside ``poll``, ``flush`` and ``close``, as confluent-kafka runs them, so a slow callback
never stalls the network.
"""

from __future__ import annotations

import queue
import random
from collections.abc import Mapping
from typing import Any

from groupstream.client.net.metadata import MetadataCache
from groupstream.client.net.network_client import NetworkClient
from groupstream.client.net.network_thread import ApplicationEvent, NetworkThread, monotonic_ms
from groupstream.client.producer import encode
from groupstream.client.producer.accumulator import RecordAccumulator
from groupstream.client.producer.bulk import BulkPaths
from groupstream.client.producer.config import ProducerConfig
from groupstream.client.producer.errors import TransactionStateError
from groupstream.client.producer.idempotence import IdempotenceManager
from groupstream.client.producer.intake import RecordIntake
from groupstream.client.producer.lifecycle import Lifecycle
from groupstream.client.producer.memory import BufferMemory
from groupstream.client.producer.metrics import ProducerMetrics
from groupstream.client.producer.partitioner import Partitioner
from groupstream.client.producer.sender import Sender, SenderConfig
from groupstream.client.producer.transactional import TransactionalProducer
from groupstream.client.producer.transactions import TransactionManager


class Producer(BulkPaths, TransactionalProducer):
    """Produces records to Kafka topics; thread-safe. See the module docstring for the threading model."""

    def __init__(self, config: Mapping[str, Any] | None = None, **aliases: Any) -> None:
        self.config = ProducerConfig.from_mapping({**(config or {}), **aliases})
        cfg = self.config
        net = cfg.network
        self._closed = False
        self._records = queue.SimpleQueue()
        self._deliveries = queue.SimpleQueue()
        self._memory = BufferMemory(cfg.buffer_memory)
        self._metrics = ProducerMetrics(monotonic_ms)
        self._key_serializer = cfg.key_serializer
        self._value_serializer = cfg.value_serializer
        self._serializing = cfg.key_serializer is not None or cfg.value_serializer is not None
        self._max_record = min(cfg.max_request_size, cfg.buffer_memory)
        self._metadata = MetadataCache(
            max_age_ms=net.metadata_max_age_ms,
            retry_backoff_ms=net.retry_backoff_ms,
            allow_auto_topic_creation=True,  # as Java's producer asks: the broker's setting decides
        )
        self._acc = RecordAccumulator(
            batch_size=cfg.batch_size,
            linger_ms=cfg.linger_ms,
            compression=cfg.compression,
            delivery_timeout_ms=cfg.delivery_timeout_ms,
            capacity=min(cfg.batch_size, cfg.max_request_size, cfg.buffer_memory),
            max_capacity=min(cfg.batch_max_size, cfg.max_request_size, cfg.buffer_memory),
        )
        self._partitioner = Partitioner(cfg.partitioner, random.Random().randrange)
        self._custom = self._partitioner.custom
        self._by_key = self._partitioner.use_keys and self._custom is None
        self._sender = None
        self._idempotence = (
            IdempotenceManager(
                retry_backoff_ms=net.retry_backoff_ms,
                retry_backoff_max_ms=net.retry_backoff_max_ms,
                in_flight_batches=lambda: self._sender.in_flight_batches if self._sender is not None else 0,
            )
            if cfg.idempotence
            else None
        )
        self._sender = Sender(
            SenderConfig(
                acks=cfg.acks,
                request_timeout_ms=net.request_timeout_ms,
                retries=cfg.retries,
                retry_backoff_ms=net.retry_backoff_ms,
                retry_backoff_max_ms=net.retry_backoff_max_ms,
                delivery_timeout_ms=cfg.delivery_timeout_ms,
                max_in_flight=net.max_in_flight,
                max_request_size=cfg.max_request_size,
                transactional_id=cfg.transactional_id,
            ),
            self._acc,
            self._metadata,
            self._idempotence,
            self._batch_done,
        )
        self._sender.metrics = self._metrics
        self._intake = RecordIntake(
            self._records,
            self._acc,
            self._metadata,
            self._partitioner,
            self._memory,
            max_block_ms=cfg.max_block_ms,
            on_failed=self._record_failed,
            unreachable=lambda: self._client.unreachable,
            fatal=lambda: self._client.fatal,
        )
        self._txn = None
        managers: list[Any] = [self._intake]
        if cfg.transactional_id is not None:
            assert self._idempotence is not None  # the configuration forces it
            self._txn = self._transaction_manager(cfg.transactional_id)
            managers.append(self._txn)
        if self._idempotence is not None:
            managers.append(self._idempotence)
        managers.append(self._sender)
        client = NetworkClient(net, self._metadata, monotonic_ms)
        self._client = client
        self._thread = NetworkThread(
            client, managers, self._process_event, name=f"groupstream-producer-{net.client_id}"
        )
        self._wakeup = client.wakeup
        self._append = encode.append_record  # looked up here, so a test can run the pure-Python encoder
        self._append_rows = encode.append_rows
        self._append_routed = encode.append_routed
        self._key_partition = encode.key_partition
        self._lock = self._acc.lock
        self._plain = not self._serializing and self._custom is None  # produce's one-call path applies
        self._route_waited = set()
        self._thread.start()

    def _transaction_manager(self, transactional_id: str) -> TransactionManager:
        """The transaction manager, wired to the accumulator, the sender and the intake (see ``transactions``)."""
        acc, sender, intake, idem = self._acc, self._sender, self._intake, self._idempotence
        assert sender is not None and idem is not None
        idem.transactional = True
        acc.wake_on_new_partition = True

        def refuse(error: BaseException) -> None:
            with acc.lock:
                if acc.refusal is None or isinstance(acc.refusal, TransactionStateError):
                    acc.refusal = None
                    acc.refuse(error)

        def admit() -> None:
            with acc.lock:
                if isinstance(acc.refusal, TransactionStateError) and not self._closed:
                    acc.readmit()

        net = self.config.network
        txn = TransactionManager(
            transactional_id,
            self.config.transaction_timeout_ms,
            idem,
            self._metadata,
            retry_backoff_ms=net.retry_backoff_ms,
            retry_backoff_max_ms=net.retry_backoff_max_ms,
            queued_partitions=acc.partitions,
            settled=lambda: not sender.has_pending_work() and not intake.has_pending_work() and acc.pending == 0,
            abort_queued=sender.abort_queued,
            refuse=refuse,
            admit=admit,
            begin_flush=acc.begin_flush,
            end_flush=acc.end_flush,
            feature_level=self._feature_level,
        )
        sender.txn = txn
        return txn

    def _feature_level(self, node_id: int, feature: str) -> int:
        """A finalized feature's level as ``node_id``'s ApiVersions answer gave it (0: not finalized)."""
        conn = self._client.connection(node_id)
        return conn.finalized_features.get(feature, 0) if conn is not None else 0

    def _process_event(self, event: ApplicationEvent, now_ms: int) -> None:
        if not self._process_txn_event(event):
            Lifecycle._process_event(self, event, now_ms)

    def __repr__(self) -> str:
        return f"Producer({self.config.network.client_id!r}, {len(self)} outstanding{', closed' if self._closed else ''})"
