"""KIP-848 ``consumer`` groups on one shard, with a manual clock: join, reconcile, leave, fencing, static
members, regular expressions, offsets, admin views and replay."""

from __future__ import annotations

import pytest
from consumer_group_kit import CGH, Member, heartbeat, names, settle
from coordinator_harness import GROUP, Harness, StaticTopics, topic_id

from groupstream.coordinator.config import GroupCoordinatorConfig
from groupstream.coordinator.consumer_group import ConsumerGroupState
from groupstream.coordinator.reconcile import MemberState
from groupstream.protocol.error_codes import ErrorCode
from groupstream.protocol.messages import by_name

E = ErrorCode
S = ConsumerGroupState
T4 = {("t", p) for p in range(4)}


def group(h: Harness):  # type: ignore[no-untyped-def]
    g = h.shard.consumer_group(GROUP)
    assert g is not None
    return g


def test_a_first_member_gets_every_partition_at_epoch_one() -> None:
    h = Harness()
    a = Member(h, "a")
    answer = a.join()
    assert (answer.error_code, answer.member_id, answer.member_epoch) == (E.NONE, "a", 1)
    assert answer.heartbeat_interval_ms == h.config.consumer_heartbeat_interval_ms
    assert a.owned == T4
    assert group(h).state is S.STABLE
    # A heartbeat that changes nothing carries no assignment: the member keeps what it has.
    assert a.beat().assignment is None and a.owned == T4


def test_a_second_member_gets_partitions_only_after_the_first_revoked_them() -> None:
    h = Harness()
    a, b = Member(h, "a"), Member(h, "b")
    a.join()
    b.join()
    assert b.epoch == 2 and b.owned == set()  # its target is still held by a
    assert group(h).members["b"].assignment.state is MemberState.UNRELEASED_PARTITIONS
    assert group(h).state is S.RECONCILING
    a.beat()  # a is told to give up two partitions, keeping its epoch until it has
    assert a.epoch == 1 and len(a.owned) == 2
    assert group(h).members["a"].assignment.state is MemberState.UNREVOKED_PARTITIONS
    b.beat()  # a has not reported the revocation yet: b still waits
    assert b.owned == set()
    a.beat()  # reported: a moves to epoch 2
    assert a.epoch == 2
    b.beat()
    assert len(b.owned) == 2 and not a.owned & b.owned and a.owned | b.owned == T4
    assert group(h).state is S.STABLE


def test_leaving_hands_the_partitions_to_the_others() -> None:
    h = Harness()
    a, b = Member(h, "a"), Member(h, "b")
    a.join(), b.join()
    settle([a, b])
    answer = b.leave()
    assert (answer.error_code, answer.member_epoch) == (E.NONE, -1)
    assert "b" not in group(h).members
    settle([a])
    assert a.owned == T4 and a.epoch == 3  # 1: a joined, 2: b joined, 3: b left


def test_a_silent_member_is_fenced_after_the_session_timeout() -> None:
    h = Harness(config=GroupCoordinatorConfig(consumer_session_timeout_ms=10_000, consumer_heartbeat_interval_ms=1_000))
    a, b = Member(h, "a"), Member(h, "b")
    a.join(), b.join()
    settle([a, b])
    for _ in range(3):
        h.advance(6_000)
        a.beat()  # only a heartbeats
    assert "b" not in group(h).members
    settle([a])
    assert a.owned == T4
    assert b.beat().error_code == E.UNKNOWN_MEMBER_ID  # and it must rejoin
    assert b.join().error_code == E.NONE


def test_a_member_that_does_not_revoke_in_time_is_fenced() -> None:
    h = Harness()
    a = Member(h, "a", rebalance_timeout_ms=5_000)
    a.join()
    Member(h, "b").join()
    heartbeat(h, "a", a.epoch, owned=T4)  # told to revoke; keeps reporting all four
    assert group(h).members["a"].assignment.state is MemberState.UNREVOKED_PARTITIONS
    h.advance(4_000)
    heartbeat(h, "a", a.epoch, owned=T4)
    h.advance(1_500)
    assert "a" not in group(h).members


