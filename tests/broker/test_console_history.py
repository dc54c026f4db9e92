"""`groupstream.console.history`: who owned each partition when, rebuilt from coordinator records (pure)."""

from __future__ import annotations

import uuid

from groupstream.console.history import Span, group_history
from groupstream.console.lag_history import LagHistory
from groupstream.console.render import lag_svg, timeline_svg
from groupstream.protocol.consumer_group_records import (
    ConsumerGroupKey,
    ConsumerMemberKey,
    CurrentMemberAssignmentValue,
    GroupMetadataValue848,
    MemberMetadataValue,
    TopicPartitions,
)
from groupstream.protocol.consumer_protocol import ConsumerAssignment, encode_assignment
from groupstream.protocol.group_records import (
    CoordinatorRecord,
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
)


def rec(key: object, value: object) -> CoordinatorRecord:
    return CoordinatorRecord(0, key, 0, value)


def classic_member(member_id: str, client_id: str, partitions: list[tuple[str, int]]) -> MemberMetadata:
    return MemberMetadata(member_id, client_id, "/10.0.0.1", 10_000, b"",
                          encode_assignment(ConsumerAssignment(tuple(partitions))))  # fmt: skip


def generation(n: int, *members: MemberMetadata) -> GroupMetadataValue:
    return GroupMetadataValue("consumer", n, "range", members[0].member_id if members else None, members=members)


def test_classic_generations_hand_partitions_over_and_an_empty_group_releases_them() -> None:
    a = classic_member("a-1", "alpha", [("t", 0), ("t", 1)])
    a2 = classic_member("a-1", "alpha", [("t", 0)])
    b = classic_member("b-1", "beta", [("t", 1)])
    key = GroupMetadataKey("g")
    entries = [
        (1000, rec(key, generation(1, a))),
        (1500, rec(GroupMetadataKey("other"), generation(7, b))),  # another group's records are ignored
        (2000, rec(key, generation(2, a2, b))),
        (3000, rec(key, generation(3))),
    ]
    h = group_history(entries, "g", {})
    assert h.ownership[("t", 0)] == [Span("alpha (a-1)", 1000, 3000)]
    assert h.ownership[("t", 1)] == [Span("alpha (a-1)", 1000, 2000), Span("beta (b-1)", 2000, 3000)]
    assert [e.text for e in h.events] == [
        "generation 1: 1 members (alpha)",
        "generation 2: 2 members (alpha, beta)",
        "generation 3: 0 members (no members)",
    ]
    assert (h.first_ms, h.last_ms) == (1000, 3000) and h.owners() == ["alpha (a-1)", "beta (b-1)"]
    svg = timeline_svg(h)
    assert svg.count('class="span"') == 3 and 'data-owner="beta (b-1)"' in svg


def test_consumer_group_members_take_revoke_and_leave() -> None:
    tid = uuid.uuid4()
    names = {tid: "orders"}

    def meta(client: str) -> MemberMetadataValue:
        return MemberMetadataValue(None, None, client, "/10.0.0.1", ("orders",), None, 45_000, "uniform")

    def holds(epoch: int, assigned: tuple[int, ...], revoking: tuple[int, ...] = ()) -> CurrentMemberAssignmentValue:
        pending = (TopicPartitions(tid, revoking),) if revoking else ()
        return CurrentMemberAssignmentValue(epoch, epoch - 1, 0, (TopicPartitions(tid, assigned),), pending)

    entries = [
        (100, rec(ConsumerGroupKey("g"), GroupMetadataValue848(1))),
        (100, rec(ConsumerMemberKey("g", "m-a"), meta("alpha"))),
        (100, rec(ConsumerMemberKey("g", "m-a"), holds(1, (0, 1)))),
        (200, rec(ConsumerGroupKey("g"), GroupMetadataValue848(2))),
        (200, rec(ConsumerMemberKey("g", "m-b"), meta("beta"))),
        (200, rec(ConsumerMemberKey("g", "m-a"), holds(2, (0,), revoking=(1,)))),  # still holds 1 until revoked
        (300, rec(ConsumerMemberKey("g", "m-a"), holds(2, (0,)))),
        (300, rec(ConsumerMemberKey("g", "m-b"), holds(2, (1,)))),
        (400, rec(ConsumerMemberKey("g", "m-a"), None)),  # alpha leaves
    ]
    h = group_history(entries, "g", names)
    assert h.ownership[("orders", 0)] == [Span("alpha (m-a)", 100, 400)]
    assert h.ownership[("orders", 1)] == [Span("alpha (m-a)", 100, 300), Span("beta (m-b)", 300, None)]
    texts = [e.text for e in h.events]
    assert "member beta (m-b) joined" in texts and "member alpha (m-a) left" in texts
    assert texts.count("group epoch 2") == 1


def test_lag_history_keeps_the_last_samples_and_forgets_deleted_groups() -> None:
    h = LagHistory(keep=3)
    for t, lag in [(1000, 5), (2000, 7), (2000, 8), (3000, 2), (4000, 0)]:
        h.record(t, {"g": lag, "other": 1})
    assert h.series("g") == [(2000, 8), (3000, 2), (4000, 0)]  # the same moment twice: the later sample stands
    h.forget({"g"})
    assert h.series("other") == [] and len(h.series("g")) == 3
    svg = lag_svg(h.series("g"))
    assert 'data-points="3"' in svg and ">8</text>" in svg  # the largest lag labels the axis
    assert "starts after two samples" in lag_svg([(1000, 1)])
    rates = LagHistory()
    rates.record(1000, {"t": 100})
    assert rates.rate("t") is None
    rates.record(1500, {"t": 150})
    assert rates.rate("t") is None  # not a second apart yet
    rates.record(3000, {"t": 400})
    assert rates.rate("t") == 250 * 1000 / 1500  # from the sample at 1500 ms, the latest a second before
