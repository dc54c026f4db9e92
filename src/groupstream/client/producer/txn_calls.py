"""What the transaction manager (``transactions``) keeps of the application's transactional calls: the call it
works on (`PendingCall`), what the open transaction holds (`OpenTxn`), one ``send_offsets_to_transaction``'s
progress (`TxnOffsets`), and the one-line error for a call made in the wrong state, which says what to do
instead. Plain values, no requests."""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass, field

from groupstream.client.consumer.membership_api import GroupMetadata
from groupstream.client.producer.errors import TransactionError, TransactionStateError
from groupstream.client.producer.txn_rules import TxnState
from groupstream.protocol.topic_partition import TopicPartition

__all__ = ["OpenTxn", "PendingCall", "TxnOffsets", "copy_outcome", "wrong_state"]


@dataclass
class TxnOffsets:
    """One ``send_offsets_to_transaction``: its offsets and how far it got."""

    offsets: dict[TopicPartition, tuple[int, int, str | None]]  # offset, leader epoch, metadata
    group: GroupMetadata
    future: Future[None]
    added: bool = False  # AddOffsetsToTxn done
    coordinator: int | None = None  # the group coordinator's own node id


@dataclass
class PendingCall:
    """The application call the manager works on, and its future."""

    kind: str  # init, commit, abort, offsets
    future: Future[None]
    offsets: TxnOffsets | None = None


@dataclass
class OpenTxn:
    """What the open transaction holds."""

    added: set[TopicPartition] = field(default_factory=set)
    adding: set[TopicPartition] = field(default_factory=set)  # in the AddPartitionsToTxn in flight
    offsets_added: bool = False
    error: TransactionError | None = None  # what made it abortable

    @property
    def started(self) -> bool:
        """Whether anything joined the transaction on the coordinator (else there is no EndTxn to send)."""
        return bool(self.added) or self.offsets_added


_CALLS = {"init": "init_transactions", "begin": "begin_transaction", "commit": "commit_transaction",
          "abort": "abort_transaction", "offsets": "send_offsets_to_transaction"}  # fmt: skip
S = TxnState
_HINTS = {
    S.UNINITIALIZED: "call init_transactions() first",
    S.INITIALIZING: "init_transactions() has not completed",
    S.READY: "no transaction is open: call begin_transaction() first",
    S.IN_TRANSACTION: "a transaction is already open",
    S.COMMITTING: "the transaction is committing",
    S.ABORTING: "the transaction is aborting",
    S.ABORTABLE_ERROR: "the transaction failed: call abort_transaction()",
    S.FATAL_ERROR: "the producer failed fatally",
}


def wrong_state(kind: str, state: TxnState) -> TransactionStateError:
    """The error of call ``kind`` (``init``, ``begin``, ...) made in ``state``, naming what to do instead."""
    return TransactionStateError(f"{_CALLS[kind]}() in state {state.value}: {_HINTS[state]}")


def copy_outcome(src: Future[None], dst: Future[None]) -> None:
    """Complete ``dst`` as ``src`` completed: a call repeated after a timeout waits for the first one's work."""
    if dst.done():
        return
    e = src.exception()
    if e is None:
        dst.set_result(None)
    else:
        dst.set_exception(e)