def test_epochs_ahead_or_behind_are_fenced_but_a_lost_answer_is_forgiven() -> None:
    h = Harness()
    a, b = Member(h, "a"), Member(h, "b")
    a.join(), b.join()
    settle([a, b])
    assert heartbeat(h, "a", a.epoch + 1, owned=a.owned).error_code == E.FENCED_MEMBER_EPOCH
    previous = group(h).members["a"].assignment.previous_epoch
    assert heartbeat(h, "a", previous, owned=T4).error_code == E.FENCED_MEMBER_EPOCH  # owns more than it has
    # The previous epoch with a subset of the assignment: the answer that moved the member on was lost.
    assert heartbeat(h, "a", previous, owned=a.owned).error_code == E.NONE
    assert heartbeat(h, "nobody", 3, owned=set()).error_code == E.UNKNOWN_MEMBER_ID


def test_a_static_member_that_leaves_for_a_while_gets_its_partitions_back_without_a_new_epoch() -> None:
    h = Harness()
    a, b = Member(h, "a1", instance_id="ia"), Member(h, "b", instance_id="ib")
    a.join(), b.join()
    settle([a, b])
    mine, epoch = set(a.owned), group(h).epoch
    assert a.leave(-2).member_epoch == -2
    assert group(h).members["a1"].epoch == -2
    settle([b])
    assert not b.owned & mine  # nobody takes a partition of the member that is away
    back = Member(h, "a2", instance_id="ia")
    assert back.join().error_code == E.NONE
    assert back.owned == mine and group(h).epoch == epoch
    assert "a1" not in group(h).members
    assert heartbeat(h, "a1", a.epoch, owned=mine, instance_id="ia").error_code == E.FENCED_INSTANCE_ID


def test_a_second_process_with_a_live_instance_id_cannot_join() -> None:
    h = Harness()
    Member(h, "a1", instance_id="ia").join()
    dup = Member(h, "a2", instance_id="ia").join()
    assert dup.error_code == E.UNRELEASED_INSTANCE_ID
    assert list(group(h).members) == ["a1"]


def test_a_static_member_away_longer_than_its_session_is_removed() -> None:
    h = Harness(config=GroupCoordinatorConfig(consumer_session_timeout_ms=10_000, consumer_heartbeat_interval_ms=1_000))
    a, b = Member(h, "a", instance_id="ia"), Member(h, "b")
    a.join(), b.join()
    settle([a, b])
    a.leave(-2)
    for _ in range(3):
        h.advance(4_000)
        b.beat()
    settle([b])
    assert "a" not in group(h).members and b.owned == T4


@pytest.mark.parametrize(
    ("fields", "version", "code", "message"),
    [
        (dict(member_id="", member_epoch=0), 1, E.INVALID_REQUEST, "MemberId can't be empty."),
        (dict(group_id=""), 1, E.INVALID_REQUEST, "GroupId can't be empty."),
        (dict(instance_id=""), 1, E.INVALID_REQUEST, "InstanceId can't be empty."),
        (dict(rack_id=""), 1, E.INVALID_REQUEST, "RackId can't be empty."),
        (dict(rebalance_timeout_ms=-1), 1, E.INVALID_REQUEST, "RebalanceTimeoutMs must be provided in first request."),
        (dict(topic_partitions=None), 1, E.INVALID_REQUEST, "TopicPartitions must be empty when (re-)joining."),
        (dict(subscribed_topic_names=None), 1, E.INVALID_REQUEST,
         "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining."),
        (dict(member_epoch=-2), 1, E.INVALID_REQUEST, "InstanceId can't be null."),
        (dict(member_epoch=-3), 1, E.INVALID_REQUEST, "MemberEpoch is invalid."),
        (dict(server_assignor="sticky"), 1, E.UNSUPPORTED_ASSIGNOR,
         "ServerAssignor sticky is not supported. Supported assignors: uniform, range."),
        (dict(subscribed_topic_regex="t("), 1, E.INVALID_REGULAR_EXPRESSION, "SubscribedTopicRegex `t(`"),
    ],
)  # fmt: skip
def test_invalid_requests_are_refused_with_kafkas_messages(fields: dict, version: int, code: ErrorCode, message: str) -> None:  # type: ignore[type-arg]
    h = Harness()
    request = dict(group_id=GROUP, member_id="m", member_epoch=0, instance_id=None, rack_id=None,
                   rebalance_timeout_ms=1000, subscribed_topic_names=["t"], subscribed_topic_regex=None,
                   server_assignor=None, topic_partitions=[])  # fmt: skip
    request.update(fields)
    answer = h.answer(h.send("ConsumerGroupHeartbeat", version, **request))
    assert answer.error_code == code
    assert answer.error_message.startswith(message)
    assert h.log == []  # a refusal writes nothing


