"""The transactional producer's calls (``transactional.id``): ``init_transactions``, ``begin_transaction``,
``send_offsets_to_transaction``, ``commit_transaction``, ``abort_transaction``, with confluent-kafka's and the
Java client's meaning. Each hands its work to the transaction manager on the network thread (``transactions``)
and waits for it at most ``timeout`` seconds; a call that timed out may be made again to wait for the same work,
as in both of those clients. Errors are `TransactionError` subclasses whose ``txn_requires_abort``, ``fatal``
and ``retriable`` say what to do next."""

from __future__ import annotations

import concurrent.futures
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from groupstream.client.consumer.membership_api import GroupMetadata
from groupstream.client.net.network_thread import ApplicationEvent, CompletableEvent
from groupstream.client.producer.errors import (
    ProducerClosedError,
    TransactionStateError,
    TransactionTimeoutError,
)
from groupstream.client.producer.lifecycle import Lifecycle
from groupstream.client.producer.transactions import TransactionManager
from groupstream.client.producer.txn_calls import TxnOffsets
from groupstream.protocol.topic_partition import TopicPartition

if TYPE_CHECKING:
    from groupstream.client.producer.prepared import PreparedTransaction


class TxnCall(CompletableEvent):
    """An application's transactional call, for the transaction manager on the network thread."""

    __slots__ = ("kind", "offsets")

    def __init__(self, kind: str, offsets: TxnOffsets | None = None) -> None:
        super().__init__(None)
        self.kind = kind
        self.offsets = offsets


class TransactionalProducer(Lifecycle):
    _txn: TransactionManager | None

    def _process_txn_event(self, event: ApplicationEvent) -> bool:
        if isinstance(event, TxnCall):
            if self._txn is None:
                raise self._not_transactional(event.kind)
            self._txn.start(event.kind, event.future, event.offsets)
            return True
        return False

    def _not_transactional(self, kind: str) -> TransactionStateError:
        return TransactionStateError(
            f"{kind}: this producer has no transactional.id (set it to use transactions)"
        )

    def _txn_call(self, kind: str, name: str, timeout: float | None, offsets: TxnOffsets | None = None) -> None:
        if self._txn is None:
            raise TransactionStateError(
                f"{name}(): this producer has no transactional.id (set it to use transactions)"
            )
        if self._closed:
            raise ProducerClosedError(f"{name}() after close()")
        future = self._thread.submit(TxnCall(kind, offsets))
        try:
            future.result(timeout)
        except concurrent.futures.TimeoutError:
            raise TransactionTimeoutError(
                f"{name}() did not complete within {timeout} s; it goes on: call it again to wait for it"
            ) from None
        finally:
            self._serve_deliveries()

    def init_transactions(self, timeout: float | None = None) -> None:
        """Register ``transactional.id`` with its transaction coordinator: fences any older producer with the same
        id and completes (commits or aborts) what it left open. Call once, before the first transaction.
        ``timeout`` None: up to ``max.block.ms``."""
        self._txn_call("init", "init_transactions", self._timeout(timeout))

    def begin_transaction(self) -> None:
        """Open a transaction: ``produce`` takes records until ``commit_transaction`` or ``abort_transaction``."""
        self._txn_call("begin", "begin_transaction", self._timeout(None))

    def send_offsets_to_transaction(
        self,
        offsets: Mapping[Any, Any] | Iterable[Any],
        group_metadata: Any,
        timeout: float | None = None,
    ) -> None:
        """Commit a consumer group's ``offsets`` (``{(topic, partition): next offset}``, or TopicPartitions with
        ``.offset``) as part of the open transaction: they become the group's committed offsets if and only if
        the transaction commits (KIP-98). ``group_metadata`` is ``consumer.group_metadata()`` (or a group id),
        whose generation and member id let the group coordinator refuse a zombie (KIP-447)."""
        group = group_metadata if isinstance(group_metadata, GroupMetadata) else _group_of(group_metadata)
        o = TxnOffsets(offsets_of(offsets), group, concurrent.futures.Future())
        if not o.offsets:
            return
        self._txn_call("offsets", "send_offsets_to_transaction", self._timeout(timeout), o)

    def commit_transaction(self, timeout: float | None = None) -> None:
        """Send every record of the transaction (no linger), then commit it: its records become visible to
        read_committed consumers, its offsets the group's. On a `TransactionAbortableError` call
        ``abort_transaction``; on a `TransactionFatalError` close the producer."""
        # the transaction manager sends what is queued at once (no linger) and EndTxn as soon as the last batch is
        # acknowledged, without a round trip through this thread in between
        self._txn_call("commit", "commit_transaction", self._timeout(timeout))

    def abort_transaction(self, timeout: float | None = None) -> None:
        """Abort the open transaction: records not sent yet fail with `TransactionAbortedError`, and none of
        its records or offsets ever become visible to read_committed consumers."""
        self._txn_call("abort", "abort_transaction", self._timeout(timeout))

    def prepare_transaction(self, timeout: float | None = None) -> PreparedTransaction:
        """Send every record of the open transaction and wait until each is acknowledged, leaving it open: its
        identity (`PreparedTransaction`) lets anyone commit or abort it later with ``complete_transaction``
        (two-phase commit; see ``prepared``). Closing this producer afterwards does not end it."""
        from groupstream.client.producer.prepared import prepare_transaction

        return prepare_transaction(self, timeout)  # type: ignore[arg-type]

    def _timeout(self, timeout: float | None) -> float:
        return self.config.max_block_ms / 1000 if timeout is None or timeout < 0 else timeout


def _group_of(meta: Any) -> GroupMetadata:
    """A group id, or another client's group metadata object (attributes named as Java's)."""
    if isinstance(meta, str):
        return GroupMetadata(meta)
    group_id = getattr(meta, "group_id", None) or getattr(meta, "groupId", None)
    if not isinstance(group_id, str):
        raise TransactionStateError(
            f"send_offsets_to_transaction(): group_metadata must be consumer.group_metadata() or a group id, not {meta!r}"
        )
    return GroupMetadata(
        group_id,
        int(getattr(meta, "generation_id", -1)),
        str(getattr(meta, "member_id", "")),
        getattr(meta, "group_instance_id", None),
    )


def offsets_of(
    offsets: Mapping[Any, Any] | Iterable[Any],
) -> dict[TopicPartition, tuple[int, int, str | None]]:
    """``send_offsets_to_transaction``'s offsets: a mapping ``{(topic, partition): offset}`` (the offset of the
    next record to read, as ``commit`` takes), or TopicPartition objects with ``.offset`` (confluent-kafka's
    ``consumer.position(...)`` style), or ``{TopicPartition: OffsetAndMetadata}``."""
    out: dict[TopicPartition, tuple[int, int, str | None]] = {}
    items: Iterable[tuple[Any, Any]]
    items = offsets.items() if isinstance(offsets, Mapping) else ((tp, None) for tp in offsets)
    for key, value in items:
        if isinstance(key, tuple):
            topic, partition = key[0], key[1]
        else:
            topic, partition = key.topic, key.partition
        offset: Any = value if value is not None else getattr(key, "offset", None)
        epoch, meta = -1, None
        if offset is not None and not isinstance(offset, int):
            epoch = getattr(offset, "leader_epoch", None) or -1
            meta = getattr(offset, "metadata", None)
            offset = offset.offset
        if not isinstance(offset, int) or offset < 0:
            raise TransactionStateError(
                f"send_offsets_to_transaction: no valid offset for {topic}-{partition}: {offset!r}"
            )
        out[TopicPartition(str(topic), int(partition))] = (offset, epoch, meta)
    return out
