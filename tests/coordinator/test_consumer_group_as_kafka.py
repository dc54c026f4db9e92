"""Where the differential tests against Apache Kafka 4.4 (tests/apache/test_group_protocol_diff.py) found our
``consumer`` group coordinator answering otherwise, each pinned here on the shard with a manual clock, so the
rule holds without a Kafka node to compare with."""

from __future__ import annotations

from consumer_group_kit import Member, heartbeat, settle
from coordinator_harness import GROUP, Harness

from groupstream.protocol.error_codes import ErrorCode

E = ErrorCode
T4 = {("t", p) for p in range(4)}


def describe(h: Harness) -> tuple[object, dict[str, object]]:
    g = h.answer(h.send("ConsumerGroupDescribe", 1, group_ids=[GROUP], include_authorized_operations=False)).groups[0]
    return g, {m.member_id: m for m in g.members}


def held(member: object) -> set[tuple[str, int]]:
    return {(t.topic_name, p) for t in member.assignment.topic_partitions for p in t.partitions}  # type: ignore[attr-defined]


def test_a_revoking_member_is_described_with_what_it_still_holds() -> None:
    """Kafka describes a member's assignment as every partition it holds, including those it has been asked
    to revoke and has not yet given up: nobody else has them yet, and its target shows where it is going."""
    h = Harness()
    a, b = Member(h, "a", assignor="range"), Member(h, "b", assignor="range")
    a.join()
    b.join()
    heartbeat(h, "a", a.epoch, owned=T4)  # told to give up two partitions; it has not yet
    _, members = describe(h)
    assert held(members["a"]) == T4
    assert len(members["a"].target_assignment.topic_partitions[0].partitions) == 2  # type: ignore[attr-defined]
    assert held(members["b"]) == set()


def test_a_member_without_a_regular_expression_is_described_with_an_empty_one() -> None:
    h = Harness()
    Member(h, "a").join()
    _, members = describe(h)
    assert members["a"].subscribed_topic_regex == ""  # type: ignore[attr-defined]
    Member(h, "b", topics=None, regex="t.*").join()
    _, members = describe(h)
    assert members["b"].subscribed_topic_regex == "t.*"  # type: ignore[attr-defined]


def test_an_empty_group_has_its_assignment_epoch_at_the_group_epoch() -> None:
    """When the last member leaves (or is fenced), the group epoch is bumped and the (empty) target
    assignment is that epoch's, as in Kafka 4.4 (KAFKA-20442)."""
    h = Harness()
    a, b = Member(h, "a"), Member(h, "b")
    a.join()
    b.join()
    settle([a, b])
    assert b.leave().error_code == E.NONE
    g, _ = describe(h)
    assert (g.group_epoch, g.assignment_epoch) == (3, 2)  # type: ignore[attr-defined]  # a still to catch up
    assert a.leave().error_code == E.NONE
    g, _ = describe(h)
    assert (g.group_state, g.group_epoch, g.assignment_epoch) == ("Empty", 4, 4)  # type: ignore[attr-defined]
    a.join()
    g, members = describe(h)
    assert (g.group_epoch, g.assignment_epoch, held(members["a"])) == (5, 5, T4)  # type: ignore[attr-defined]
