"""Online migration under churn: classic and ``consumer``-protocol clients of one group come and go in random
order (start, heartbeat, leave, crash, go silent), while the clock moves (sessions, join, sync and rebalance
timeouts fire) and the coordinator restarts. The group converts to a consumer group when a consumer client
joins a live classic group, and back when the last consumer client leaves or is fenced, many times over.

Classic clients are eager (as the range assignor's): told to rejoin, they give up everything first; the one a
classic JoinGroup names leader splits the partitions. Consumer clients are well-behaved KIP-848 clients. One
client is a static member (``group.instance.id``): a new process of it, of either protocol, takes its place
(Kafka's static replacement across protocols, which may convert the group either way).
Everything goes through the manual-clock harness and the records' bytes. After every step:

(a) no partition is owned by two clients (what each believes it owns from the answers it saw; a client the
    coordinator removed owns nothing);
(b) a fresh shard replaying the log has the same durable state (whichever kind the group is);
(c) the shard's deadlines are the runtime's timers.

When the churn stops and every client that wants to be in the group keeps heartbeating, every partition ends
up owned exactly once, and the group is a consumer group exactly when some consumer client is in it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from consumer_group_kit import heartbeat, names
from coordinator_harness import GROUP, Harness, StaticTopics, subscription
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from groupstream.coordinator.config import GroupCoordinatorConfig
from groupstream.coordinator.shard import GroupCoordinatorShard
from groupstream.protocol.consumer_protocol import ConsumerAssignment, decode_assignment, encode_assignment
from groupstream.protocol.error_codes import ErrorCode
from groupstream.protocol.group_records import decode_record

E = ErrorCode
PARTITIONS = 6
EVERY = {("t", p) for p in range(PARTITIONS)}
CONFIG = GroupCoordinatorConfig(
    consumer_assignment_interval_ms=0,
    initial_rebalance_delay_ms=0,
    consumer_session_timeout_ms=10_000,
    consumer_heartbeat_interval_ms=1_000,
)
CLIENTS = (0, 1, 2, 3)
STATIC = {3: "i3"}  # client -> its group.instance.id
SESSION_MS, REBALANCE_MS = 8_000, 12_000


@dataclass
class Client:
    cid: int
    kind: str = "classic"  # the protocol of the running process
    running: bool = False
    silent: bool = False
    incarnation: int = 0
    member_id: str = ""
    epoch: int = 0  # consumer: member epoch; classic: generation
    owned: set[tuple[str, int]] = field(default_factory=set)
    joining: int | None = None  # a parked classic JoinGroup's token
    syncing: int | None = None  # a parked classic SyncGroup's token
    stable: bool = False  # classic: synced, heartbeating

    @property
    def instance_id(self) -> str | None:
        return STATIC.get(self.cid)


@dataclass
class World:
    h: Harness
    clients: dict[int, Client] = field(default_factory=lambda: {c: Client(c) for c in CLIENTS})
    kinds: list[str] = field(default_factory=list)  # the group's kind each time it changed, with members
    static_switches: int = 0  # the static client's new process spoke the other protocol

    # --- classic clients (eager) ---------------------------------------------------------------------------

    def classic_rejoin(self, c: Client) -> None:
        c.owned, c.stable, c.syncing = set(), False, None
        c.joining = self.h.join(c.member_id, session=SESSION_MS, rebalance=REBALANCE_MS, client_id=f"c{c.cid}",
                                protocols=[("range", subscription("t"))], instance_id=c.instance_id)  # fmt: skip
        self.poll(c)

    def classic_joined(self, c: Client, answer: Any) -> None:
        code = E(answer.error_code)
        if code == E.MEMBER_ID_REQUIRED:
            c.member_id = answer.member_id
            self.classic_rejoin(c)
        elif code in (E.UNKNOWN_MEMBER_ID, E.FENCED_INSTANCE_ID):
            c.member_id = ""
            self.classic_rejoin(c)
        elif code in (E.REBALANCE_IN_PROGRESS, E.ILLEGAL_GENERATION):
            self.classic_rejoin(c)
        else:
            assert code == E.NONE, answer
            c.member_id, c.epoch = answer.member_id, answer.generation_id
            split: dict[str, bytes] = {}
            if answer.leader == c.member_id:
                ids = sorted(m.member_id for m in answer.members)
                for i, mid in enumerate(ids):
                    mine = tuple(p for p in sorted(EVERY) if p[1] % len(ids) == i)
                    split[mid] = encode_assignment(ConsumerAssignment(mine))
            c.syncing = self.h.sync(c.member_id, c.epoch, split, version=5, protocol_type="consumer",
                                    protocol_name="range", instance_id=c.instance_id)  # fmt: skip
            self.poll(c)

    def classic_synced(self, c: Client, answer: Any) -> None:
        code = E(answer.error_code)
        if code == E.NONE:
            c.owned, c.stable = set(decode_assignment(answer.assignment).partitions), True
        elif code in (E.UNKNOWN_MEMBER_ID, E.FENCED_INSTANCE_ID):
            c.member_id = ""
            self.classic_rejoin(c)
        else:
            assert code in (E.REBALANCE_IN_PROGRESS, E.ILLEGAL_GENERATION), answer
            self.classic_rejoin(c)

    def poll(self, c: Client) -> None:
        """Take a parked classic request's answer, if it came."""
        if c.joining is not None and not self.h.parked(c.joining):
            token, c.joining = c.joining, None
            self.classic_joined(c, self.h.answer(token))
        elif c.syncing is not None and not self.h.parked(c.syncing):
            token, c.syncing = c.syncing, None
            self.classic_synced(c, self.h.answer(token))

    def classic_beat(self, c: Client) -> None:
        if not c.stable:
            return
        code = self.h.heartbeat(c.member_id, c.epoch, instance_id=c.instance_id)
        if code in (E.REBALANCE_IN_PROGRESS, E.ILLEGAL_GENERATION):
            self.classic_rejoin(c)
        elif code != E.NONE:
            assert code in (E.UNKNOWN_MEMBER_ID, E.FENCED_INSTANCE_ID), code
            c.member_id = ""
            self.classic_rejoin(c)

    # --- consumer clients ----------------------------------------------------------------------------------

    def consumer_beat(self, c: Client, join: bool = False) -> None:
        if join or c.epoch == 0:  # not in the group yet (a join refused while the group could not convert)
            c.owned, c.epoch = set(), 0
            answer = heartbeat(self.h, c.member_id, 0, topics=("t",), owned=set(), rebalance_timeout_ms=REBALANCE_MS,
                               client_id=f"c{c.cid}", instance_id=c.instance_id)  # fmt: skip
        else:
            answer = heartbeat(self.h, c.member_id, c.epoch, owned=set(c.owned), instance_id=c.instance_id)
        if answer.error_code == E.NONE:
            c.epoch = answer.member_epoch
            if answer.assignment is not None:
                c.owned = names(self.h, answer.assignment)
            return
        # a static client's new process may wait for its old one (of the same protocol) to be released
        assert answer.error_code in (E.UNKNOWN_MEMBER_ID, E.FENCED_MEMBER_EPOCH, E.GROUP_ID_NOT_FOUND,
                                     E.UNRELEASED_INSTANCE_ID, E.FENCED_INSTANCE_ID), answer  # fmt: skip
        joined = c.epoch == 0
        c.owned, c.epoch = set(), 0
        if not join and not joined:
            self.consumer_beat(c, join=True)

    # --- steps ---------------------------------------------------------------------------------------------

    def start(self, c: Client, kind: str) -> None:
        if c.running:
            return
        if c.instance_id is not None and c.incarnation and c.kind != kind:
            self.static_switches += 1
        c.running, c.silent, c.kind = True, False, kind
        c.incarnation += 1
        c.owned, c.joining, c.syncing, c.stable = set(), None, None, False
        if kind == "consumer":
            c.member_id = f"c{c.cid}-{c.incarnation}"
            self.consumer_beat(c, join=True)
        else:
            c.member_id = ""
            self.classic_rejoin(c)

    def beat(self, c: Client) -> None:
        if not c.running or c.silent:
            return
        if c.kind == "consumer":
            self.consumer_beat(c)
        else:
            self.poll(c)
            self.classic_beat(c)

    def leave(self, c: Client) -> None:
        if not c.running:
            return
        if c.kind == "consumer":
            heartbeat(self.h, c.member_id, -1, instance_id=c.instance_id)
        elif c.member_id:
            self.h.leave((c.member_id, c.instance_id))
        self.stop(c)

    def stop(self, c: Client) -> None:
        c.running, c.owned, c.stable = False, set(), False
        c.joining = c.syncing = None  # a parked request of a process that is gone is never read

    def members(self) -> set[str]:
        consumer = self.h.shard.consumer_group(GROUP)
        classic = self.h.shard.group(GROUP)
        found = set(consumer.members) if consumer is not None else set() if classic is None else set(classic.members)
        kind = "consumer" if consumer is not None else "classic"
        if found and (not self.kinds or self.kinds[-1] != kind):
            self.kinds.append(kind)
        return found

    def notice(self) -> None:
        """Answers that came for parked requests are taken; a client the coordinator no longer has owns
        nothing (it learns so at its next request). Timers due now fire first, as the runtime fires them."""
        self.h.advance(0)
        for c in self.clients.values():
            if c.running:
                self.poll(c)
        members = self.members()
        for c in self.clients.values():
            if c.owned and c.member_id not in members:
                c.owned = set()


