"""The producer: batching, compression, idempotence and retries on the client's background network thread.

``from groupstream.client.producer import Producer``.
"""

from groupstream.client.producer.errors import (
    BufferFullError,
    ProducerClosedError,
    ProducerTimeoutError,
    SerializationError,
)
from groupstream.client.producer.future import BulkDelivery, DeliveryHandle
from groupstream.client.producer.producer import Producer
from groupstream.client.producer.record_metadata import RecordMetadata

__all__ = [
    "BufferFullError",
    "BulkDelivery",
    "DeliveryHandle",
    "Producer",
    "ProducerClosedError",
    "ProducerTimeoutError",
    "RecordMetadata",
    "SerializationError",
]
