"""The transaction state table: every (from, to) pair of Kafka's eight states is allowed exactly when the table
holds it, and `TxnMetadata.transition_to` is the one checked way to move."""

from __future__ import annotations

import itertools

import pytest

from groupstream.state_table import InvalidTransition
from groupstream.transaction.state import TXN_STATES, TxnMetadata, TxnState

S = TxnState

# Kafka's TransactionState.validPreviousStates, read the other way round (what each state may become).
EXPECTED = {
    (S.EMPTY, S.EMPTY), (S.EMPTY, S.ONGOING), (S.EMPTY, S.PREPARE_ABORT), (S.EMPTY, S.DEAD),
    (S.ONGOING, S.ONGOING), (S.ONGOING, S.PREPARE_COMMIT), (S.ONGOING, S.PREPARE_ABORT),
    (S.ONGOING, S.PREPARE_EPOCH_FENCE),
    (S.PREPARE_COMMIT, S.COMPLETE_COMMIT),
    (S.PREPARE_ABORT, S.COMPLETE_ABORT),
    (S.COMPLETE_COMMIT, S.EMPTY), (S.COMPLETE_COMMIT, S.ONGOING), (S.COMPLETE_COMMIT, S.PREPARE_ABORT),
    (S.COMPLETE_COMMIT, S.DEAD),
    (S.COMPLETE_ABORT, S.EMPTY), (S.COMPLETE_ABORT, S.ONGOING), (S.COMPLETE_ABORT, S.PREPARE_ABORT),
    (S.COMPLETE_ABORT, S.DEAD),
    (S.PREPARE_EPOCH_FENCE, S.PREPARE_ABORT),
}  # fmt: skip


def meta(state: TxnState) -> TxnMetadata:
    return TxnMetadata("tx", 7, 3, 60_000, state, frozenset({("t", 0)}), 100, 100)


@pytest.mark.parametrize(("current", "target"), list(itertools.product(TxnState, TxnState)),
                         ids=lambda s: s.wire_name)  # fmt: skip
def test_every_pair_follows_the_table(current: TxnState, target: TxnState) -> None:
    m = meta(current)
    if (current, target) in EXPECTED:
        moved = m.transition_to(target, 200, producer_epoch=4)
        assert (moved.state, moved.last_update_ms, moved.producer_epoch) == (target, 200, 4)
        assert m.state is current  # the old value is untouched: a change is a new value
    else:
        with pytest.raises(InvalidTransition, match=f"'tx' cannot go from {current.name} to {target.name}"):
            m.transition_to(target, 200)


def test_the_table_is_exactly_the_expected_rows() -> None:
    assert TXN_STATES.pairs() == EXPECTED


def test_wire_names_round_trip() -> None:
    names = [s.wire_name for s in TxnState]
    assert names == ["Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "Dead",
                     "PrepareEpochFence"]  # fmt: skip
    assert all(TxnState.from_wire_name(n) is s for n, s in zip(names, TxnState, strict=True))
    assert TxnState.from_wire_name("Bogus") is None
