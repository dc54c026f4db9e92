"""Online migration between the classic and ``consumer`` protocols (Kafka 4, KIP-848), on one shard with a
manual clock: a consumer member converts a live classic group, the classic members keep working through
JoinGroup/SyncGroup/Heartbeat/LeaveGroup served from the consumer group, and the conversion replays."""

from __future__ import annotations

from typing import Any

import pytest
from consumer_group_kit import Member
from coordinator_harness import GROUP, Harness, subscription, topic_id

from groupstream.coordinator.config import GroupCoordinatorConfig
from groupstream.coordinator.consumer_group import ConsumerGroup
from groupstream.coordinator.reconcile import MemberState
from groupstream.protocol.consumer_protocol import (
    ConsumerAssignment,
    ConsumerSubscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from groupstream.protocol.error_codes import ErrorCode

E = ErrorCode
PROTOCOL = "cooperative-sticky"
T4 = {("t", p) for p in range(4)}


def _config(**kwargs: Any) -> GroupCoordinatorConfig:
    return GroupCoordinatorConfig(consumer_assignment_interval_ms=0, initial_rebalance_delay_ms=0, **kwargs)


class Classic:
    """A cooperative classic consumer as confluent-kafka's cooperative-sticky one behaves: it joins with
    what it owns in its subscription, takes what SyncGroup gives it (revoking the rest at once), rejoins
    when a heartbeat says REBALANCE_IN_PROGRESS or when it had to revoke something."""

    def __init__(self, h: Harness, name: str, *, instance_id: str | None = None, session: int = 10_000,
                 protocol: str = PROTOCOL) -> None:  # fmt: skip
        self.h, self.name, self.instance_id, self.session, self.protocol = h, name, instance_id, session, protocol
        self.member_id = ""
        self.generation = -1
        self.owned: set[tuple[str, int]] = set()

    def send_join(self) -> int:
        return self.h.join(self.member_id, instance_id=self.instance_id, session=self.session, client_id=self.name,
                           protocols=[(self.protocol, subscription("t", owned=self.owned))])  # fmt: skip

    def took_join(self, answer: Any) -> Any:
        if answer.error_code == E.MEMBER_ID_REQUIRED:
            self.member_id = answer.member_id
            return self.took_join(self.h.answer(self.send_join()))
        if answer.error_code == E.NONE:
            self.member_id, self.generation = answer.member_id, answer.generation_id
        return answer

    def join(self) -> Any:
        return self.took_join(self.h.answer(self.send_join()))

    def sync(self, assignments: dict[str, bytes] | None = None) -> Any:
        answer = self.h.answer(self.h.sync(self.member_id, self.generation, assignments, instance_id=self.instance_id,
                                           version=5, protocol_type="consumer", protocol_name=self.protocol))  # fmt: skip
        if answer.error_code == E.NONE:
            given = set(decode_assignment(answer.assignment).partitions)
            revoked = self.owned - given
            self.owned = given
            return answer, bool(revoked)
        return answer, False

    def beat(self) -> ErrorCode:
        return self.h.heartbeat(self.member_id, self.generation, instance_id=self.instance_id)

    def rebalance(self) -> None:
        """Rejoin and sync until the coordinator has nothing more to say (cooperative: a revocation is
        followed by another rejoin)."""
        for _ in range(6):
            assert self.join().error_code == E.NONE
            answer, revoked = self.sync()
            if answer.error_code == E.REBALANCE_IN_PROGRESS:
                continue
            assert answer.error_code == E.NONE, answer
            if not revoked and self.beat() == E.NONE:
                return
        raise AssertionError(f"{self.name} did not settle")


def classic_group(
    h: Harness, *names: str, instance_ids: dict[str, str] | None = None, sessions: dict[str, int] | None = None,
    protocol: str = PROTOCOL, user_data: bytes | None = None,
) -> list[Classic]:
    """A Stable classic group of ``names``: they join together, the first leads and splits t's partitions."""
    members = [Classic(h, n, instance_id=(instance_ids or {}).get(n), session=(sessions or {}).get(n, 10_000),
                       protocol=protocol) for n in names]  # fmt: skip
    for m in members:
        if m.instance_id is None:
            first = m.h.answer(m.send_join())
            assert first.error_code == E.MEMBER_ID_REQUIRED
            m.member_id = first.member_id
    tokens = [m.send_join() for m in members]
    h.advance(0)
    for m, t in zip(members, tokens, strict=True):
        assert m.took_join(h.answer(t)).error_code == E.NONE
    split: dict[str, bytes] = {}
    for i, m in enumerate(members):
        mine = tuple(("t", p) for p in range(4) if p % len(members) == i)
        split[m.member_id] = encode_assignment(ConsumerAssignment(mine, user_data))
    for i, m in enumerate(members):
        answer, _ = m.sync(split if i == 0 else None)
        assert answer.error_code == E.NONE
    group = h.shard.group(GROUP)
    assert group is not None and group.state.value == "Stable"
    return members


def consumer_group(h: Harness) -> ConsumerGroup:
    g = h.shard.consumer_group(GROUP)
    assert g is not None
    return g


def no_two_owners(*holders: set[tuple[str, int]]) -> None:
    seen: set[tuple[str, int]] = set()
    for owned in holders:
        assert not (owned & seen), f"two owners of {owned & seen}"
        seen |= owned


def test_a_consumer_member_converts_a_live_classic_group_and_the_conversion_replays() -> None:
    h = Harness(config=_config())
    a, b = classic_group(h, "a", "b", instance_ids={"b": "ib"})
    generation = a.generation
    assert (a.owned, b.owned) == ({("t", 0), ("t", 2)}, {("t", 1), ("t", 3)})
    h.commit({("t", 0): 11}, member_id=a.member_id, generation=generation)
    c = Member(h, "c")
    answer = c.join()
    assert answer.error_code == E.NONE
    assert h.shard.group(GROUP) is None  # the classic group is gone ...
    g = consumer_group(h)  # ... and the consumer group holds everyone
    assert set(g.members) == {a.member_id, b.member_id, "c"}
    for m in (a, b):
        member = g.members[m.member_id]
        md = member.metadata
        assert md.uses_classic_protocol and md.classic_session_timeout_ms == m.session
        assert [p.name for p in md.classic_protocols or ()] == [PROTOCOL]
        assert md.subscribed_topics == ("t",) and md.client_id == m.name
        # still the classic group's assignment, at its generation, until the member rejoins
        assert member.epoch == generation
        assert member.assignment.assigned == {(topic_id(t), p) for t, p in m.owned}
    assert g.static_member("ib") is g.members[b.member_id]  # static membership carries over
    assert not g.members["c"].metadata.uses_classic_protocol
    assert g.epoch == generation + 1 and c.epoch == generation + 1
    assert c.owned == set()  # everything is still held by the classic members
    assert h.shard.committed_offset(GROUP, "t", 0).offset == 11
    before = h.shard.durable_state()
    h.restart()
    assert h.shard.durable_state() == before


def test_classic_members_learn_of_the_rebalance_revoke_and_the_group_converges() -> None:
    h = Harness(config=_config())
    a, b = classic_group(h, "a", "b")
    c = Member(h, "c")
    c.join()
    for m in (a, b):
        assert m.beat() == E.REBALANCE_IN_PROGRESS
    for _ in range(4):
        for m in (a, b):
            if m.beat() != E.NONE:
                m.rebalance()
            no_two_owners(a.owned, b.owned, c.owned)
        c.beat()
        no_two_owners(a.owned, b.owned, c.owned)
    assert a.owned | b.owned | c.owned == T4
    assert c.owned and a.owned and b.owned
    g = consumer_group(h)
    assert g.state.value == "Stable"
    assert all(m.epoch == g.epoch for m in g)
    assert a.beat() == E.NONE and b.beat() == E.NONE
    before = h.shard.durable_state()
    h.restart()
    assert h.shard.durable_state() == before


def test_a_revoking_classic_member_gets_only_what_it_keeps_until_it_rejoins() -> None:
    h = Harness(config=_config())
    (a,) = classic_group(h, "a")
    assert a.owned == T4
    c = Member(h, "c")
    c.join()
    assert a.beat() == E.REBALANCE_IN_PROGRESS
    assert a.join().error_code == E.NONE
    member = consumer_group(h).members[a.member_id]
    assert member.assignment.state is MemberState.UNREVOKED_PARTITIONS
    answer, revoked = a.sync()
    assert answer.error_code == E.NONE and revoked and len(a.owned) == 2  # the other two are revoked
    assert c.beat().error_code == E.NONE and c.owned == set()  # not before a rejoined without them
    assert a.beat() == E.REBALANCE_IN_PROGRESS  # it still has to report the revocation
    a.rebalance()
    c.beat()
    assert len(c.owned) == 2 and not (c.owned & a.owned)


def test_classic_requests_to_a_consumer_group_are_validated_as_kafka_does() -> None:
    h = Harness(config=_config())
    a, b = classic_group(h, "a", "b", instance_ids={"b": "ib"})
    Member(h, "c").join()
    assert h.heartbeat(a.member_id, a.generation + 5) == E.ILLEGAL_GENERATION
    assert h.heartbeat("nobody", a.generation) == E.UNKNOWN_MEMBER_ID
    assert h.heartbeat("c", 1) == E.UNKNOWN_MEMBER_ID  # a consumer-protocol member
    assert h.heartbeat("other", b.generation, instance_id="ib") == E.FENCED_INSTANCE_ID
    other = h.answer(h.join("", protocols=[("range", subscription("t"))]))
    assert other.error_code == E.INCONSISTENT_GROUP_PROTOCOL  # not a protocol every classic member has
    bad_type = h.answer(h.join("", protocol_type="connect", protocols=[(PROTOCOL, subscription("t"))]))
    assert bad_type.error_code == E.INCONSISTENT_GROUP_PROTOCOL
    first = h.answer(h.join("", protocols=[(PROTOCOL, subscription("t"))]))
    assert first.error_code == E.MEMBER_ID_REQUIRED and first.member_id
    wrong_name = h.answer(h.sync(a.member_id, a.generation, version=5, protocol_type="consumer", protocol_name="range"))
    assert wrong_name.error_code in (E.INCONSISTENT_GROUP_PROTOCOL, E.REBALANCE_IN_PROGRESS)
    left = h.leave((a.member_id, None), ("ghost", None))
    assert [m.error_code for m in left.members] == [E.NONE, E.UNKNOWN_MEMBER_ID]
    assert a.member_id not in consumer_group(h).members


def test_a_new_classic_member_joins_a_consumer_group_with_classic_members() -> None:
    h = Harness(config=_config())
    a, b = classic_group(h, "a", "b")
    c = Member(h, "c")
    c.join()
    d = Classic(h, "d")
    d.rebalance()
    members = (a, b, d)
    for _ in range(5):
        for m in members:
            if m.beat() != E.NONE:
                m.rebalance()
            no_two_owners(a.owned, b.owned, c.owned, d.owned)
        c.beat()
    assert a.owned | b.owned | c.owned | d.owned == T4
    assert all(m.owned for m in (a, b, c, d))


def test_a_silent_classic_member_is_fenced_after_its_own_session_timeout() -> None:
    h = Harness(config=_config())
    a, b = classic_group(h, "a", "b", sessions={"b": 7_000})
    c = Member(h, "c")
    c.join()
    h.advance(6_000)
    c.beat(), a.beat()
    h.advance(1_500)  # past b's 7 s, within the others' 10 s and 45 s
    assert b.member_id not in consumer_group(h).members and a.member_id in consumer_group(h).members


def test_a_static_classic_member_restarting_takes_its_place() -> None:
    h = Harness(config=_config())
    _, b = classic_group(h, "a", "b", instance_ids={"b": "ib"})
    Member(h, "c").join()
    again = Classic(h, "b2", instance_id="ib")
    again.owned = set()
    assert again.join().error_code == E.NONE
    g = consumer_group(h)
    assert g.static_member("ib") is g.members[again.member_id] and b.member_id not in g.members


@pytest.mark.parametrize("policy", ["downgrade", "disabled"])
def test_the_policy_can_forbid_the_upgrade(policy: str) -> None:
    h = Harness(config=_config(consumer_migration_policy=policy))
    classic_group(h, "a")
    answer = Member(h, "c").join()
    assert (answer.error_code, answer.error_message) == (E.GROUP_ID_NOT_FOUND, f"Group {GROUP} is not a consumer group.")
    assert h.shard.group(GROUP) is not None and h.shard.consumer_group(GROUP) is None


def test_describe_shows_each_members_protocol() -> None:
    h = Harness(config=_config())
    (a,) = classic_group(h, "a")
    Member(h, "c").join()
    described = h.answer(h.send("ConsumerGroupDescribe", 1, group_ids=[GROUP], include_authorized_operations=False))
    types = {m.member_id: m.member_type for m in described.groups[0].members}
    assert types == {a.member_id: 0, "c": 1}


def test_a_classic_member_joining_an_empty_consumer_group_makes_it_classic_again() -> None:
    h = Harness(config=_config())
    c = Member(h, "c")
    c.join()
    c.leave()
    assert consumer_group(h).members == {}
    (a,) = classic_group(h, "a")
    assert h.shard.consumer_group(GROUP) is None and a.owned == T4


def test_the_policy_is_a_broker_property() -> None:
    config = GroupCoordinatorConfig.from_properties({"group.consumer.migration.policy": "Upgrade"})
    assert (config.upgrade_enabled, config.downgrade_enabled) == (True, False)
    assert GroupCoordinatorConfig().consumer_migration_policy == "bidirectional"
    with pytest.raises(ValueError, match=r"group\.consumer\.migration\.policy must be one of"):
        GroupCoordinatorConfig.from_properties({"group.consumer.migration.policy": "sideways"})


def classic_rebalance(h: Harness, members: list[Classic]) -> None:
    """Every member rejoins the classic group; the first to be told it leads splits t's partitions."""
    tokens = [m.send_join() for m in members]
    h.advance(0)
    answers = [m.took_join(h.answer(t)) for m, t in zip(members, tokens, strict=True)]
    assert all(a.error_code == E.NONE for a in answers), answers
    leader = next(m for m, a in zip(members, answers, strict=True) if a.leader == m.member_id)
    split = {
        m.member_id: encode_assignment(ConsumerAssignment(tuple(("t", p) for p in range(4) if p % len(members) == i)))
        for i, m in enumerate(members)
    }
    for m in [leader] + [m for m in members if m is not leader]:
        answer, _ = m.sync(split if m is leader else None)
        assert answer.error_code == E.NONE


def upgraded(h: Harness) -> tuple[Classic, Classic, Member]:
    """Classic a and b, then consumer c converts the group and everyone settles."""
    a, b = classic_group(h, "a", "b")
    c = Member(h, "c")
    c.join()
    for _ in range(4):
        for m in (a, b):
            if m.beat() != E.NONE:
                m.rebalance()
        c.beat()
    assert a.owned | b.owned | c.owned == T4 and c.owned
    return a, b, c


def test_the_last_consumer_member_leaving_makes_the_group_classic_again_and_it_rebalances() -> None:
    h = Harness(config=_config())
    a, b, c = upgraded(h)
    epoch = consumer_group(h).epoch
    assert c.leave().error_code == E.NONE
    assert h.shard.consumer_group(GROUP) is None
    classic = h.shard.group(GROUP)
    assert classic is not None and classic.generation == epoch and set(classic.members) == {a.member_id, b.member_id}
    assert classic.protocol_name == PROTOCOL and classic.leader_id in classic.members
    # each member's classic assignment is what it held in the consumer group
    held = {mid: set(decode_assignment(m.assignment).partitions) for mid, m in classic.members.items()}
    assert (held[a.member_id], held[b.member_id]) == (a.owned, b.owned)
    h.advance(0)  # the rebalance that follows the conversion
    assert classic.state.value == "PreparingRebalance"
    assert a.beat() in (E.REBALANCE_IN_PROGRESS, E.ILLEGAL_GENERATION)
    classic_rebalance(h, [a, b])
    assert a.owned | b.owned == T4 and not (a.owned & b.owned)
    assert a.beat() == E.NONE and b.beat() == E.NONE
    generation = classic.generation
    assert generation == epoch + 1
    h.restart()
    restarted = h.shard.group(GROUP)
    assert restarted is not None and restarted.generation == generation and h.shard.consumer_group(GROUP) is None


def test_a_downgrade_replays_as_it_was_written() -> None:
    h = Harness(config=_config())
    _, _, c = upgraded(h)
    c.leave()
    before = h.shard.durable_state()
    h.restart()
    assert h.shard.durable_state() == before


def test_a_fenced_consumer_member_also_downgrades_the_group() -> None:
    h = Harness(config=_config())
    a, b, _ = upgraded(h)
    for _ in range(10):  # past the consumer member's 45 s session, the classic members heartbeating
        h.advance(5_000)
        a.beat(), b.beat()
    assert h.shard.consumer_group(GROUP) is None and h.shard.group(GROUP) is not None


@pytest.mark.parametrize("policy", ["upgrade", "disabled"])
def test_the_policy_can_forbid_the_downgrade(policy: str) -> None:
    h = Harness(config=_config(consumer_migration_policy="bidirectional"))
    a, b, c = upgraded(h)
    h.shard._ctx.config = _config(consumer_migration_policy=policy)  # the broker's setting changed since
    c.leave()
    g = consumer_group(h)
    assert set(g.members) == {a.member_id, b.member_id} and h.shard.group(GROUP) is None


@pytest.mark.parametrize(("protocol", "error"), [("cooperative-sticky", E.NONE), ("custom", E.GROUP_ID_NOT_FOUND)])
def test_assignment_user_data_blocks_the_upgrade_only_for_a_custom_assignor(protocol: str, error: ErrorCode) -> None:
    # librdkafka echoes each member's subscription user data in its assignment: Kafka refuses any, we refuse
    # only a custom assignor's (whose meaning the server assignor would lose).
    h = Harness(config=_config())
    classic_group(h, "a", protocol=protocol, user_data=b"sticky-state")
    assert Member(h, "c").join().error_code == error
    assert (h.shard.consumer_group(GROUP) is None) == (error != E.NONE)


def test_a_classic_member_told_to_rejoin_that_never_does_is_fenced_after_its_rebalance_timeout() -> None:
    h = Harness(config=_config())
    (a,) = classic_group(h, "a")
    c = Member(h, "c", rebalance_timeout_ms=60_000)
    c.join()
    assert c.owned == set()
    assert a.beat() == E.REBALANCE_IN_PROGRESS  # ... and a goes on heartbeating, never rejoining
    for _ in range(5):
        h.advance(5_000)
        c.beat()
        if a.member_id in consumer_group(h).members:
            assert a.beat() == E.REBALANCE_IN_PROGRESS
    h.advance(5_001)  # past a's 30 s rebalance timeout since it was first told
    assert a.member_id not in consumer_group(h).members
    c.beat()
    assert c.owned == T4


def test_a_classic_member_that_joins_but_never_syncs_is_fenced_after_its_rebalance_timeout() -> None:
    h = Harness(config=_config())
    (a,) = classic_group(h, "a")
    c = Member(h, "c", rebalance_timeout_ms=60_000)
    c.join()
    assert a.beat() == E.REBALANCE_IN_PROGRESS
    assert a.join().error_code == E.NONE  # no SyncGroup follows
    for _ in range(6):
        h.advance(5_000)
        c.beat()
        a.beat()  # heartbeats do not stand for the SyncGroup
    h.advance(1)
    assert a.member_id not in consumer_group(h).members


def test_a_classic_member_that_rejoins_and_syncs_in_time_stays() -> None:
    h = Harness(config=_config())
    (a,) = classic_group(h, "a")
    c = Member(h, "c")
    c.join()
    for _ in range(4):  # 20 s of being told to rejoin (within its 30 s rebalance timeout)
        h.advance(5_000)
        assert a.beat() == E.REBALANCE_IN_PROGRESS
    a.rebalance()
    for _ in range(4):  # 20 s more: past 30 s since it was told and since it joined; both timers cancelled
        h.advance(5_000)
        c.beat()
        if a.beat() != E.NONE:
            a.rebalance()
    assert a.member_id in consumer_group(h).members and a.owned and c.owned


def test_a_restart_before_the_rebalance_that_follows_a_downgrade_still_rebalances() -> None:
    h = Harness(config=_config())
    a, b, c = upgraded(h)
    c.leave()  # the rebalance timer is due now, but the coordinator restarts first
    h.restart()
    classic = h.shard.group(GROUP)
    assert classic is not None and classic.state.value == "PreparingRebalance"
    classic_rebalance(h, [a, b])
    assert a.owned | b.owned == T4


@pytest.mark.parametrize("version", [2, 8, 9])
def test_classic_members_of_a_consumer_group_commit_at_their_generation_with_any_version(version: int) -> None:
    h = Harness(config=_config())
    (a,) = classic_group(h, "a")
    c = Member(h, "c")
    c.join()
    a.rebalance()
    g = consumer_group(h)
    assert a.generation == g.members[a.member_id].epoch
    assert set(h.commit({("t", 0): 5}, member_id=a.member_id, generation=a.generation, version=version).values()) == {
        E.NONE}  # fmt: skip
    wrong = h.commit({("t", 0): 6}, member_id=a.member_id, generation=a.generation - 1, version=version)
    assert set(wrong.values()) == {E.ILLEGAL_GENERATION}
    assert h.shard.committed_offset(GROUP, "t", 0).offset == 5
    if version < 9:  # a consumer-protocol member must commit with v9+
        assert set(h.commit({("t", 1): 1}, member_id="c", generation=c.epoch, version=version).values()) == {
            E.UNSUPPORTED_VERSION}  # fmt: skip


# --- downgrade on a static member's replacement (Kafka's validateOnlineDowngradeWithReplacedMemberId) -------------


def upgraded_static(h: Harness, *, others: tuple[Member, ...] = ()) -> tuple[Classic, Classic, Member]:
    """Static classic a and b, then static consumer member n (instance id "in") converts the group, and
    everyone (with ``others``, consumer members joining after n) settles."""
    a, b = classic_group(h, "a", "b", instance_ids={"a": "ia", "b": "ib"})
    n = Member(h, "n", instance_id="in")
    assert n.join().error_code == E.NONE
    for m in others:
        assert m.join().error_code == E.NONE
    for _ in range(8):
        for c in (a, b):
            if c.beat() != E.NONE:
                c.rebalance()
        for m in (n, *others):
            m.beat()
    assert consumer_group(h).state.value == "Stable"
    assert set().union(a.owned, b.owned, n.owned, *(m.owned for m in others)) == T4 and n.owned
    return a, b, n


def classic_of(h: Harness) -> Any:
    classic = h.shard.group(GROUP)
    assert classic is not None and h.shard.consumer_group(GROUP) is None
    return classic


def test_a_classic_process_replacing_the_last_consumer_static_member_makes_the_group_classic_at_once() -> None:
    h = Harness(config=_config())
    a, b, n = upgraded_static(h)
    epoch, held = consumer_group(h).epoch, set(n.owned)
    assert n.leave(epoch=-2).error_code == E.NONE  # the process stops; its partitions wait for the instance id
    r = Classic(h, "r", instance_id="in")
    answer = r.join()
    assert (answer.error_code, answer.generation_id, answer.protocol_name) == (E.NONE, epoch, PROTOCOL)
    classic = classic_of(h)
    assert classic.generation == epoch and set(classic.members) == {a.member_id, b.member_id, r.member_id}
    assert classic.static_members == {"ia": a.member_id, "ib": b.member_id, "in": r.member_id}
    assert classic.protocol_name == PROTOCOL and classic.leader_id == a.member_id
    assert classic.members[r.member_id].session_timeout_ms == r.session
    h.advance(0)
    assert classic.state.value == "Stable"  # settled: no rebalance, as in Kafka
    assert a.beat() == E.NONE and b.beat() == E.NONE  # the others go on at their generation
    synced, _ = r.sync()
    assert synced.error_code == E.NONE and r.owned == held  # the new process has what its instance id had
    no_two_owners(a.owned, b.owned, r.owned)
    assert a.owned | b.owned | r.owned == T4
    assert r.beat() == E.NONE
    before = h.shard.durable_state()
    h.restart()
    assert h.shard.durable_state() == before
    restarted = classic_of(h)
    h.advance(0)
    assert restarted.state.value == "Stable" and restarted.generation == epoch  # no rebalance owed


def test_a_replacement_while_the_group_still_reconciles_downgrades_and_rebalances() -> None:
    h = Harness(config=_config())
    a, b = classic_group(h, "a", "b", instance_ids={"a": "ia", "b": "ib"})
    n = Member(h, "n", instance_id="in")
    n.join()  # converts the group; a and b have not been told yet and hold everything
    r = Classic(h, "r", instance_id="in")
    assert r.join().error_code == E.NONE
    classic = classic_of(h)
    held = {mid: set(decode_assignment(m.assignment).partitions) for mid, m in classic.members.items()}
    assert held == {a.member_id: a.owned, b.member_id: b.owned, r.member_id: set()}  # what each holds
    h.advance(0)
    assert classic.state.value == "PreparingRebalance"
    classic_rebalance(h, [a, b, r])
    no_two_owners(a.owned, b.owned, r.owned)
    assert a.owned | b.owned | r.owned == T4 and r.owned


def test_a_lone_consumer_static_member_replaced_by_a_classic_process_leaves_a_classic_group() -> None:
    h = Harness(config=_config())
    n = Member(h, "n", instance_id="in")
    n.join()
    n.beat()
    assert n.owned == T4
    r = Classic(h, "r", instance_id="in")
    assert r.join().error_code == E.NONE
    classic = classic_of(h)
    assert set(classic.members) == {r.member_id}
    h.advance(0)
    assert classic.state.value == "Stable"
    synced, _ = r.sync()
    assert synced.error_code == E.NONE and r.owned == T4


def test_the_classic_answer_names_the_protocol_the_members_vote_for() -> None:
    # The joiner's first protocol is not one the others have: Kafka answers it (and the classic group then
    # refuses the SyncGroup that names it); we answer the group's.
    h = Harness(config=_config())
    upgraded_static(h)
    answer = h.answer(h.join(instance_id="in", protocols=[("range", subscription("t")), (PROTOCOL, subscription("t"))]))
    assert (answer.error_code, answer.protocol_name) == (E.NONE, PROTOCOL)
    assert classic_of(h).protocol_name == PROTOCOL


@pytest.mark.parametrize("policy", ["upgrade", "disabled"])
def test_the_policy_can_forbid_the_downgrade_on_replacement(policy: str) -> None:
    h = Harness(config=_config())
    a, b, _ = upgraded_static(h)
    h.shard._ctx.config = _config(consumer_migration_policy=policy)  # the broker's setting changed since
    r = Classic(h, "r", instance_id="in")
    assert r.join().error_code == E.NONE
    g = consumer_group(h)
    assert set(g.members) == {a.member_id, b.member_id, r.member_id}
    assert g.static_member("in") is g.members[r.member_id] and g.members[r.member_id].metadata.uses_classic_protocol


def test_no_downgrade_on_replacement_while_another_consumer_member_stays_or_past_the_classic_max_size() -> None:
    h = Harness(config=_config())
    a, b, _ = upgraded_static(h, others=(Member(h, "c"),))
    r = Classic(h, "r", instance_id="in")
    assert r.join().error_code == E.NONE
    assert set(consumer_group(h).members) == {a.member_id, b.member_id, "c", r.member_id}
    h = Harness(config=_config(max_size=2))
    a, b, _ = upgraded_static(h)
    r = Classic(h, "r", instance_id="in")
    assert r.join().error_code == E.NONE
    assert set(consumer_group(h).members) == {a.member_id, b.member_id, r.member_id}


def test_describe_groups_shows_a_classic_members_own_metadata_and_its_assignment_as_it_syncs_it() -> None:
    # (Kafka 4 does not describe a consumer group through DescribeGroups at all: README.)
    h = Harness(config=_config())
    c = Member(h, "c")
    c.join()
    assert c.owned == T4
    sent = encode_subscription(ConsumerSubscription(("t",), user_data=b"d's own"), 1)
    first = h.answer(h.join("", protocols=[(PROTOCOL, sent)], client_id="d"))
    assert first.error_code == E.MEMBER_ID_REQUIRED
    d, synced = str(first.member_id), None
    for _ in range(5):
        joined = h.answer(h.join(d, protocols=[(PROTOCOL, sent)], client_id="d"))
        assert joined.error_code == E.NONE
        synced = h.answer(h.sync(d, joined.generation_id, version=5, protocol_type="consumer", protocol_name=PROTOCOL))
        c.beat(), c.beat()  # c revokes what d is to have
        if synced.error_code == E.NONE and h.heartbeat(d, joined.generation_id) == E.NONE:
            break
    assert synced is not None and synced.error_code == E.NONE
    held = set(decode_assignment(synced.assignment).partitions)
    assert len(held) == 2 and not held & c.owned
    described = h.answer(h.send("DescribeGroups", 5, groups=[GROUP], include_authorized_operations=False)).groups[0]
    assert (described.error_code, described.protocol_type, described.group_state) == (0, "consumer", "Stable")
    by_id = {m.member_id: m for m in described.members}
    assert bytes(by_id[d].member_metadata) == sent  # as it sent it, user data and all
    assert bytes(by_id[d].member_assignment) == bytes(synced.assignment)  # as its SyncGroup got it (version 1)
    assert decode_subscription(bytes(by_id["c"].member_metadata)).topics == ("t",)  # a consumer member: its topics
    assert set(decode_assignment(bytes(by_id["c"].member_assignment)).partitions) == c.owned


def test_a_consumer_process_taking_a_classic_static_members_instance_id_replaces_it_at_once() -> None:
    # Kafka asks for a static leave first only between two consumer-protocol processes: a rolling upgrade of
    # static members (the classic process stops without leaving) takes the place at once, in a classic group
    # (converting it) and in a consumer group alike.
    h = Harness(config=_config())
    a, b = classic_group(h, "a", "b", instance_ids={"a": "ia", "b": "ib"})
    kept = set(a.owned)
    n = Member(h, "n", instance_id="ib")
    assert n.join().error_code == E.NONE
    g = consumer_group(h)
    assert g.static_member("ib") is g.members["n"] and b.member_id not in g.members
    assert n.owned == b.owned  # what the instance id held
    assert b.beat() == E.FENCED_INSTANCE_ID  # the old process, were it still running
    if a.beat() != E.NONE:  # the group's first partition metadata bumps its epoch, as in Kafka
        a.rebalance()
    assert a.owned == kept
    m = Member(h, "m", instance_id="ia")
    assert m.join().error_code == E.NONE
    g = consumer_group(h)
    assert g.static_member("ia") is g.members["m"] and a.member_id not in g.members and m.owned == a.owned
    assert n.beat().error_code == E.NONE and m.beat().error_code == E.NONE
    no_two_owners(n.owned, m.owned)
    assert n.owned | m.owned == T4 and g.state.value == "Stable"
    before = h.shard.durable_state()
    h.restart()
    assert h.shard.durable_state() == before
