"""The merge of checkpointed offsets keyed by [checkpoint id, reset attempt], its timeout and fallback."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from groupstream.assignment.types import TopicPartition
from groupstream.region.merge import MergeKey, OffsetMerges, fallback_offsets, merge_timeout_ms, seek_map

P = [TopicPartition("t", i) for i in range(6)]
ALL = frozenset(P)


def test_the_merge_completes_when_every_assignable_partition_is_covered() -> None:
    merges = OffsetMerges()
    key = MergeKey(3, 1)
    assert not merges.contribute(key, "a", ALL, {P[0]: 10, P[1]: 11})
    assert merges.merged(key) is None
    assert not merges.contribute(key, "b", ALL, {P[2]: 12, P[3]: 13})
    assert merges.contribute(key, "c", ALL, {P[4]: 14, P[5]: 15})
    assert merges.merged(key) == {P[i]: 10 + i for i in range(6)}
    assert merges.members(key) == {"a", "b", "c"}
    assert not merges.is_complete(MergeKey(3, 2))  # another attempt is another merge


def test_partitions_one_member_saw_added_must_be_covered_too() -> None:
    merges = OffsetMerges()
    key = MergeKey(1, 1)
    merges.contribute(key, "a", frozenset(P[:2]), {P[0]: 1, P[1]: 2})
    assert merges.is_complete(key)
    assert not merges.contribute(key, "b", frozenset(P[:3]), {})  # b saw a third partition nobody covers


def test_a_contribution_without_assignable_partitions_does_not_complete_the_merge() -> None:
    """A member that joined after the checkpoint contributes nothing; if it is the first to contribute, the
    merge must still wait for those who owned partitions at the cut (else it seeks to the initial offsets)."""
    merges = OffsetMerges()
    key = MergeKey(5, 4)
    assert not merges.contribute(key, "d", frozenset(), {})
    assert merges.merged(key) is None
    assert not merges.contribute(key, "a", ALL, {p: 10 for p in P[:3]})
    assert merges.contribute(key, "b", ALL, {p: 20 for p in P[3:]})
    assert merges.merged(key) == {**{p: 10 for p in P[:3]}, **{p: 20 for p in P[3:]}}


def test_conflicting_offsets_keep_the_higher_and_are_reported() -> None:
    merges = OffsetMerges()
    key = MergeKey(1, 1)
    merges.contribute(key, "a", frozenset(P[:1]), {P[0]: 5})
    merges.contribute(key, "b", frozenset(P[:1]), {P[0]: 9})
    assert merges.merged(key) == {P[0]: 9}
    assert merges.conflicts(key) == {P[0]}


def test_retire_drops_merges_of_that_checkpoint_and_older() -> None:
    merges = OffsetMerges()
    for cid, attempt in ((1, 1), (2, 1), (2, 2), (3, 1)):
        merges.contribute(MergeKey(cid, attempt), "a", frozenset(), {})
    merges.retire(2)
    assert merges.keys() == [MergeKey(3, 1)]


def test_the_timeout_is_a_quarter_of_the_reset_timeout_capped_by_poll_interval_and_30s() -> None:
    assert merge_timeout_ms(20_000, 300_000) == 5_000
    assert merge_timeout_ms(200_000, 300_000) == 30_000
    assert merge_timeout_ms(200_000, 40_000) == 20_000


def test_the_seek_map_falls_back_to_the_committed_offsets() -> None:
    committed = {P[0]: 1, P[1]: 2}
    assert seek_map(None, committed) == committed
    assert seek_map({P[0]: 7}, committed) == {P[0]: 7, P[1]: 2}


@given(st.lists(st.tuples(st.sampled_from("abc"), st.lists(st.integers(0, 5), unique=True)), max_size=8))
def test_every_order_of_the_same_contributions_merges_alike(contribs: list[tuple[str, list[int]]]) -> None:
    """Each member builds the merge from the control plane in its own time; the result must not depend on it."""
    def build(order: list[tuple[str, list[int]]]) -> tuple[bool, dict[TopicPartition, int] | None]:
        merges = OffsetMerges()
        key = MergeKey(1, 1)
        for member, parts in order:
            merges.contribute(key, member, ALL, {P[p]: p * 10 + ord(member) for p in parts})
        return merges.is_complete(key), merges.merged(key)

    assert build(contribs) == build(list(reversed(contribs)))


def test_the_fallback_takes_owners_first_then_the_highest_committed_offset() -> None:
    files = [
        ({P[0]: 10}, {P[0]: 10, P[1]: 4, P[2]: 6}),  # owned t-0; read t-1 before its owner's commit
        ({P[1]: 9}, {P[0]: 10, P[1]: 9, P[2]: 6}),  # owned t-1
        ({}, {P[0]: 2, P[2]: 6, P[3]: 1}),  # owned nothing; stale on t-0
    ]
    assert fallback_offsets(files) == {P[0]: 10, P[1]: 9, P[2]: 6, P[3]: 1}
    # an owner is exact even below every committed map (they were read before a reset committed the cut)
    assert fallback_offsets([({P[4]: 3}, {P[4]: 3}), ({}, {P[4]: 8})]) == {P[4]: 3}
    # two files naming one partition's owner offset: the higher, as the merge keeps it
    assert fallback_offsets([({P[5]: 3}, {}), ({P[5]: 5}, {})]) == {P[5]: 5}
    assert fallback_offsets([]) == {}


@given(st.lists(st.tuples(st.dictionaries(st.sampled_from(P), st.integers(0, 50)),
                          st.dictionaries(st.sampled_from(P), st.integers(0, 50))), max_size=4))  # fmt: skip
def test_the_fallback_covers_every_partition_of_any_file_and_does_not_depend_on_file_order(
    files: list[tuple[dict[TopicPartition, int], dict[TopicPartition, int]]],
) -> None:
    out = fallback_offsets(files)
    assert out == fallback_offsets(list(reversed(files)))
    assert set(out) == {tp for om, c in files for tp in (*om, *c)}
    for tp, offset in out.items():
        owners = [om[tp] for om, _ in files if tp in om]
        assert offset == (max(owners) if owners else max(c[tp] for _, c in files if tp in c))
