"""The producer: batching, compression, idempotence, transactions and retries on the client's background network
thread.

``from groupstream.client.producer import Producer``.
"""

from groupstream.client.producer.errors import (
    BufferFullError,
    ProducerClosedError,
    ProducerTimeoutError,
    SerializationError,
    TransactionAbortableError,
    TransactionAbortedError,
    TransactionError,
    TransactionFatalError,
    TransactionStateError,
    TransactionTimeoutError,
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
    "TransactionAbortableError",
    "TransactionAbortedError",
    "TransactionError",
    "TransactionFatalError",
    "TransactionStateError",
    "TransactionTimeoutError",
]
