"""The transactional producer's states and how it classes a broker's answer: one checked table of steps
(``TRANSITIONS``), and the error codes that are retried, that move the coordinator, that make the transaction
abortable, or that are fatal, as the Java client and librdkafka class them. Pure."""

from __future__ import annotations

from enum import Enum

from groupstream.client.producer.errors import (
    TransactionAbortableError,
    TransactionError,
    TransactionFatalError,
)
from groupstream.protocol.error_codes import ErrorCode, describe
from groupstream.state_table import TransitionTable

__all__ = ["ABORTABLE", "BUMP_AFTER", "COORDINATOR_MOVED", "FATAL", "RETRY", "TRANSITIONS", "TxnState", "error_name",
           "txn_error"]  # fmt: skip

class TxnState(Enum):
    UNINITIALIZED = "UNINITIALIZED"
    INITIALIZING = "INITIALIZING"
    READY = "READY"
    IN_TRANSACTION = "IN_TRANSACTION"
    COMMITTING = "COMMITTING_TRANSACTION"
    ABORTING = "ABORTING_TRANSACTION"
    ABORTABLE_ERROR = "ABORTABLE_ERROR"
    FATAL_ERROR = "FATAL_ERROR"


S = TxnState
TRANSITIONS: TransitionTable[TxnState] = TransitionTable.from_next(
    "transactional producer",
    TxnState,
    {
        S.UNINITIALIZED: frozenset({S.INITIALIZING, S.FATAL_ERROR}),
        S.INITIALIZING: frozenset({S.READY, S.FATAL_ERROR}),
        S.READY: frozenset({S.IN_TRANSACTION, S.FATAL_ERROR}),
        S.IN_TRANSACTION: frozenset({S.COMMITTING, S.ABORTING, S.ABORTABLE_ERROR, S.FATAL_ERROR}),
        S.COMMITTING: frozenset({S.READY, S.ABORTABLE_ERROR, S.FATAL_ERROR}),
        S.ABORTING: frozenset({S.READY, S.INITIALIZING, S.FATAL_ERROR}),
        S.ABORTABLE_ERROR: frozenset({S.ABORTING, S.FATAL_ERROR}),
        S.FATAL_ERROR: frozenset({S.FATAL_ERROR}),
    },
)


E = ErrorCode
COORDINATOR_MOVED = frozenset(
    {E.NOT_COORDINATOR, E.COORDINATOR_NOT_AVAILABLE, E.REQUEST_TIMED_OUT, E.NETWORK_EXCEPTION}
)
RETRY = frozenset({E.COORDINATOR_LOAD_IN_PROGRESS, E.CONCURRENT_TRANSACTIONS, E.UNKNOWN_TOPIC_OR_PARTITION,
                    E.OPERATION_NOT_ATTEMPTED, E.NOT_ENOUGH_REPLICAS, E.UNKNOWN_LEADER_EPOCH})  # fmt: skip
FATAL = frozenset({E.PRODUCER_FENCED, E.INVALID_PRODUCER_EPOCH, E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                    E.INVALID_TXN_STATE, E.TRANSACTION_COORDINATOR_FENCED, E.CLUSTER_AUTHORIZATION_FAILED,
                    E.INVALID_TRANSACTION_TIMEOUT, E.UNSUPPORTED_VERSION, E.UNSUPPORTED_FOR_MESSAGE_FORMAT})  # fmt: skip
ABORTABLE = frozenset({E.TOPIC_AUTHORIZATION_FAILED, E.GROUP_AUTHORIZATION_FAILED, E.UNKNOWN_PRODUCER_ID,
                        E.INVALID_PRODUCER_ID_MAPPING, E.TRANSACTION_ABORTABLE, E.UNKNOWN_MEMBER_ID,
                        E.ILLEGAL_GENERATION, E.FENCED_INSTANCE_ID, E.REBALANCE_IN_PROGRESS,
                        E.INVALID_RECORD})  # fmt: skip
BUMP_AFTER = frozenset({E.UNKNOWN_PRODUCER_ID, E.INVALID_PRODUCER_ID_MAPPING})


def txn_error(code: int, what: str, detail: str | None = None) -> TransactionError:
    """The typed error of a broker's code: fatal, abortable, or (anything else) fatal, as Java treats an
    error it does not expect."""
    name = error_name(code)
    text = f"{what}: {detail or describe(code)} ({name})"
    if code in ABORTABLE:
        return TransactionAbortableError(f"{text}; abort the transaction", code)
    return TransactionFatalError(f"{text}; the producer must be closed", code)


def error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"ERROR_{code}"
