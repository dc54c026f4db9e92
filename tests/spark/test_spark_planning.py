"""Planning offset ranges for Spark tasks: splitting for minPartitions, per-trigger limits, offsets JSON."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from groupstream.spark.planning import (
    OffsetRange,
    from_spark_offsets,
    rate_limit,
    split_ranges,
    to_spark_offsets,
)

ranges_st = st.lists(
    st.tuples(st.sampled_from(["a", "b", "c"]), st.integers(0, 5), st.integers(0, 1000), st.integers(0, 5000)),
    max_size=12,
    unique_by=lambda t: (t[0], t[1]),
).map(lambda rows: [OffsetRange(t, p, s, s + n) for t, p, s, n in rows])


def test_offsets_go_to_spark_as_sorted_nested_dicts_and_come_back() -> None:
    offsets = {("b", 1): 7, ("a", 10): 3, ("a", 2): 5}
    spark = to_spark_offsets(offsets)
    assert json.dumps(spark) == '{"a": {"2": 5, "10": 3}, "b": {"1": 7}}'
    assert from_spark_offsets(json.loads(json.dumps(spark))) == offsets


def test_split_leaves_enough_ranges_alone_and_drops_empty_ones() -> None:
    ranges = [OffsetRange("t", 0, 0, 10), OffsetRange("t", 1, 5, 5), OffsetRange("t", 2, 0, 3)]
    assert split_ranges(ranges, None) == [OffsetRange("t", 0, 0, 10), OffsetRange("t", 2, 0, 3)]
    assert split_ranges(ranges, 2) == [OffsetRange("t", 0, 0, 10), OffsetRange("t", 2, 0, 3)]


def test_split_gives_big_partitions_more_tasks() -> None:
    ranges = [OffsetRange("t", 0, 100, 1000), OffsetRange("t", 1, 0, 100)]
    out = split_ranges(ranges, 10)
    assert [r for r in out if r.partition == 1] == [OffsetRange("t", 1, 0, 100)]
    big = [r for r in out if r.partition == 0]
    assert len(big) == 9
    assert big[0].start == 100 and big[-1].end == 1000
    assert max(r.size for r in big) - min(r.size for r in big) <= 1


@given(ranges_st, st.integers(1, 40))
def test_split_covers_every_offset_exactly_once(ranges: list[OffsetRange], min_partitions: int) -> None:
    out = split_ranges(ranges, min_partitions)
    covered = sorted((r.topic, r.partition, o) for r in out for o in range(r.start, r.end))
    wanted = sorted((r.topic, r.partition, o) for r in ranges for o in range(r.start, r.end))
    assert covered == wanted
    assert all(r.size > 0 for r in out)
    total = sum(r.size for r in ranges)
    assert len(out) >= min(min_partitions, total)


def test_rate_limit_shares_the_budget_by_lag() -> None:
    start = {("t", 0): 0, ("t", 1): 0, ("t", 2): 50}
    latest = {("t", 0): 300, ("t", 1): 100, ("t", 2): 50}
    assert rate_limit(start, latest, 1000) == latest
    assert rate_limit(start, latest, 100) == {("t", 0): 75, ("t", 1): 25, ("t", 2): 50}


def test_rate_limit_moves_every_lagging_partition_at_least_one_record() -> None:
    start = {("t", 0): 0, ("t", 1): 0}
    latest = {("t", 0): 10_000, ("t", 1): 1}
    assert rate_limit(start, latest, 10) == {("t", 0): 9, ("t", 1): 1}


@given(
    st.dictionaries(st.integers(0, 7), st.tuples(st.integers(0, 1000), st.integers(0, 1000)), min_size=1),
    st.integers(1, 5000),
)
def test_rate_limit_stays_within_the_log_and_the_budget(parts: dict[int, tuple[int, int]], budget: int) -> None:
    start = {("t", p): s for p, (s, _) in parts.items()}
    latest = {("t", p): s + n for p, (s, n) in parts.items()}
    out = rate_limit(start, latest, budget)
    assert all(start[tp] <= out[tp] <= latest[tp] for tp in latest)
    read = sum(out[tp] - start[tp] for tp in latest)
    behind = sum(1 for tp in latest if latest[tp] > start[tp])
    assert read <= budget + behind  # at most one extra record per lagging partition (the progress guarantee)
    if sum(latest[tp] - start[tp] for tp in latest) > 0:
        assert read > 0