def _check(w: World) -> None:
    seen: set[tuple[str, int]] = set()
    for c in w.clients.values():
        assert not (c.owned & seen), f"two owners of {sorted(c.owned & seen)}"
        seen |= c.owned
    fresh = GroupCoordinatorShard(7, CONFIG, lambda prefix: f"{prefix}-replayed")
    for key, value in w.h.log:
        fresh.replay(decode_record(key, value))
    assert fresh.durable_state() == w.h.shard.durable_state()
    assert dict(w.h.shard.deadlines) == w.h.timers


client_ids = st.sampled_from(CLIENTS)
step = st.one_of(
    st.tuples(st.just("start"), client_ids, st.sampled_from(["classic", "consumer"])),
    st.tuples(st.just("start"), client_ids, st.sampled_from(["classic", "consumer"])),
    st.tuples(st.just("round")),
    st.tuples(st.just("round")),
    st.tuples(st.just("beat"), client_ids),
    st.tuples(st.just("leave"), client_ids),
    st.tuples(st.just("leave"), client_ids),
    st.tuples(st.just("crash"), client_ids),
    st.tuples(st.just("roll-back")),  # every consumer client leaves (the end of a rollback)
    st.tuples(st.just("switch")),  # the static client's process is replaced by one of the other protocol
    st.tuples(st.just("switch")),
    st.tuples(st.just("silent"), client_ids),
    st.tuples(st.just("advance"), st.sampled_from([1_000, 3_000, 9_000, 13_000])),
    st.tuples(st.just("restart")),
)


