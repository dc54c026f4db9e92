"""The assignment interval (Kafka 4.3, KIP-1263 ``group.consumer.assignment.interval.ms``): a ``consumer`` group
computes a new target assignment at most once per interval, so that members joining together share one
computation. Manual clock; one shard."""

from __future__ import annotations

from consumer_group_kit import Member, settle
from coordinator_harness import GROUP, Harness, StaticTopics

from groupstream.coordinator.config import GroupCoordinatorConfig
from groupstream.coordinator.consumer_group import ConsumerGroup, ConsumerGroupState
from groupstream.protocol.error_codes import ErrorCode

E = ErrorCode
S = ConsumerGroupState
INTERVAL = 1_000
T = {("t", p) for p in range(6)}


def harness(interval_ms: int = INTERVAL) -> Harness:
    return Harness(config=GroupCoordinatorConfig(consumer_assignment_interval_ms=interval_ms),
                   topics=StaticTopics({"t": 6}))  # fmt: skip


def group(h: Harness) -> ConsumerGroup:
    g = h.shard.consumer_group(GROUP)
    assert g is not None
    return g


def test_kafka_property_name_and_default() -> None:
    assert GroupCoordinatorConfig().consumer_assignment_interval_ms == 1_000  # Kafka 4.3's default
    config = GroupCoordinatorConfig.from_properties({"group.consumer.assignment.interval.ms": "250"})
    assert config.consumer_assignment_interval_ms == 250


def test_joins_within_the_interval_share_one_target_computed_after_it() -> None:
    h = harness()
    a, b, c = Member(h, "a"), Member(h, "b"), Member(h, "c")
    assert a.join().member_epoch == 1 and a.owned == T  # an empty group assigns at once
    for m in (b, c):
        answer = m.join()
        # The group epoch moved on; the joiner gets the last target's epoch and nothing yet.
        assert (answer.error_code, answer.member_epoch, m.owned) == (E.NONE, 1, set())
    g = group(h)
    assert (g.epoch, g.assignment_epoch, g.state) == (3, 1, S.ASSIGNING)
    a.beat()
    assert a.owned == T and group(h).assignment_epoch == 1  # still inside the interval: no computation
    h.advance(INTERVAL)
    settle([a, b, c])
    g = group(h)
    # One computation for both joins: the target epoch jumped from 1 to 3.
    assert (g.epoch, g.assignment_epoch, g.state) == (3, 3, S.STABLE)
    assert sorted(len(m.owned) for m in (a, b, c)) == [2, 2, 2]
    assert set().union(*(m.owned for m in (a, b, c))) == T


def test_the_recorded_time_holds_the_interval_across_a_restart() -> None:
    h = harness()
    a, b = Member(h, "a"), Member(h, "b")
    a.join()
    b.join()
    h.restart()
    assert group(h).assignment_timestamp_ms == h.now  # from the target assignment metadata record
    a.beat()
    assert group(h).assignment_epoch == 1
    h.advance(INTERVAL)
    a.beat()
    assert group(h).assignment_epoch == 2


def test_an_interval_of_zero_assigns_at_every_change() -> None:
    h = harness(0)
    a, b = Member(h, "a"), Member(h, "b")
    a.join()
    assert b.join().member_epoch == 2
    assert group(h).assignment_epoch == 2
