"""The transactional producer's state table and error classes (pure, no broker): every allowed step is taken by
``transition_to`` and every other one refused; broker codes map to the abortable/fatal split Java and
librdkafka make."""

from __future__ import annotations

import itertools

import pytest

from groupstream.client.producer.errors import TransactionAbortableError, TransactionFatalError
from groupstream.client.producer.txn_rules import TRANSITIONS, TxnState, txn_error
from groupstream.protocol.error_codes import ErrorCode
from groupstream.state_table import InvalidTransition

ALLOWED = TRANSITIONS.pairs()


@pytest.mark.parametrize(("a", "b"), sorted(itertools.product(TxnState, TxnState), key=lambda p: (p[0].value, p[1].value)))
def test_every_step_is_allowed_or_refused_by_the_table(a: TxnState, b: TxnState) -> None:
    if (a, b) in ALLOWED:
        assert TRANSITIONS.check(a, b) is b
    else:
        with pytest.raises(InvalidTransition, match=b.value):
            TRANSITIONS.check(a, b)


def test_the_happy_path_and_the_abort_path_are_in_the_table() -> None:
    s = TxnState
    for path in (
        [s.UNINITIALIZED, s.INITIALIZING, s.READY, s.IN_TRANSACTION, s.COMMITTING, s.READY],
        [s.READY, s.IN_TRANSACTION, s.ABORTABLE_ERROR, s.ABORTING, s.READY],
    ):
        for a, b in itertools.pairwise(path):
            assert (a, b) in ALLOWED
    assert not any(a is s.FATAL_ERROR and b is not s.FATAL_ERROR for a, b in ALLOWED)  # fatal is for good


@pytest.mark.parametrize(
    "code",
    [ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
     ErrorCode.INVALID_TXN_STATE],
)  # fmt: skip
def test_fencing_and_authorization_are_fatal(code: ErrorCode) -> None:
    e = txn_error(code, "EndTxn")
    assert isinstance(e, TransactionFatalError) and e.fatal and not e.txn_requires_abort and not e.retriable
    assert e.code == code and code.name in str(e)


@pytest.mark.parametrize(
    "code",
    [ErrorCode.GROUP_AUTHORIZATION_FAILED, ErrorCode.TOPIC_AUTHORIZATION_FAILED, ErrorCode.UNKNOWN_PRODUCER_ID,
     ErrorCode.ILLEGAL_GENERATION, ErrorCode.FENCED_INSTANCE_ID, ErrorCode.TRANSACTION_ABORTABLE],
)  # fmt: skip
def test_errors_of_one_transaction_are_abortable(code: ErrorCode) -> None:
    e = txn_error(code, "TxnOffsetCommit")
    assert isinstance(e, TransactionAbortableError) and e.txn_requires_abort and not e.fatal
    assert "abort the transaction" in str(e)
