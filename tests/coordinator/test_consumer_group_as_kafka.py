"""Where the differential tests against Apache Kafka 4.4 (tests/apache/test_group_protocol_diff.py) found our
``consumer`` group coordinator answering otherwise, each pinned here on the shard with a manual clock, so the
rule holds without a Kafka node to compare with."""

from __future__ import annotations

from consumer_group_kit import Member, heartbeat, settle
from coordinator_harness import GROUP, Harness

from groupstream.protocol.error_codes import ErrorCode
from groupstream.protocol.messages import by_name

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


def test_a_commit_at_an_older_epoch_counts_for_the_partitions_held_since_then() -> None:
    """KIP-1251 (Kafka 4.4): a member's commit may carry an epoch older than its current one (it was sent
    before a heartbeat moved the member on); it is accepted for each partition the member holds and was given
    at or before that epoch, and STALE_MEMBER_EPOCH for the others. An epoch ahead of the member's is
    STALE_MEMBER_EPOCH (Kafka 4.3 and earlier said FENCED_MEMBER_EPOCH)."""
    h = Harness()
    a, b = Member(h, "a", assignor="range"), Member(h, "b", assignor="range")
    a.join()
    assert (a.epoch, a.owned) == (1, T4)
    b.join()
    settle([a, b])
    assert (a.epoch, a.owned, b.epoch, b.owned) == (2, {("t", 0), ("t", 1)}, 2, {("t", 2), ("t", 3)})

    def commit(member: str, epoch: int, *partitions: int) -> dict[int, ErrorCode]:
        answer = h.commit({("t", p): 9 for p in partitions}, member_id=member, generation=epoch, version=9)
        return {p: code for (_, p), code in answer.items()}

    assert commit("a", 1, 0, 1, 2) == {0: E.NONE, 1: E.NONE, 2: E.STALE_MEMBER_EPOCH}  # 2 is b's now
    assert commit("b", 1, 2, 3) == {2: E.STALE_MEMBER_EPOCH, 3: E.STALE_MEMBER_EPOCH}  # given at epoch 2
    assert commit("b", 2, 2, 3) == {2: E.NONE, 3: E.NONE}
    assert commit("a", 3, 0) == {0: E.STALE_MEMBER_EPOCH}
    assert commit("a", 0, 0) == {0: E.STALE_MEMBER_EPOCH}
    # The epochs are in the CurrentMemberAssignment records: the same answers after the shard is replayed.
    h.restart()
    assert commit("a", 1, 0, 2) == {0: E.NONE, 2: E.STALE_MEMBER_EPOCH}
    assert commit("b", 1, 3) == {3: E.STALE_MEMBER_EPOCH}


def test_a_partition_pending_revocation_keeps_the_epoch_it_was_given_at() -> None:
    h = Harness()
    a, b = Member(h, "a", assignor="range"), Member(h, "b", assignor="range")
    a.join()
    b.join()
    heartbeat(h, "a", a.epoch, owned=T4)  # asked to give up 2 and 3; has not yet
    answer = h.commit({("t", 3): 1}, member_id="a", generation=1, version=9)
    assert answer == {("t", 3): E.NONE}  # still a's, since epoch 1


def test_an_offset_fetch_refused_for_the_group_answers_no_topics() -> None:
    """From v8 (groups in the request) a group-level error comes with none of the group's topics, as Kafka 4.4
    answers, not with every requested partition at -1 (which reads as "nothing committed")."""
    h = Harness()
    a = Member(h, "a")
    a.join()
    assert set(h.commit({("t", 0): 5}, member_id="a", generation=a.epoch, version=9).values()) == {E.NONE}
    F = by_name("OffsetFetch").Request
    G = F.OffsetFetchRequestGroup

    def fetch(member_id: str | None, epoch: int) -> object:
        request = G(group_id=GROUP, member_id=member_id, member_epoch=epoch,
                    topics=[G.OffsetFetchRequestTopics(name="t", partition_indexes=[0])])  # fmt: skip
        return h.answer(h.send("OffsetFetch", 9, groups=[request])).groups[0]

    ok = fetch("a", a.epoch)
    assert ok.error_code == E.NONE and ok.topics[0].partitions[0].committed_offset == 5  # type: ignore[attr-defined]
    for member_id, epoch, code in (("a", a.epoch + 1, E.STALE_MEMBER_EPOCH), ("zz", a.epoch, E.UNKNOWN_MEMBER_ID)):
        refused = fetch(member_id, epoch)
        assert (refused.error_code, refused.topics) == (code, [])  # type: ignore[attr-defined]
