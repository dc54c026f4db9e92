"""What the parts of the `Producer` share: its state, built by ``Producer.__init__`` (``producer``) and used by
the record path (``record_path``), the bulk paths (``bulk``), delivery reports (``deliveries``) and flush and
close (``lifecycle``); why records are refused; and the record helpers more than one path uses."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from groupstream.client.net.metadata import MetadataCache
from groupstream.client.net.network_client import NetworkClient
from groupstream.client.net.network_thread import NetworkThread, monotonic_ms
from groupstream.client.producer import encode
from groupstream.client.producer.accumulator import RecordAccumulator
from groupstream.client.producer.batch import RECORD_OVERHEAD, DeliveryCallback
from groupstream.client.producer.config import PartitionerFn, ProducerConfig, Serializer
from groupstream.client.producer.errors import ProducerClosedError, SerializationError
from groupstream.client.producer.future import DeliveryHandle, failed_handle
from groupstream.client.producer.idempotence import IdempotenceManager
from groupstream.client.producer.intake import PendingRecord, RecordIntake
from groupstream.client.producer.memory import BufferMemory
from groupstream.client.producer.metrics import ProducerMetrics
from groupstream.client.producer.partitioner import Partitioner
from groupstream.client.producer.record_metadata import RecordMetadata
from groupstream.client.producer.sender import Sender

HeadersArg = Mapping[str, bytes | str | None] | Iterable[tuple[str, bytes | str | None]] | None
Headers = list[tuple[str, bytes | None]]
Delivery = tuple[DeliveryCallback, BaseException | None, RecordMetadata]  # a callback due on the app thread


class ProducerCore:
    """The producer's state (see ``Producer.__init__``) and what every path asks of it."""

    config: ProducerConfig
    _closed: bool
    _records: queue.SimpleQueue[PendingRecord]  # handed to the network thread: their topic has no route yet
    _deliveries: queue.SimpleQueue[Delivery]  # callbacks due, run by poll, flush and close
    _memory: BufferMemory
    _key_serializer: Serializer | None
    _value_serializer: Serializer | None
    _serializing: bool
    _max_record: int
    _metadata: MetadataCache
    _acc: RecordAccumulator
    _partitioner: Partitioner
    _custom: PartitionerFn | None
    _by_key: bool  # keyed records go to their key's partition
    _sender: Sender | None
    _metrics: ProducerMetrics
    _idempotence: IdempotenceManager | None
    _intake: RecordIntake
    _client: NetworkClient
    _thread: NetworkThread
    _wakeup: Callable[[], None]  # the network client's wakeup
    _append: encode.AppendRecord
    _append_rows: encode.AppendRows
    _append_routed: encode.AppendRouted
    _key_partition: encode.KeyPartition
    _lock: threading.Lock  # the accumulator's
    _plain: bool  # no serializer and no custom partitioner: produce's one-call path applies
    _route_waited: set[str]  # topics whose first record waited for their route (under the accumulator's lock)

    def __len__(self) -> int:
        """Records produced and not yet delivered or failed (confluent-kafka's ``len(producer)``)."""
        return self._acc.outstanding()

    def _refused(self) -> BaseException:
        """Why the producer takes no more records (closed, fatally failed, its network thread gone)."""
        if self._closed:
            return ProducerClosedError("produce() after close()")
        fatal = self._idempotence.fatal_error if self._idempotence is not None else None
        if fatal is not None:
            return fatal
        if not self._thread.alive:
            return ProducerClosedError(f"the producer's network thread stopped: {self._thread.failure!r}")
        return self._acc.refusal or ProducerClosedError("the producer refuses records")

    def _refuse_record(
        self,
        topic: str,
        partition: int | None,
        timestamp: int,
        error: BaseException,
        on_delivery: DeliveryCallback | None,
    ) -> DeliveryHandle:
        """The handle of a record that fails before it reaches a batch; its callback is due at the next poll."""
        self._metrics.batch_done(1, True, monotonic_ms())
        p = -1 if partition is None else partition
        if on_delivery is not None:
            self._deliveries.put((on_delivery, error, RecordMetadata(topic, p, -1, timestamp)))
        return failed_handle(topic, p, timestamp, error)

    def _serialize(self, key: Any, value: Any, topic: str) -> tuple[Any, Any]:
        """A record's key and value through the configured serializers, as bytes-like objects or None."""
        return (
            _serialized(self._key_serializer, key, "key", topic) if key is not None else None,
            _serialized(self._value_serializer, value, "value", topic) if value is not None else None,
        )


def _serialized(
    serializer: Serializer | None, obj: Any, what: str, topic: str
) -> bytes | bytearray | memoryview | None:
    if serializer is not None:
        obj = serializer(obj)
        if obj is None:
            return None
    if type(obj) is bytes:
        return obj
    return coerce(obj, what, topic)


def record_timestamp(timestamp: int | None) -> int:
    """A record's timestamp: milliseconds since the epoch, now when None."""
    if timestamp is None:
        return time.time_ns() // 1_000_000
    if timestamp < 0:
        raise ValueError(f"timestamp must be milliseconds since the epoch, not {timestamp}")
    return timestamp


def coerce(obj: Any, what: str, topic: str) -> bytes | bytearray | memoryview:
    """A key or value the encoder takes: str as UTF-8, bytes-like objects as they are (copied when appended)."""
    if isinstance(obj, str):
        return obj.encode()
    if isinstance(obj, bytes | bytearray | memoryview):
        return obj
    raise SerializationError(
        f"{what} for topic {topic!r} is a {type(obj).__name__}, not bytes or str; set {what}.serializer"
    )


def record_size(key: Any, value: Any, hdrs: Headers | None) -> int:
    """Bytes a record takes in a batch, at most (``buffer.memory``, ``max.request.size``)."""
    size = RECORD_OVERHEAD + (len(key) if key is not None else 0) + (len(value) if value is not None else 0)
    for hk, hv in hdrs or ():
        size += len(hk) + (len(hv) if hv is not None else 0) + 4
    return size


def header_list(items: Iterable[Any] | None) -> Headers:
    """``(name, value)`` pairs as the encoder's header list: names str, values bytes (str as UTF-8) or None."""
    out: Headers = []
    for k, v in items or ():
        if not isinstance(k, str):
            raise SerializationError(f"header names must be str, got {k!r}")
        out.append((k, v.encode() if isinstance(v, str) else (bytes(v) if v is not None else None)))
    return out


def headers_of(headers: HeadersArg) -> Headers:
    """``produce``'s ``headers`` argument (a mapping or pairs) as the encoder's header list."""
    return header_list(headers.items() if isinstance(headers, Mapping) else headers)
