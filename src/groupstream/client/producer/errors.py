"""Errors only the producer raises; broker error codes arrive as `groupstream.client.errors.KafkaError`."""

from __future__ import annotations

from groupstream.client.errors import ClientError
from groupstream.client.net.network_thread import ClientClosedError


class ProducerTimeoutError(ClientError, TimeoutError):
    """A record was not acknowledged within ``delivery.timeout.ms``, or ``produce`` could not get buffer
    space or a topic's metadata within ``max.block.ms``. The message says which limit ran out."""


class BufferFullError(ProducerTimeoutError, BufferError):
    """``buffer.memory`` stayed full for ``max.block.ms``: records are produced faster than they are sent.
    Also a ``BufferError``, as confluent-kafka raises in the same case, so code written for it keeps working."""


class ProducerClosedError(ClientClosedError):
    """The producer is closed (or closed before the record could be delivered)."""


class SerializationError(ClientError, TypeError):
    """A key or value is not bytes (or str) and no serializer turned it into bytes."""