def _run(w: World, s: tuple[Any, ...]) -> None:
    kind = s[0]
    if kind == "start":
        w.start(w.clients[s[1]], s[2])
    elif kind == "round":
        for c in w.clients.values():
            w.beat(c)
    elif kind == "beat":
        w.beat(w.clients[s[1]])
    elif kind == "leave":
        w.leave(w.clients[s[1]])
    elif kind == "roll-back":
        for c in w.clients.values():
            if c.kind == "consumer":
                w.leave(c)
                w.notice()
    elif kind == "switch":
        c = w.clients[next(iter(STATIC))]
        w.stop(c)
        w.start(c, "classic" if c.kind == "consumer" else "consumer")
    elif kind == "crash":
        w.stop(w.clients[s[1]])
    elif kind == "silent":
        w.clients[s[1]].silent = True
    elif kind == "advance":
        w.h.advance(s[1])
    else:
        w.h.restart()
        for c in w.clients.values():  # parked requests were answered NOT_COORDINATOR: the clients retry
            if c.running and c.kind == "classic" and (c.joining is not None or c.syncing is not None):
                c.joining = c.syncing = None
                w.classic_rejoin(c)
    w.notice()


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(step, min_size=5, max_size=40))
def test_migrations_under_churn_keep_one_owner_per_partition_and_converge(script: list[tuple[Any, ...]]) -> None:
    w = World(Harness(config=CONFIG, topics=StaticTopics({"t": PARTITIONS})))
    # Most runs start from a live classic group, the situation migration is for.
    for s in [("start", 0, "classic"), ("start", 1, "classic"), ("round",), *script]:
        _run(w, s)
        _check(w)
    upgrades = sum(1 for a, b in zip(w.kinds, w.kinds[1:], strict=False) if (a, b) == ("classic", "consumer"))
    downgrades = sum(1 for a, b in zip(w.kinds, w.kinds[1:], strict=False) if (a, b) == ("consumer", "classic"))
    event(f"live upgrades: {min(upgrades, 2)}{'+' if upgrades > 2 else ''}")
    event(f"live downgrades: {min(downgrades, 2)}{'+' if downgrades > 2 else ''}")
    event(f"static process switched protocol: {min(w.static_switches, 2)}{'+' if w.static_switches > 2 else ''}")
    # The churn stops: every running client heartbeats every second (a silent one speaks again).
    for c in w.clients.values():
        c.silent = False
    running = [c for c in w.clients.values() if c.running]
    for _ in range(40):
        w.h.advance(1_000)
        w.notice()
        for c in running:
            w.beat(c)
            w.notice()
        _check(w)
    if not running:
        return
    owned = [p for c in running for p in c.owned]
    assert sorted(owned) == sorted(EVERY), [(c.member_id, c.kind, sorted(c.owned)) for c in running]
    consumer = w.h.shard.consumer_group(GROUP)
    if any(c.kind == "consumer" for c in running):
        assert consumer is not None
    else:
        assert consumer is None or not consumer.members
