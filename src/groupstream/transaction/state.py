"""A transactional id's state: Kafka's eight transaction states and the one checked way to change them.

The table of valid transitions is Kafka's (``TransactionState.validPreviousStates``, turned around): every
change of state goes through `TxnMetadata.transition_to`, which refuses a move the table does not hold with
`InvalidTransition` (a bug in a handler, never a client error: handlers check the state and answer
INVALID_TXN_STATE or CONCURRENT_TRANSACTIONS first).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import IntEnum
from typing import Any

from groupstream.protocol.topic_partition import TopicPartition
from groupstream.state_table import TransitionTable

__all__ = [
    "NO_PRODUCER_EPOCH",
    "NO_PRODUCER_ID",
    "TXN_STATES",
    "TopicPartition",
    "TxnMetadata",
    "TxnState",
]

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1


class TxnState(IntEnum):
    """The int8 ``TransactionStatus`` of `__transaction_state` values; names are what admin APIs show."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def wire_name(self) -> str:
        """Kafka's name in DescribeTransactions and ListTransactions ("Ongoing", "PrepareCommit", ...)."""
        return _WIRE_NAMES[self]

    @classmethod
    def from_wire_name(cls, name: str) -> TxnState | None:
        return _BY_WIRE_NAME.get(name)

    @property
    def is_preparing(self) -> bool:
        """Markers are being written: new requests of this producer get CONCURRENT_TRANSACTIONS."""
        return self in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)

    @property
    def is_complete(self) -> bool:
        return self in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)


_WIRE_NAMES = {
    TxnState.EMPTY: "Empty",
    TxnState.ONGOING: "Ongoing",
    TxnState.PREPARE_COMMIT: "PrepareCommit",
    TxnState.PREPARE_ABORT: "PrepareAbort",
    TxnState.COMPLETE_COMMIT: "CompleteCommit",
    TxnState.COMPLETE_ABORT: "CompleteAbort",
    TxnState.DEAD: "Dead",
    TxnState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}
_BY_WIRE_NAME = {name: state for state, name in _WIRE_NAMES.items()}

_S = TxnState
TXN_STATES = TransitionTable.from_next("a transaction", TxnState, {
    # a new or finished transactional id: InitProducerId keeps it Empty, the first AddPartitions starts one
    _S.EMPTY: frozenset({_S.EMPTY, _S.ONGOING, _S.PREPARE_ABORT, _S.DEAD}),
    # more partitions keep it Ongoing; EndTxn prepares; a new producer or the timeout fences it
    _S.ONGOING: frozenset({_S.ONGOING, _S.PREPARE_COMMIT, _S.PREPARE_ABORT, _S.PREPARE_EPOCH_FENCE}),
    # markers written: complete
    _S.PREPARE_COMMIT: frozenset({_S.COMPLETE_COMMIT}),
    _S.PREPARE_ABORT: frozenset({_S.COMPLETE_ABORT}),
    # done: the producer starts again (InitProducerId keeps it Empty, AddPartitions opens the next one)
    _S.COMPLETE_COMMIT: frozenset({_S.EMPTY, _S.ONGOING, _S.PREPARE_ABORT, _S.DEAD}),
    _S.COMPLETE_ABORT: frozenset({_S.EMPTY, _S.ONGOING, _S.PREPARE_ABORT, _S.DEAD}),
    _S.DEAD: frozenset(),
    # the epoch bump of a fence is durable: the fenced transaction aborts
    _S.PREPARE_EPOCH_FENCE: frozenset({_S.PREPARE_ABORT}),
})


@dataclass(frozen=True, slots=True)
class TxnMetadata:
    """What `__transaction_state` holds for one transactional id (immutable: a change is a new value, written
    as a record and replayed)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[TopicPartition]
    start_ms: int  # when the current transaction began (-1 when none is open)
    last_update_ms: int
    previous_producer_id: int = NO_PRODUCER_ID
    next_producer_id: int = NO_PRODUCER_ID
    next_producer_epoch: int = NO_PRODUCER_EPOCH
    # the transaction protocol of the transaction (Kafka's clientTransactionVersion: 2 once a KIP-890 part 2
    # client opened or ended it, which bumps the epoch at every end; 0 otherwise)
    client_transaction_version: int = 0

    def transition_to(self, state: TxnState, now_ms: int, **changes: Any) -> TxnMetadata:
        """The metadata in ``state`` with ``changes``; raises `InvalidTransition` if the table forbids it."""
        TXN_STATES.check(self.state, state, who=f"transaction {self.transactional_id!r}")
        return replace(self, state=state, last_update_ms=now_ms, **changes)

    def topic_partitions(self) -> dict[str, list[int]]:
        """The partitions grouped by topic, sorted (as admin answers and records list them)."""
        out: dict[str, list[int]] = {}
        for topic, partition in sorted(self.partitions):
            out.setdefault(topic, []).append(partition)
        return out