def test_version_0_lets_the_coordinator_name_a_joining_member() -> None:
    h = Harness()
    answer = heartbeat(h, "", 0, topics=("t",), owned=set(), rebalance_timeout_ms=1000, version=0, client_id="c")
    assert answer.error_code == E.NONE and answer.member_id.startswith("c-")


def test_range_co_partitions_and_uniform_balances() -> None:
    h = Harness(topics=StaticTopics({"x": 4, "y": 4}))
    a = Member(h, "a", topics=("x", "y"), assignor="range")
    b = Member(h, "b", topics=("x", "y"), assignor="range")
    a.join(), b.join()
    settle([a, b])
    assert a.owned == {("x", 0), ("x", 1), ("y", 0), ("y", 1)}
    assert b.owned == {("x", 2), ("x", 3), ("y", 2), ("y", 3)}
    h2 = Harness(topics=StaticTopics({"x": 5}))
    ms = [Member(h2, m, topics=("x",)) for m in "abc"]
    for m in ms:
        m.join()
    settle(ms)
    assert sorted(len(m.owned) for m in ms) == [1, 2, 2]


def test_growing_a_topic_and_creating_a_matching_topic_reach_the_members() -> None:
    h = Harness(config=GroupCoordinatorConfig(consumer_regex_refresh_interval_ms=5_000, consumer_assignment_interval_ms=0), topics=StaticTopics({"t": 2}))
    a = Member(h, "a", topics=None, regex="t.*")
    a.join()
    assert a.owned == {("t", 0), ("t", 1)}
    regex_value = group(h).regexes["t.*"]
    assert regex_value.topics == ("t",)
    h.topics.topics["t"] = 3  # partitions added: seen on the next heartbeat
    a.beat()
    assert ("t", 2) in a.owned
    h.topics.topics["t2"] = 1  # a new matching topic: seen once the regex is resolved again
    a.beat()
    assert ("t2", 0) not in a.owned
    h.advance(5_000)
    a.beat()
    assert ("t2", 0) in a.owned
    h.topics.topics["u"] = 1
    h.advance(5_000)
    a.beat()
    assert not any(t == "u" for t, _ in a.owned)


def test_subscription_changes_bump_the_epoch_and_move_partitions() -> None:
    h = Harness()
    a = Member(h, "a")
    a.join()
    epoch = group(h).epoch
    answer = heartbeat(h, "a", a.epoch, topics=("u",), owned=a.owned)
    assert group(h).epoch == epoch + 1
    a._take(answer)
    settle([a])
    assert a.owned == {("u", 0), ("u", 1)}


def test_offset_commits_and_fetches_check_the_member_epoch() -> None:
    h = Harness()
    a, b = Member(h, "a"), Member(h, "b")
    a.join(), b.join()
    settle([a, b])
    assert set(h.commit({("t", 0): 5}, member_id="a", generation=a.epoch, version=9).values()) == {E.NONE}
    # Older epochs (KIP-1251) are checked per partition in test_consumer_group_as_kafka; none held since 0.
    assert set(h.commit({("t", 0): 6}, member_id="a", generation=0, version=9).values()) == {E.STALE_MEMBER_EPOCH}
    assert set(h.commit({("t", 0): 6}, member_id="a", generation=a.epoch + 1, version=9).values()) == {E.STALE_MEMBER_EPOCH}
    assert set(h.commit({("t", 0): 6}, member_id="zz", generation=a.epoch, version=9).values()) == {E.UNKNOWN_MEMBER_ID}
    assert set(h.commit({("t", 0): 6}, version=9).values()) == {E.UNKNOWN_MEMBER_ID}  # not while it has members
    F = by_name("OffsetFetch").Request
    T = F.OffsetFetchRequestGroup.OffsetFetchRequestTopics

    def fetch(epoch: int):  # type: ignore[no-untyped-def]
        return h.answer(h.send("OffsetFetch", 9, groups=[F.OffsetFetchRequestGroup(
            group_id=GROUP, member_id="a", member_epoch=epoch, topics=[T(name="t", partition_indexes=[0])])])).groups[0]  # fmt: skip

    assert fetch(a.epoch).topics[0].partitions[0].committed_offset == 5
    assert fetch(a.epoch - 1).error_code == E.STALE_MEMBER_EPOCH
    a.leave(), b.leave()
    assert set(h.commit({("t", 0): 7}, version=9).values()) == {E.NONE}  # empty: an admin reset may commit


