"""The machinery of `coordinator_scale`: one coordinator shard on a manual clock with a log of encoded records,
members of both protocols that drive it, and the memory and replay measurements. See coordinator_scale.py."""

from __future__ import annotations

import gc
import itertools
import statistics
import sys
import time
import tracemalloc
import types
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from groupstream.assignment import (
    CLIENT_ASSIGNORS,
    SERVER_ASSIGNORS,
    ClusterView,
    GroupSpec,
    MemberSpec,
    Subscription,
    TopicPartition,
)
from groupstream.coordinator.classic_group import GroupState
from groupstream.coordinator.config import GroupCoordinatorConfig
from groupstream.coordinator.consumer_group import ConsumerGroup, ConsumerGroupState
from groupstream.coordinator.consumer_records import replaced_later
from groupstream.coordinator.request import ShardRequest
from groupstream.coordinator.result import CoordinatorResult, apply_timer_ops
from groupstream.coordinator.shard import GroupCoordinatorShard
from groupstream.coordinator.target_assignment import compute_target, subscribed_topics
from groupstream.protocol.consumer_group_records import MemberMetadataValue
from groupstream.protocol.consumer_protocol import (
    ConsumerAssignment,
    ConsumerSubscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from groupstream.protocol.error_codes import ErrorCode
from groupstream.protocol.group_records import decode_record, encode_record
from groupstream.protocol.messages import by_name

E = ErrorCode
LOAD_CHUNK_BYTES = 256 * 1024
"""The broker's read size when loading (``broker.coordinator_runtime.LOAD_CHUNK_BYTES``), not imported: the
broker's modules would add thousands of objects to every garbage collection measured here."""
GROUP = "scale"
CONSUMER_ASSIGNORS = ("uniform", "range")
CLASSIC_ASSIGNORS = ("cooperative-sticky", "range")
JOIN_V, SYNC_V, HEARTBEAT_V, LEAVE_V, CGH_V = 9, 5, 4, 5, 1
SESSION_MS, REBALANCE_MS = 45_000, 300_000  # Java's session.timeout.ms and max.poll.interval.ms defaults
MAX_ROUNDS = 50
MAX_ACKS = 10

TopicIdPartition = tuple[uuid.UUID, int]
Log = list[tuple[bytes, bytes | None]]


def cpu() -> float:
    return time.process_time()


# --- the runtime: one shard, a manual clock, a log of encoded records ----------------------------------------


class Catalog:
    """The broker's topics as the shard sees them (a TopicCatalogView), ids fixed by name."""

    def __init__(self, topics: dict[str, int]) -> None:
        self.topics = dict(topics)
        self.ids = {t: uuid.uuid5(uuid.NAMESPACE_URL, f"topic:{t}") for t in topics}
        self.names = {i: t for t, i in self.ids.items()}

    def partition_count(self, topic: str) -> int | None:
        return self.topics.get(topic)

    def topic_id(self, topic: str) -> uuid.UUID | None:
        return self.ids.get(topic)

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        return self.names.get(topic_id)

    def topic_names(self) -> list[str]:
        return sorted(self.topics)

    def id_partitions(self) -> set[TopicIdPartition]:
        return {(self.ids[t], p) for t, n in self.topics.items() for p in range(n)}

    def named_partitions(self) -> set[TopicPartition]:
        return {TopicPartition(t, p) for t, n in self.topics.items() for p in range(n)}


class GcClock:
    """CPU time spent in the garbage collector, from gc's own callbacks."""

    def __init__(self) -> None:
        self.total = 0.0
        self._start = 0.0
        gc.callbacks.append(self._callback)

    def _callback(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._start = cpu()
        else:
            self.total += cpu() - self._start


GC = GcClock()


def new_shard(config: GroupCoordinatorConfig) -> GroupCoordinatorShard:
    ids = itertools.count(1)
    return GroupCoordinatorShard(0, config, lambda prefix: f"{prefix}-{uuid.UUID(int=next(ids))}")


@dataclass
class Runtime:
    """What the broker's coordinator runtime does for one shard, in-process: ``handle``/``on_timer``, then encode
    the result's records for the log and replay them, then schedule its timers and deliver its responses."""

    catalog: Catalog
    config: GroupCoordinatorConfig = field(default_factory=GroupCoordinatorConfig)
    now: int = 1_000_000
    log: Log = field(default_factory=list)
    timers: dict[str, int] = field(default_factory=dict)
    answers: dict[int, Any] = field(default_factory=dict)
    busy: float = 0.0
    """Coordinator CPU seconds so far: handle/on_timer + record encoding + replay."""
    gc_busy: float = 0.0
    calls: int = 0

    def __post_init__(self) -> None:
        self._tokens = itertools.count(1)
        self.shard = new_shard(self.config)
        self._apply(lambda: self.shard.on_loaded(self.now))

    def _apply(self, call: Callable[[], CoordinatorResult]) -> float:
        gc_before = GC.total
        start = cpu()
        result = call()
        encoded = [encode_record(r) for r in result.records]
        for record in result.records:
            self.shard.replay(record)
        took = cpu() - start
        self.busy += took
        self.gc_busy += GC.total - gc_before
        self.calls += 1
        self.log.extend(encoded)
        apply_timer_ops(self.timers, result.timers)
        for token, response in result.responses:
            assert token not in self.answers, f"token {token} answered twice"
            self.answers[token] = response
        return took

    def request(self, api_name: str, version: int, client_id: str, **fields: Any) -> ShardRequest:
        """A request as the shard receives it: the body decoded from the bytes a client would send."""
        api = by_name(api_name)
        body = api.decode_request(api.encode_request(api.Request(**fields), version), version)
        return ShardRequest(api.key, version, body, next(self._tokens), client_id, "/10.0.0.1")

    def send(self, request: ShardRequest) -> float:
        """Handle ``request``; the coordinator time it took."""
        return self._apply(lambda: self.shard.handle(request, self.now, self.catalog))

    def answer(self, token: int) -> Any:
        return self.answers.pop(token)

    def next_deadline(self) -> int | None:
        return min(self.timers.values(), default=None)

    def advance_to(self, deadline: int) -> None:
        """Move the clock to ``deadline``, firing every timer due by then, in deadline order."""
        while True:
            due = [(d, key) for key, d in self.timers.items() if d <= deadline]
            if not due:
                break
            d, key = min(due)
            del self.timers[key]
            self.now = max(self.now, d)
            self._apply(lambda k=key: self.shard.on_timer(k, self.now, self.catalog))  # type: ignore[misc]
        self.now = max(self.now, deadline)


def topics_of(partitions: int, topics: int) -> dict[str, int]:
    base, extra = divmod(partitions, topics)
    return {f"topic-{i:02}": base + (1 if i < extra else 0) for i in range(topics)}


def member_name(i: int) -> str:
    return f"consumer-{i:04}"


def pct(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def owned_exactly_once(owned: Iterable[Iterable[Any]], everything: set[Any]) -> bool:
    seen: set[Any] = set()
    count = 0
    for parts in owned:
        for p in parts:
            seen.add(p)
            count += 1
    return count == len(everything) and seen == everything


@dataclass
class Settle:
    """From a trigger to Stable: heartbeat rounds, requests, coordinator time and (classic) leader time."""

    rounds: int
    requests: int
    coordinator: float
    leader: float = 0.0

    @property
    def total(self) -> float:
        return self.coordinator + self.leader


# --- consumer (KIP-848) members ----------------------------------------------------------------------------

CGH = by_name("ConsumerGroupHeartbeat").Request


@dataclass
class ConsumerMember:
    member_id: str
    topics: tuple[str, ...]
    assignor: str
    epoch: int = 0
    owned: frozenset[TopicIdPartition] = frozenset()
    reported: frozenset[TopicIdPartition] | None = None
    """What the last heartbeat said the member owns."""

    def join_request(self, rt: Runtime) -> ShardRequest:
        self.epoch, self.owned, self.reported = 0, frozenset(), frozenset()
        return rt.request(
            "ConsumerGroupHeartbeat", CGH_V, client_id=self.member_id, group_id=GROUP, member_id=self.member_id,
            member_epoch=0, instance_id=None, rack_id=None, rebalance_timeout_ms=REBALANCE_MS,
            subscribed_topic_names=list(self.topics), subscribed_topic_regex=None, server_assignor=self.assignor,
            topic_partitions=[],
        )  # fmt: skip

    def beat_request(self, rt: Runtime, epoch: int | None = None) -> ShardRequest:
        """An ordinary heartbeat: the owned partitions only when they changed since the last one said."""
        parts = None
        if self.owned != self.reported:
            by_topic: dict[uuid.UUID, list[int]] = {}
            for t, p in sorted(self.owned, key=lambda tp: (tp[0].bytes, tp[1])):
                by_topic.setdefault(t, []).append(p)
            parts = [CGH.TopicPartitions(topic_id=t, partitions=ps) for t, ps in by_topic.items()]
            self.reported = self.owned
        return rt.request(
            "ConsumerGroupHeartbeat", CGH_V, client_id=self.member_id, group_id=GROUP, member_id=self.member_id,
            member_epoch=self.epoch if epoch is None else epoch, instance_id=None, rack_id=None,
            rebalance_timeout_ms=-1, subscribed_topic_names=None, subscribed_topic_regex=None, server_assignor=None,
            topic_partitions=parts,
        )  # fmt: skip

    def take(self, answer: Any) -> None:
        if answer.error_code != E.NONE:
            raise RuntimeError(f"member {self.member_id}: {E(answer.error_code).name} {answer.error_message}")
        self.epoch = answer.member_epoch
        if answer.assignment is not None:
            self.owned = frozenset(
                (t.topic_id, p) for t in answer.assignment.topic_partitions for p in t.partitions
            )


def cgh(rt: Runtime, m: ConsumerMember, request: ShardRequest) -> float:
    took = rt.send(request)
    m.take(rt.answer(request.token))
    return took


def consumer_turn(rt: Runtime, m: ConsumerMember) -> float:
    """One heartbeat, then an immediate one for every answer that changed the assignment (the Java client's
    acknowledgement); the coordinator time of the first."""
    before = m.owned
    took = cgh(rt, m, m.beat_request(rt))
    for _ in range(MAX_ACKS):
        if m.owned == before:
            break
        before = m.owned
        cgh(rt, m, m.beat_request(rt))
    return took


def consumer_group(rt: Runtime) -> ConsumerGroup:
    group = rt.shard.consumer_group(GROUP)
    assert group is not None
    return group


def consumer_settle(rt: Runtime, members: Sequence[ConsumerMember]) -> Settle:
    """Heartbeat round-robin until Stable with every partition owned exactly once. A round is one heartbeat
    interval on the clock, as members heartbeat once per interval: the group's assignment interval
    (``group.consumer.assignment.interval.ms``) runs out on the way."""
    start, calls = rt.busy, rt.calls
    everything = rt.catalog.id_partitions()
    for rounds in range(1, MAX_ROUNDS + 1):
        rt.advance_to(rt.now + rt.config.consumer_heartbeat_interval_ms)
        for m in members:
            consumer_turn(rt, m)
        if consumer_group(rt).state is ConsumerGroupState.STABLE and owned_exactly_once(
            (m.owned for m in members), everything
        ):
            return Settle(rounds, rt.calls - calls, rt.busy - start)
    raise RuntimeError(f"the consumer group did not converge in {MAX_ROUNDS} rounds")


def consumer_storm(rt: Runtime, members: Sequence[ConsumerMember]) -> tuple[list[float], Settle]:
    """Every member's join heartbeat, then round-robin heartbeats until Stable; the join times and the whole."""
    start, calls = rt.busy, rt.calls
    joins = [cgh(rt, m, m.join_request(rt)) for m in members]
    settle = consumer_settle(rt, members)
    return joins, Settle(settle.rounds, rt.calls - calls, rt.busy - start)


def target_inputs(rt: Runtime, joiner: ConsumerMember) -> tuple[dict[str, MemberMetadataValue], Any]:
    """The members (with ``joiner``, as its join heartbeat will record it) and the topics' metadata that the
    heartbeat will hand ``compute_target``."""
    group = consumer_group(rt)
    members = {m.member_id: m.metadata for m in group}
    members[joiner.member_id] = MemberMetadataValue(
        instance_id=None, rack_id=None, client_id=joiner.member_id, client_host="/10.0.0.1",
        subscribed_topics=tuple(sorted(joiner.topics)), subscribed_regex=None,
        rebalance_timeout_ms=REBALANCE_MS, server_assignor=joiner.assignor,
    )  # fmt: skip
    assert group.partition_metadata is not None
    return members, group.partition_metadata.topics


def time_target(rt: Runtime, joiner: ConsumerMember) -> tuple[float, float]:
    """(compute_target, the pure server assignor) on the input the joiner's heartbeat is about to use."""
    members, metadata = target_inputs(rt, joiner)
    targets = dict(consumer_group(rt).targets)
    assignor = SERVER_ASSIGNORS[joiner.assignor]
    start = cpu()
    compute_target(assignor, members, targets, {}, metadata)
    step = cpu() - start
    # The pure call, on the GroupSpec compute_target builds (built here outside the timing).
    name_of = {t.topic_id: t.name for t in metadata}
    spec = GroupSpec(
        MemberSpec(mid, subscribed_topics(md, {}), frozenset(TopicPartition(name_of[t], p) for t, p in targets.get(mid, ())))
        for mid, md in members.items()
    )  # fmt: skip
    view = ClusterView({t.name: t.partitions for t in metadata})
    start = cpu()
    assignor.assign(spec, view)
    return step, cpu() - start


# --- classic members ------------------------------------------------------------------------------------------

JG = by_name("JoinGroup").Request
SG = by_name("SyncGroup").Request
LG = by_name("LeaveGroup").Request


@dataclass(eq=False)
class ClassicMember:
    client_id: str
    topics: tuple[str, ...]
    strategy: str
    member_id: str = ""
    generation: int = -1
    owned: tuple[TopicPartition, ...] = ()
    state: str = "join"
    """join (must send JoinGroup), joining, syncing (a request parked), stable, or gone."""

    def metadata(self) -> bytes:
        """The v3 subscription, as the Java client fills it: owned partitions and their generation."""
        owned = tuple((tp.topic, tp.partition) for tp in self.owned)
        user_data = CLIENT_ASSIGNORS[self.strategy].subscription_user_data(
            self.topics, self.owned if self.generation >= 0 else None, self.generation
        )
        return encode_subscription(ConsumerSubscription(self.topics, user_data, owned, self.generation), 3)


@dataclass
class ClassicDriver:
    """Classic members as clients that react to every answer at once (one request at a time)."""

    rt: Runtime
    strategy: str
    members: list[ClassicMember] = field(default_factory=list)
    leader_busy: float = 0.0
    """Client CPU seconds the leaders spent assigning: decode subscriptions, assign, encode assignments."""
    join_times: list[float] = field(default_factory=list)
    leader_sync_times: list[float] = field(default_factory=list)
    leader_assign_times: list[float] = field(default_factory=list)
    heartbeat_times: list[float] = field(default_factory=list)
    _pending: dict[int, tuple[ClassicMember, str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.counts = dict(self.rt.catalog.topics)
        self.everything = self.rt.catalog.named_partitions()

    # --- requests -------------------------------------------------------------------------------------------

    def _send(self, m: ClassicMember, kind: str, request: ShardRequest) -> float:
        took = self.rt.send(request)
        self._pending[request.token] = (m, kind)
        return took

    def _pump(self) -> None:
        """Deliver every answer to its member, which may send more requests (whose answers are delivered too)."""
        while self.rt.answers:
            token = next(iter(self.rt.answers))
            answer = self.rt.answer(token)
            m, kind = self._pending.pop(token)
            self._on_answer(m, kind, answer)

    def join(self, m: ClassicMember) -> None:
        m.state = "joining"
        request = self.rt.request(
            "JoinGroup", JOIN_V, client_id=m.client_id, group_id=GROUP, session_timeout_ms=SESSION_MS,
            rebalance_timeout_ms=REBALANCE_MS, member_id=m.member_id, group_instance_id=None, protocol_type="consumer",
            protocols=[JG.JoinGroupRequestProtocol(name=self.strategy, metadata=m.metadata())], reason=None,
        )  # fmt: skip
        self.join_times.append(self._send(m, "join", request))

    def _sync(self, m: ClassicMember, assignments: list[Any]) -> None:
        m.state = "syncing"
        request = self.rt.request(
            "SyncGroup", SYNC_V, client_id=m.client_id, group_id=GROUP, generation_id=m.generation,
            member_id=m.member_id, group_instance_id=None, protocol_type="consumer", protocol_name=self.strategy,
            assignments=assignments,
        )  # fmt: skip
        took = self._send(m, "sync", request)
        if assignments:
            self.leader_sync_times.append(took)

    def heartbeat(self, m: ClassicMember) -> None:
        request = self.rt.request(
            "Heartbeat", HEARTBEAT_V, client_id=m.client_id, group_id=GROUP, generation_id=m.generation,
            member_id=m.member_id, group_instance_id=None,
        )  # fmt: skip
        self.heartbeat_times.append(self._send(m, "heartbeat", request))

    def leave(self, m: ClassicMember) -> None:
        m.state = "gone"
        request = self.rt.request(
            "LeaveGroup", LEAVE_V, client_id=m.client_id, group_id=GROUP,
            members=[LG.MemberIdentity(member_id=m.member_id, group_instance_id=None, reason=None)],
        )  # fmt: skip
        self._send(m, "leave", request)
        self.members.remove(m)
        self._pump()

    # --- reactions ------------------------------------------------------------------------------------------

    def _on_answer(self, m: ClassicMember, kind: str, answer: Any) -> None:
        code = E(answer.error_code)
        if kind == "join":
            if code is E.MEMBER_ID_REQUIRED:
                m.member_id = answer.member_id
                self.join(m)
            elif code is E.NONE:
                m.generation = answer.generation_id
                assignments = self._assign(answer.members) if answer.leader == m.member_id else []
                self._sync(m, assignments)
            else:
                raise RuntimeError(f"JoinGroup of {m.member_id}: {code.name}")
        elif kind == "sync":
            if code is E.REBALANCE_IN_PROGRESS:
                self.join(m)
                return
            if code is not E.NONE:
                raise RuntimeError(f"SyncGroup of {m.member_id}: {code.name}")
            assigned = tuple(
                TopicPartition(t, p) for t, p in decode_assignment(bytes(answer.assignment)).partitions
            )
            revoked = set(m.owned) - set(assigned)
            m.owned = assigned
            if revoked and self.strategy == "cooperative-sticky":
                self.join(m)  # KIP-429: a member that gave partitions up rejoins, so they can be handed over
            else:
                m.state = "stable"
        elif kind == "heartbeat":
            if code is E.REBALANCE_IN_PROGRESS:
                if self.strategy != "cooperative-sticky":
                    m.owned = ()  # eager: everything is revoked before the rejoin
                self.join(m)
            elif code is not E.NONE:
                raise RuntimeError(f"Heartbeat of {m.member_id}: {code.name}")

    def _assign(self, members: Sequence[Any]) -> list[Any]:
        """The leader's work, as our client does it (``classic_membership._assign``)."""
        start = cpu()
        subscriptions = []
        for jm in members:
            sub = decode_subscription(bytes(jm.metadata))
            subscriptions.append(Subscription(
                member_id=jm.member_id, topics=tuple(sub.topics),
                owned_partitions=tuple(TopicPartition(t, p) for t, p in sub.owned_partitions),
                user_data=sub.user_data, group_instance_id=jm.group_instance_id, rack_id=sub.rack_id,
                generation_id=sub.generation_id if sub.version >= 2 else None,
            ))  # fmt: skip
        result = CLIENT_ASSIGNORS[self.strategy].assign(ClusterView(self.counts), subscriptions)
        out = [
            SG.SyncGroupRequestAssignment(
                member_id=member,
                assignment=encode_assignment(
                    ConsumerAssignment(
                        tuple((tp.topic, tp.partition) for tp in parts), result.user_data.get(member)
                    )
                ),
            )
            for member, parts in result.items()
        ]
        took = cpu() - start
        self.leader_busy += took
        self.leader_assign_times.append(took)
        return out

    # --- driving --------------------------------------------------------------------------------------------

    def converged(self) -> bool:
        group = self.rt.shard.group(GROUP)
        return (
            group is not None
            and group.state is GroupState.STABLE
            and all(m.state == "stable" for m in self.members)
            and owned_exactly_once((m.owned for m in self.members), self.everything)
        )

    def settle(self) -> Settle:
        """Heartbeat round-robin (members not waiting on a parked request) until Stable with every partition
        owned exactly once; when every member waits, move the clock to the next timer instead."""
        start, calls, leader = self.rt.busy, self.rt.calls, self.leader_busy
        rounds = 0
        self._pump()
        while not self.converged():
            before = [(m.state, m.generation) for m in self.members]
            if any(m.state == "stable" for m in self.members):
                rounds += 1
                if rounds > MAX_ROUNDS:
                    raise RuntimeError(f"the classic group did not converge in {MAX_ROUNDS} rounds")
                for m in list(self.members):
                    if m.state == "stable":
                        self.heartbeat(m)
                        self._pump()
            if [(m.state, m.generation) for m in self.members] == before and not self.converged():
                # Everyone waits on the coordinator (the initial rebalance delay): move the clock.
                deadline = self.rt.next_deadline()
                if deadline is None:
                    raise RuntimeError("every classic member waits and no timer is due")
                self.rt.advance_to(deadline)
                self._pump()
        return Settle(rounds, self.rt.calls - calls, self.rt.busy - start, self.leader_busy - leader)

    def storm(self, members: Sequence[ClassicMember]) -> Settle:
        """Every member's JoinGroup (and its MEMBER_ID_REQUIRED retry) at once, then ``settle``."""
        start, calls, leader = self.rt.busy, self.rt.calls, self.leader_busy
        for m in members:
            self.members.append(m)
            self.join(m)
            self._pump()
        settle = self.settle()
        return Settle(settle.rounds, self.rt.calls - calls, self.rt.busy - start, self.leader_busy - leader)


# --- memory and replay --------------------------------------------------------------------------------------

_SHARED = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType, types.MethodType, Enum)


def shard_bytes(shard: GroupCoordinatorShard) -> int:
    """The bytes of every object the shard's state reaches, each counted once (``sys.getsizeof``, which
    includes the gc header); classes, functions, modules and enum members are shared, not counted."""
    ctx = shard._ctx
    stack: list[object] = [ctx.groups, ctx.consumer_groups, ctx.offsets, ctx.deadlines, ctx.pending_takeovers]
    seen: set[int] = set()
    total = 0
    while stack:
        o = stack.pop()
        if id(o) in seen or isinstance(o, _SHARED):
            continue
        seen.add(id(o))
        total += sys.getsizeof(o)
        stack.extend(gc.get_referents(o))
    return total


def compact(log: Log) -> Log:
    """The log after compaction: the last record of each key, in log order, tombstones dropped."""
    last: dict[bytes, tuple[int, bytes | None]] = {}
    for i, (key, value) in enumerate(log):
        last[key] = (i, value)
    return [(k, v) for k, (_, v) in sorted(last.items(), key=lambda kv: kv[1][0]) if v is not None]


def load(log: Log, config: GroupCoordinatorConfig, now: int) -> GroupCoordinatorShard:
    """A restarted coordinator: a fresh shard replays the log, then ``on_loaded``. As the broker's load
    (``coordinator_log_records``), the log is read in chunks of ``LOAD_CHUNK_BYTES`` and a member's target
    or current-assignment record that a later one of the same chunk replaces is not decoded
    (``replaced_later``); every other record is decoded and replayed."""
    shard = new_shard(config)
    start = 0
    while start < len(log):
        end, size = start, 0
        while end < len(log) and (end == start or size < LOAD_CHUNK_BYTES):
            key, value = log[end]
            size += len(key) + (0 if value is None else len(value))
            end += 1
        chunk = log[start:end]
        skip = replaced_later([key for key, _ in chunk])
        for i, (key, value) in enumerate(chunk):
            if i not in skip:
                shard.replay(decode_record(key, value))
        start = end
    shard.on_loaded(now)
    return shard


def time_load(log: Log, rt: Runtime, repeat: int) -> float:
    """Median CPU seconds to load ``log``; each load must rebuild the live shard's durable state."""
    times = []
    want = rt.shard.durable_state()
    for _ in range(repeat):
        gc.collect()
        start = cpu()
        shard = load(log, rt.config, rt.now)
        times.append(cpu() - start)
        if shard.durable_state() != want:
            raise RuntimeError("replaying the log does not rebuild the group")
        del shard
    return statistics.median(times)


def traced_load(log: Log, rt: Runtime) -> tuple[int, int]:
    """(tracemalloc bytes, walked bytes) of a shard loaded from ``log``, each minus an empty shard."""
    load(log, rt.config, rt.now)  # warm up whatever the decoders cache
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        empty = new_shard(rt.config)
        empty.on_loaded(rt.now)
        gc.collect()
        empty_traced = tracemalloc.get_traced_memory()[0] - base
        base = tracemalloc.get_traced_memory()[0]
        shard = load(log, rt.config, rt.now)
        gc.collect()
        traced = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
    return traced - empty_traced, shard_bytes(shard) - shard_bytes(empty)


def empty_bytes(config: GroupCoordinatorConfig) -> int:
    shard = new_shard(config)
    shard.on_loaded(0)
    return shard_bytes(shard)


def memory_and_replay(rt: Runtime, n: int, repeat: int, out: dict[str, float]) -> None:
    empty = empty_bytes(rt.config)
    out["mem_live"] = (shard_bytes(rt.shard) - empty) / n
    compacted = compact(rt.log)
    out["log_records"] = len(rt.log)
    out["log_mb"] = sum(len(k) + len(v or b"") for k, v in rt.log) / 1e6
    out["compact_records"] = len(compacted)
    out["compact_mb"] = sum(len(k) + len(v or b"") for k, v in compacted) / 1e6
    out["replay_full"] = time_load(rt.log, rt, repeat)
    out["replay_compact"] = time_load(compacted, rt, repeat)
    traced, walked = traced_load(compacted, rt)
    out["mem_loaded"] = traced / n
    out["mem_loaded_walk"] = walked / n
