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


class TransactionError(ClientError):
    """Base of the transactional producer's errors. The attributes say what the application may do next, as
    confluent-kafka's ``KafkaError.txn_requires_abort()``, ``fatal()`` and ``retriable()`` do:

    - ``txn_requires_abort``: the transaction cannot commit; call ``abort_transaction()`` and start again.
    - ``fatal``: the producer cannot go on (fenced by a newer instance, not authorized): close it.
    - ``retriable``: the same call may simply be made again (it timed out; the operation goes on meanwhile).

    ``code`` is the broker's error code when a broker answered with one, else None."""

    txn_requires_abort = False
    fatal = False
    retriable = False

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.code = code


class TransactionStateError(TransactionError):
    """A transactional call made in a state that does not allow it (``produce`` outside a transaction,
    ``commit_transaction`` before ``begin_transaction``, ``init_transactions`` without ``transactional.id``).
    The application's mistake; the producer itself is unharmed."""


class TransactionAbortableError(TransactionError):
    """The current transaction failed (a record was not delivered, the group refused the offsets): it must
    be aborted with ``abort_transaction()``; then the producer can begin a new one."""

    txn_requires_abort = True


class TransactionFatalError(TransactionError):
    """The producer can do nothing more (PRODUCER_FENCED: a newer producer with the same transactional.id
    started; TRANSACTIONAL_ID_AUTHORIZATION_FAILED; ...): close it. Records of its open transaction are never
    visible to read_committed consumers."""

    fatal = True


class TransactionTimeoutError(TransactionError, ProducerTimeoutError):
    """A transactional call did not complete within its timeout; it goes on in the background and the same call
    may be made again to wait for it (``retriable``)."""

    retriable = True


class TransactionAbortedError(TransactionError):
    """The delivery error of a record whose transaction was aborted before the record was sent."""