def test_an_empty_group_changes_kind_and_a_classic_group_without_a_protocol_yet_is_not_converted() -> None:
    h = Harness()
    h.commit({("t", 0): 3})  # a simple consumer's commit makes an (empty) classic group
    a = Member(h, "a")
    assert a.join().error_code == E.NONE  # ... which becomes a consumer group, offsets kept
    assert h.shard.group(GROUP) is None and h.shard.committed_offset(GROUP, "t", 0).offset == 3
    # A classic member may join the live consumer group (online migration, test_consumer_group_migration):
    # a new dynamic one is first given its id, as Kafka does.
    token = h.join()
    assert h.answer(token).error_code == E.MEMBER_ID_REQUIRED
    assert h.heartbeat("x", 1) == E.UNKNOWN_MEMBER_ID
    # A classic group still forming its first generation has no protocol to convert from.
    h2 = Harness()
    first = h2.answer(h2.join(""))
    assert h2.parked(h2.join(first.member_id))  # a classic member is joining
    answer = heartbeat(h2, "c", 0, topics=("t",), owned=set(), rebalance_timeout_ms=1000)
    assert (answer.error_code, answer.error_message) == (E.GROUP_ID_NOT_FOUND, f"Group {GROUP} is not a consumer group.")
    assert heartbeat(Harness(), "c", 3, owned=set()).error_code == E.GROUP_ID_NOT_FOUND


def test_describe_list_and_delete() -> None:
    h = Harness()
    a, b = Member(h, "a", instance_id="ia"), Member(h, "b")
    a.join(), b.join()
    settle([a, b])
    D = by_name("ConsumerGroupDescribe").Request
    described = h.answer(h.send("ConsumerGroupDescribe", 1, group_ids=[GROUP, "nope"],
                                include_authorized_operations=False)).groups  # fmt: skip
    g, missing = described
    assert (g.group_state, g.group_epoch, g.assignment_epoch, g.assignor_name) == ("Stable", 2, 2, "uniform")
    by_id = {m.member_id: m for m in g.members}
    assert by_id["a"].instance_id == "ia" and by_id["a"].member_epoch == 2
    assert {(t.topic_name, p) for t in by_id["a"].assignment.topic_partitions for p in t.partitions} == a.owned
    assert by_id["a"].target_assignment == by_id["a"].assignment
    assert missing.error_code == E.GROUP_ID_NOT_FOUND
    del D
    listed = h.answer(h.send("ListGroups", 5, states_filter=[], types_filter=["consumer"])).groups
    assert [(x.group_id, x.group_type, x.group_state) for x in listed] == [(GROUP, "consumer", "Stable")]
    old = h.answer(h.send("DescribeGroups", 5, groups=[GROUP], include_authorized_operations=False)).groups[0]
    assert (old.protocol_type, old.group_state, len(old.members)) == ("consumer", "Stable", 2)
    deleted = h.answer(h.send("DeleteGroups", 2, groups_names=[GROUP])).results[0]
    assert deleted.error_code == E.NON_EMPTY_GROUP
    a.leave(), b.leave()
    h.commit({("t", 1): 4}, version=9)
    assert h.answer(h.send("DeleteGroups", 2, groups_names=[GROUP])).results[0].error_code == E.NONE
    assert h.shard.consumer_group(GROUP) is None and h.shard.committed_offset(GROUP, "t", 1) is None


def test_a_restart_keeps_epochs_and_assignments() -> None:
    h = Harness()
    a, b = Member(h, "a"), Member(h, "b", instance_id="ib")
    a.join(), b.join()
    settle([a, b])
    before = h.shard.durable_state()
    h.restart()
    assert h.shard.durable_state() == before
    settle([a, b])  # the members carry on at their epochs
    assert a.epoch == b.epoch == 2 and a.owned | b.owned == T4


def test_the_member_id_in_topic_ids_matches_the_topic() -> None:
    h = Harness()
    answer = Member(h, "a").join()
    assert {t.topic_id for t in answer.assignment.topic_partitions} == {topic_id("t")}
    assert names(h, answer.assignment) == T4
    assert CGH is not None


