"""Property: whatever clients and timers do, the records a shard writes rebuild its durable state exactly.

Random sequences of joins (dynamic and static, at several versions and with changing metadata), syncs,
heartbeats, leaves, commits, offset and group deletions, clock advances that fire timers, and restarts are run
against a shard through the manual-clock harness (every record goes through its bytes). After every step:

- a fresh shard that replays the whole log, decoded from bytes, holds the same durable state (each logged
  group's GroupMetadata and every committed offset);
- every group at rest (Stable, Empty) shows exactly its last record;
- the requests still parked in the shard are exactly the ones the runtime has not had answered;
- the timer deadlines the shard expects are exactly the runtime's timers;
- member bookkeeping is consistent (leader is a member, static index matches, pending syncs are members).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from coordinator_harness import Harness, StaticTopics, subscription
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from groupstream.coordinator.classic_group import GroupState
from groupstream.coordinator.config import GroupCoordinatorConfig
from groupstream.coordinator.shard import GroupCoordinatorShard
from groupstream.protocol.error_codes import ErrorCode
from groupstream.protocol.group_records import decode_record
from groupstream.protocol.messages import by_name

E = ErrorCode
GROUPS = ("g1", "g2")
CLIENTS = range(5)
STATIC = {3, 4}
PROTOCOLS = (
    (("range", "t"),),
    (("range", "t"), ("roundrobin", "t")),
    (("roundrobin", "t,u"), ("range", "t,u")),
    (("range", "u"),),
)
CONFIG = GroupCoordinatorConfig(
    initial_rebalance_delay_ms=3_000,
    offsets_retention_ms=60_000,
    offsets_retention_check_interval_ms=30_000,
)
TIMEOUTS = {"session": 10_000, "rebalance": 20_000}


@dataclass
class Client:
    member_id: str = ""
    generation: int = -1
    leader: bool = False
    members: list[str] = field(default_factory=list)


@dataclass
class World:
    h: Harness
    clients: dict[tuple[int, str], Client] = field(default_factory=dict)
    pending: dict[int, tuple[str, int, str]] = field(default_factory=dict)  # token -> (api, client, group)

    def client(self, c: int, g: str) -> Client:
        return self.clients.setdefault((c, g), Client())

    def settle(self) -> None:
        """Let clients learn from answers to their parked requests."""
        for token, (api, c, g) in list(self.pending.items()):
            if self.h.parked(token):
                continue
            del self.pending[token]
            answer = self.h.answer(token)
            if answer == E.NOT_COORDINATOR:
                continue
            if api == "join":
                self.learn_join(c, g, answer)

    def learn_join(self, c: int, g: str, answer: object) -> None:
        client = self.client(c, g)
        error = answer.error_code  # type: ignore[attr-defined]
        if error == E.MEMBER_ID_REQUIRED:
            client.member_id = answer.member_id  # type: ignore[attr-defined]
        elif error == 0:
            client.member_id = answer.member_id  # type: ignore[attr-defined]
            client.generation = answer.generation_id  # type: ignore[attr-defined]
            client.leader = answer.leader == answer.member_id  # type: ignore[attr-defined]
            client.members = [m.member_id for m in answer.members]  # type: ignore[attr-defined]
        elif error in (E.UNKNOWN_MEMBER_ID, E.FENCED_INSTANCE_ID):
            self.clients[c, g] = Client()


def _instance(c: int) -> str | None:
    return f"i{c}" if c in STATIC else None


join_step = st.tuples(
    st.just("join"),
    st.sampled_from(CLIENTS),
    st.sampled_from(GROUPS),
    st.integers(0, len(PROTOCOLS) - 1),
    st.sampled_from([3, 5, 9]),
)
sync_step = st.tuples(st.just("sync"), st.sampled_from(CLIENTS), st.sampled_from(GROUPS))
heartbeat_step = st.tuples(st.just("heartbeat"), st.sampled_from(CLIENTS), st.sampled_from(GROUPS))
leave_step = st.tuples(st.just("leave"), st.sampled_from(CLIENTS), st.sampled_from(GROUPS), st.booleans())
commit_step = st.tuples(
    st.just("commit"),
    st.sampled_from(CLIENTS),
    st.sampled_from(GROUPS),
    st.sampled_from(["t", "u"]),
    st.integers(0, 3),
    st.booleans(),
)
advance_step = st.tuples(
    st.just("advance"), st.sampled_from([0, 1_000, 3_000, 10_000, 25_000, 70_000, 310_000])
)
round_step = st.tuples(st.just("round"), st.sampled_from(GROUPS), st.integers(0, len(PROTOCOLS) - 1))
admin_step = st.tuples(
    st.sampled_from(["delete_group", "delete_offsets", "restart", "describe"]), st.sampled_from(GROUPS)
)
steps = st.lists(
    st.one_of(
        join_step,
        join_step,
        round_step,
        sync_step,
        heartbeat_step,
        leave_step,
        commit_step,
        advance_step,
        admin_step,
    ),
    min_size=5,
    max_size=60,
)


def _run(w: World, step: tuple[object, ...]) -> None:
    h = w.h
    kind = step[0]
    if kind == "join":
        _, c, g, variant, version = step
        assert (
            isinstance(c, int)
            and isinstance(g, str)
            and isinstance(variant, int)
            and isinstance(version, int)
        )
        client = w.client(c, g)
        protocols = [(name, subscription(*topics.split(","))) for name, topics in PROTOCOLS[variant]]
        for _ in range(2):  # a real client rejoins at once with the id MEMBER_ID_REQUIRED gave it
            token = h.join(
                client.member_id,
                group=g,
                instance_id=_instance(c) if version >= 5 else None,
                protocols=protocols,
                version=version,
                client_id=f"c{c}",
                **TIMEOUTS,
            )
            w.pending[token] = ("join", c, g)
            w.settle()
            if h.parked(token) or h.answer(token).error_code != E.MEMBER_ID_REQUIRED:
                break
    elif kind == "round":
        # Everyone in the group who knows it rejoins, the join phase ends, followers then the leader sync.
        _, g, variant = step
        assert isinstance(g, str) and isinstance(variant, int)
        known = [c for c in CLIENTS if w.client(c, g).member_id]
        for c in known:
            _run(w, ("join", c, g, variant, 5))
        _run(w, ("advance", 3_000))
        for leader in (False, True):
            for c in known:
                if w.client(c, g).leader == leader:
                    _run(w, ("sync", c, g))
    elif kind == "sync":
        _, c, g = step
        assert isinstance(c, int) and isinstance(g, str)
        client = w.client(c, g)
        assignments = (
            {m: f"{m}@{client.generation}".encode() for m in client.members} if client.leader else None
        )
        token = h.sync(client.member_id, client.generation, assignments, group=g, instance_id=_instance(c))
        w.pending[token] = ("sync", c, g)
    elif kind == "heartbeat":
        _, c, g = step
        assert isinstance(c, int) and isinstance(g, str)
        client = w.client(c, g)
        h.heartbeat(client.member_id, client.generation, group=g, instance_id=_instance(c))
    elif kind == "leave":
        _, c, g, by_instance = step
        assert isinstance(c, int) and isinstance(g, str)
        client = w.client(c, g)
        if by_instance and c in STATIC:
            h.leave(("", _instance(c)), group=g)
        else:
            h.leave((client.member_id, None), group=g, version=1)
        w.clients[c, g] = Client()
    elif kind == "commit":
        _, c, g, topic, partition, simple = step
        assert (
            isinstance(c, int)
            and isinstance(g, str)
            and isinstance(topic, str)
            and isinstance(partition, int)
        )
        client = w.client(c, g)
        if simple:
            h.commit({(topic, partition): h.now}, group=g)
        else:
            h.commit(
                {(topic, partition): h.now},
                group=g,
                generation=client.generation,
                member_id=client.member_id,
                instance_id=_instance(c),
            )
    elif kind == "advance":
        (_, ms) = step
        assert isinstance(ms, int)
        h.advance(ms)
    elif kind == "delete_group":
        h.delete_groups(str(step[1]))
    elif kind == "delete_offsets":
        D = by_name("OffsetDelete").Request
        h.send(
            "OffsetDelete",
            0,
            group_id=str(step[1]),
            topics=[
                D.OffsetDeleteRequestTopic(
                    name="u",
                    partitions=[
                        D.OffsetDeleteRequestTopic.OffsetDeleteRequestPartition(partition_index=p)
                        for p in range(2)
                    ],
                )
            ],
        )
    elif kind == "restart":
        h.restart()
    elif kind == "describe":
        h.describe(str(step[1]))
        h.list_groups()
        h.fetch(None, group=str(step[1]))
    w.settle()


def _check(w: World) -> None:
    h = w.h
    shard = h.shard
    # 1. Replaying the log (from its bytes) into a fresh shard rebuilds the same durable state.
    fresh = GroupCoordinatorShard(7, CONFIG, lambda prefix: f"{prefix}-replayed")
    for key, value in h.log:
        fresh.replay(decode_record(key, value))
    assert fresh.durable_state() == shard.durable_state()
    parked: set[int] = set()
    for group_id in shard.group_ids():
        group = shard.group(group_id)
        assert group is not None
        # 2. A group at rest is exactly its last record.
        if group.committed is not None and group.state in (GroupState.STABLE, GroupState.EMPTY):
            assert group.durable_view() == group.committed
        # 5. Bookkeeping.
        if group.members:
            assert group.leader_id in group.members
        assert group.static_members == {
            m.group_instance_id: m.member_id
            for m in group.members.values()
            if m.group_instance_id is not None
        }
        assert group.pending_sync_members <= set(group.members)
        assert not (group.pending_join_members & set(group.members))
        assert (group.state is GroupState.EMPTY) == (
            not group.members
        ) or group.state is GroupState.PREPARING_REBALANCE
    parked.update(shard.parked_tokens())
    # 3. No request is lost: what the shard holds is exactly what the runtime still waits on.
    assert parked == {t for t in h.sent if t not in h.answers}
    # 4. The shard's deadlines are the runtime's timers.
    assert dict(shard.deadlines) == h.timers


# Groups that start formed make the random steps land on Stable groups, not only on first joins.
warm_up = st.lists(st.tuples(st.sampled_from(CLIENTS), st.sampled_from(GROUPS)), max_size=6).map(
    lambda joins: [("join", c, g, 0, 5) for c, g in joins] + [("round", g, 0) for g in GROUPS]
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(warm_up, steps)
def test_records_rebuild_the_durable_state(
    start: list[tuple[object, ...]], script: list[tuple[object, ...]]
) -> None:
    w = World(Harness(config=CONFIG, topics=StaticTopics({"t": 4, "u": 2})))
    for step in start + script:
        _run(w, step)
        _check(w)
    w.h.restart()
    _check(w)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(CLIENTS), st.sampled_from(GROUPS)), min_size=1, max_size=8))
def test_groups_that_form_reach_stable_and_survive_restart(joins: list[tuple[int, str]]) -> None:
    """A cooperative script (everyone rejoins and syncs) always ends Stable, and a restart keeps it so."""
    w = World(Harness(config=CONFIG))
    for c, g in joins:
        _run(w, ("join", c, g, 0, 5))
    for _ in range(6):
        for c, g in sorted(w.clients):
            _run(w, ("join", c, g, 0, 5))
        _run(w, ("advance", 3_000))
        for c, g in sorted(w.clients):
            if not w.client(c, g).leader:
                _run(w, ("sync", c, g))
        for c, g in sorted(w.clients):
            if w.client(c, g).leader:
                _run(w, ("sync", c, g))
        _check(w)
    formed = {g for _, g in joins}
    for g in formed:
        assert w.h.state(g) is GroupState.STABLE
    before = w.h.shard.durable_state()
    w.h.restart()
    assert w.h.shard.durable_state() == before
    assert all(w.h.state(g) is GroupState.STABLE for g in formed)
