"""The data-loss rules of a stream, without Spark or a broker: where the next micro-batch ends, what was lost
between two positions, what each loss says, and where reading goes on (see `groupstream.spark.dataloss`)."""

from __future__ import annotations

import json

from groupstream.spark.dataloss import (
    ClusterView,
    DataLoss,
    LossKind,
    Position,
    error_text,
    find_losses,
    next_end,
    starts,
    warning_text,
)
from groupstream.spark.planning import from_spark_offsets, to_spark_offsets, topic_ids_of

A, B = "id-a", "id-b"


def earliest_zero(tps: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
    return dict.fromkeys(tps, 0)


def test_offsets_carry_topic_ids_under_a_key_no_topic_can_have() -> None:
    spark = to_spark_offsets({("t", 0): 5, ("u", 1): 2}, {"t": A, "gone": B})
    assert json.dumps(spark) == '{"@topicIds": {"t": "id-a"}, "t": {"0": 5}, "u": {"1": 2}}'
    assert from_spark_offsets(spark) == {("t", 0): 5, ("u", 1): 2}
    assert topic_ids_of(spark) == {"t": A}
    assert topic_ids_of({"t": {"0": 5}}) == {}  # a checkpoint written before ids were kept


def test_nothing_is_lifted_a_partition_that_went_back_ends_below_its_start() -> None:
    begin = Position({("t", 0): 100, ("t", 1): 50}, {"t": A})
    end = next_end(begin, ClusterView({("t", 0): 30, ("t", 1): 70}, {"t": A}))
    assert end == Position({("t", 0): 30, ("t", 1): 70}, {"t": A})
    [loss] = find_losses(begin, end)
    assert loss == DataLoss(LossKind.WENT_BACK, "t", ((0, 100, 30),), A, A)
    assert loss.describe() == "Partition t-0's offset was changed from 100 to 30, some data may have been missed"
    assert not loss.reads_from_earliest  # same topic: go on from the new end, as Spark does
    assert starts(begin, end, [loss], earliest_zero) == {("t", 0): 30, ("t", 1): 50}


def test_a_recreated_topic_is_seen_by_its_id_even_when_its_offsets_are_past_the_old_ones() -> None:
    begin = Position({("t", 0): 100, ("t", 1): 100}, {"t": A})
    end = next_end(begin, ClusterView({("t", 0): 150, ("t", 1): 40, ("t", 2): 9}, {"t": B}))
    [loss] = find_losses(begin, end)
    assert loss.kind is LossKind.RECREATED and (loss.old_id, loss.new_id) == (A, B)
    text = loss.describe()
    assert text.startswith("Partition t-0's offset was changed from 100 to 150, partition t-1's from 100 to 40")
    assert "topic t was deleted and created again (topic id id-a is now id-b)" in text
    # failOnDataLoss=false: every partition of the new topic from its earliest offset, the new one too
    assert starts(begin, end, [loss], lambda tps: dict.fromkeys(tps, 3)) == {("t", 0): 3, ("t", 1): 3, ("t", 2): 3}
    assert "reads topic t's partitions from their earliest offsets" in warning_text(loss)


def test_without_ids_a_partition_that_went_back_is_read_again_from_its_earliest_offset() -> None:
    begin = Position({("t", 0): 100})
    end = next_end(begin, ClusterView({("t", 0): 30}))
    [loss] = find_losses(begin, end)
    assert loss.kind is LossKind.WENT_BACK and loss.reads_from_earliest
    assert "was topic t deleted and created again?" in loss.describe()
    assert starts(begin, end, [loss], earliest_zero) == {("t", 0): 0}


def test_a_deleted_topic_is_reported_and_dropped_an_unsettled_one_keeps_its_place() -> None:
    begin = Position({("gone", 0): 7, ("gone", 1): 8, ("busy", 0): 5, ("t", 0): 1, ("t", 1): 2}, {"gone": A, "t": B})
    view = ClusterView({("t", 0): 4}, {"t": B, "busy": "id-c"}, frozenset({"busy"}))
    end = next_end(begin, view)
    assert end.offsets == {("busy", 0): 5, ("t", 0): 4}
    losses = find_losses(begin, end)
    assert [(x.kind, x.topic) for x in losses] == [(LossKind.GONE, "gone"), (LossKind.GONE, "t")]
    assert losses[0].describe() == (
        "Partitions gone-0 (at offset 7), gone-1 (at offset 8) are gone, some data may have been missed: topic gone "
        "was deleted"
    )
    assert losses[1].describe().endswith("topic t has fewer partitions now")
    assert "the query goes on without them" in warning_text(losses[0])
    assert error_text(losses[0].describe()).endswith("set the source option failOnDataLoss to false.")
    # the next batch starts where this one ended: nothing more is reported
    assert find_losses(end, next_end(end, view)) == []


def test_available_now_stops_at_its_target_and_leaves_a_topic_recreated_since_to_the_next_run() -> None:
    target = Position({("t", 0): 50, ("u", 0): 10}, {"t": A, "u": A})
    begin = Position({("t", 0): 20, ("u", 0): 10}, {"t": A, "u": A})
    view = ClusterView({("t", 0): 80, ("t", 1): 5, ("u", 0): 3}, {"t": A, "u": B})
    end = next_end(begin, view, target)
    # t: capped at the target, its new partition waits; u (recreated since the run began): stays, under its old id
    assert end == Position({("t", 0): 50, ("u", 0): 10}, {"t": A, "u": A})
    assert find_losses(begin, end) == []
    assert find_losses(end, next_end(end, view))[0].kind is LossKind.RECREATED  # the next run sees it