# --- regressions found by the property test (test_consumer_group_property.py) -----------------------------


def test_a_member_revoking_across_a_restart_is_still_fenced_after_its_rebalance_timeout() -> None:
    """Loading the group must give a member that was revoking a fresh rebalance timeout, as Kafka's
    ``onLoaded`` does: without it, a member that never revokes kept the partitions, and the group stayed
    Reconciling, for ever."""
    h = Harness()
    a = Member(h, "a", rebalance_timeout_ms=5_000)
    a.join()
    b = Member(h, "b")
    b.join()
    heartbeat(h, "a", a.epoch, owned=T4)  # told to revoke; keeps reporting all four
    assert group(h).members["a"].assignment.state is MemberState.UNREVOKED_PARTITIONS
    h.restart()
    h.advance(4_000)
    assert heartbeat(h, "a", a.epoch, owned=T4).error_code == E.NONE  # alive, still not revoking
    h.advance(1_500)
    assert "a" not in group(h).members
    settle([b])
    assert b.owned == T4 and group(h).state is S.STABLE


@pytest.mark.parametrize("member_id", ["a2", "a1"])
def test_a_static_member_back_after_leaving_mid_rebalance_goes_to_the_target_epoch(member_id: str) -> None:
    """The static member left (-2) before it heard that half its partitions move to b. Coming back (a new
    process, or the same member id) it owns nothing, so it has nothing to revoke: it must move to the target
    epoch at once. It used to be left revoking at epoch 0 (or -2), so that its next heartbeat was taken for
    a join without a rebalance timeout (INVALID_REQUEST), or for another leave, and b never got its share."""
    h = Harness()
    a, b = Member(h, "a1", instance_id="ia"), Member(h, "b")
    a.join(), b.join()
    assert a.leave(-2).error_code == E.NONE
    back = Member(h, member_id, instance_id="ia")
    answer = back.join()
    assert (answer.error_code, answer.member_epoch) == (E.NONE, group(h).epoch)
    assert group(h).members[member_id].assignment.state is MemberState.STABLE
    assert back.owned and back.owned < T4
    settle([back, b])
    assert back.owned | b.owned == T4 and not back.owned & b.owned
    assert group(h).state is S.STABLE


def test_describe_names_a_topic_a_member_still_holds_that_nobody_subscribes_to_any_more() -> None:
    h = Harness()
    a = Member(h, "a", topics=("t", "u"))
    a.join()
    Member(h, "b", topics=("t",)).join()
    everything = T4 | {("u", 0), ("u", 1)}
    heartbeat(h, "a", a.epoch, owned=everything)  # told to revoke part of t; does not yet
    heartbeat(h, "a", a.epoch, topics=("t",), owned=everything)  # and drops u from its subscription
    assert all(t.name != "u" for t in group(h).partition_metadata.topics)
    # u's partitions are pending revocation at once (Kafka's subscription consistency), still held
    a_now = group(h).members["a"].assignment
    assert {p for p in a_now.pending_revocation if p[0] == topic_id("u")} == {(topic_id("u"), 0), (topic_id("u"), 1)}
    assert not any(p[0] == topic_id("u") for p in a_now.assigned)
    described = h.answer(
        h.send("ConsumerGroupDescribe", 1, group_ids=[GROUP], include_authorized_operations=False)
    )
    (member,) = [m for m in described.groups[0].members if m.member_id == "a"]
    assert {t.topic_name for t in member.assignment.topic_partitions} == {"t", "u"}


def test_a_join_states_the_whole_subscription() -> None:
    """A static member subscribed by regular expression restarts subscribed by name: its new process's join
    carries names and no regex, so the group forgets the regex (it would otherwise keep the other topics)."""
    h = Harness(topics=StaticTopics({"t": 2, "t2": 2}))
    old = Member(h, "a1", topics=None, regex="t.*", instance_id="i")
    old.join()
    settle([old])
    assert old.owned == {("t", 0), ("t", 1), ("t2", 0), ("t2", 1)}
    assert old.leave(-2).error_code == E.NONE
    new = Member(h, "a2", topics=("t",), instance_id="i")
    assert new.join().error_code == E.NONE
    settle([new])
    assert new.owned == {("t", 0), ("t", 1)}
    md = group(h).members["a2"].metadata
    assert (md.subscribed_topics, md.subscribed_regex) == (("t",), None)
