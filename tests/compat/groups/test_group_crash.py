"""20 groups x 6 partitions of random commits while our broker is killed with SIGKILL at random points.

Ten groups take simple commits (assign-mode style, generation -1, through our Admin); ten have members
(protocol-level members from `raw_group`, about half of them static, all heartbeating every second) that commit with their generation. Four
threads commit concurrently, at most one request in flight per group. Each round first changes the
membership of a few member groups (a member joins, or one leaves: a rebalance, a new generation), then
commits until a random number of commits has been acknowledged and kills the broker mid-traffic. After the
restart, with the coordinator loaded again from `__consumer_offsets`:

- every acknowledged commit is there (OffsetFetch); a partition's offset may instead be the one of the
  commit in flight at the kill, never anything else;
- every member group is Stable with exactly the members it had (DescribeGroups: member ids and instance
  ids), and each member's heartbeat with its generation is accepted, so the generation was replayed too;
- every simple group that holds offsets is Empty; one without any (its only commit was in flight at the kill
  and did not land, or it was never committed to) does not exist: Kafka keeps no group for a simple consumer
  that committed nothing, and describes an unknown group as Dead.

The workload is random: the seed is printed, named again in a failure, and ``GROUP_CRASH_SEED=<seed>`` replays
its choices (the thread interleaving and the kill's timing still vary from run to run).

The same workload runs against Tansu without the kill (Tansu keeps groups in memory): a self-check of the
workload and of these checks.
"""

from __future__ import annotations

import contextlib
import os
import random
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pytest
from group_harness import create_topic, unique, wait_for
from raw_group import RawMember, rebalance, retrying

from groupstream.client.admin import Admin
from groupstream.client.errors import KafkaConnectionError, KafkaError
from groupstream.client.net.sync_client import BrokerChannel
from groupstream.protocol.error_codes import ErrorCode
from support.brokers import BrokerFactory, BrokerKind, BrokerProcess

pytestmark = [pytest.mark.compat, pytest.mark.slow]

GROUPS = 20
PARTITIONS = 6
ROUNDS = 4
THREADS = 4
SESSION_TIMEOUT_MS = 120_000  # ours: no member expires while the broker restarts
TANSU_SESSION_TIMEOUT_MS = 6_000  # Tansu holds every join for half the session timeout
SEED_ENV = "GROUP_CRASH_SEED"


@dataclass
class GroupUnderTest:
    name: str
    members: list[RawMember] = field(default_factory=list)  # empty: a simple-commit group
    acked: dict[int, int] = field(default_factory=dict)
    in_flight: dict[int, int] | None = None
    rebalancing: threading.Lock = field(default_factory=threading.Lock)

    @property
    def simple(self) -> bool:
        return not self.members


class Workload:
    def __init__(self, bootstrap: str, topic: str, seed: int, session_timeout_ms: int, static_share: float) -> None:
        self.bootstrap = bootstrap
        self.static_share = static_share
        self.session_timeout_ms = session_timeout_ms
        self.topic = topic
        self.rng = random.Random(seed)
        self.groups = [GroupUnderTest(unique(f"crash-{'s' if i < GROUPS // 2 else 'm'}{i}")) for i in range(GROUPS)]
        self.acks = 0
        self.absent = 0  # simple groups found not to exist (nothing committed yet): the branch the flake hit
        self.failures: list[str] = []
        self._lock = threading.Lock()
        self._static_seq = 0

    def new_member(self, g: GroupUnderTest) -> RawMember:
        static = self.rng.random() < self.static_share
        self._static_seq += 1
        return RawMember(self.bootstrap, g.name, self.topic, PARTITIONS,
                         instance_id=f"inst-{self._static_seq}" if static else None,
                         session_timeout_ms=self.session_timeout_ms)  # fmt: skip

    def form_groups(self) -> None:
        for g in self.groups[GROUPS // 2 :]:
            g.members = [self.new_member(g) for _ in range(self.rng.randint(1, 2))]
        _in_parallel([lambda g=g: self._rebalance(g) for g in self.groups[GROUPS // 2 :]])

    def _rebalance(self, g: GroupUnderTest) -> None:
        with g.rebalancing:
            rebalance(g.members)

    def change_membership(self) -> None:
        """A few member groups rebalance: one member joins, or (with two or more) one leaves."""
        changes = []
        for g in self.rng.sample(self.groups[GROUPS // 2 :], 3):
            leaving = g.members[self.rng.randrange(len(g.members))] if len(g.members) > 1 and self.rng.random() < 0.5 else None
            joining = None if leaving else self.new_member(g)
            changes.append(lambda g=g, leaving=leaving, joining=joining: self._change(g, leaving, joining))
        _in_parallel(changes)

    def _change(self, g: GroupUnderTest, leaving: RawMember | None, joining: RawMember | None) -> None:
        with g.rebalancing:
            if leaving is not None:
                retrying(leaving.leave)
                leaving.close()
                g.members.remove(leaving)
            if joining is not None:
                g.members.append(joining)
            rebalance(g.members)

    @contextlib.contextmanager
    def heartbeats(self) -> Iterator[None]:
        """Heartbeat every member once a second from a thread of its own, as real members do; a group in the
        middle of a membership change is left to `rebalance`. Errors are not judged here: `verify` does."""
        stop = threading.Event()

        def beat() -> None:
            conn: BrokerChannel | None = None
            while not stop.wait(1.0):  # the heartbeat interval
                for g in self.groups[GROUPS // 2 :]:
                    if not g.rebalancing.acquire(blocking=False):
                        continue
                    try:
                        for m in g.members:
                            if conn is None or conn.closed:
                                conn = BrokerChannel(*_hostport(self.bootstrap), client_id="heartbeats")
                            conn.request("Heartbeat", {"group_id": g.name, "generation_id": m.generation,
                                                       "member_id": m.member_id, "group_instance_id": m.instance_id})
                    except KafkaConnectionError:
                        if conn is not None:
                            conn.close()
                        conn = None  # the broker is restarting: beat again next second
                    finally:
                        g.rebalancing.release()
            if conn is not None:
                conn.close()

        thread = threading.Thread(target=beat, daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join(30)

    # -- committing -------------------------------------------------------------------------------------

    def commit_loop(self, groups: list[GroupUnderTest], stop: threading.Event, seed: int) -> None:
        rng = random.Random(seed)
        with Admin({"bootstrap.servers": self.bootstrap, "request.timeout.ms": 10_000}) as admin:
            while not stop.is_set():
                g = rng.choice(groups)
                parts = rng.sample(range(PARTITIONS), rng.randint(1, PARTITIONS))
                offsets = {p: g.acked.get(p, 0) + rng.randint(1, 50) for p in parts}
                g.in_flight = offsets
                try:
                    if g.simple:
                        admin.alter_group_offsets(g.name, {(self.topic, p): o for p, o in offsets.items()})
                    else:
                        leader = g.members[0]
                        codes = leader.commit(offsets)
                        bad = {p: ErrorCode(c).name for p, c in codes.items() if c != ErrorCode.NONE}
                        if bad:
                            self.failures.append(f"{g.name}: member commit refused {bad}")
                            return
                except (KafkaConnectionError, KafkaError) as e:
                    if isinstance(e, KafkaError) and not e.retriable:
                        self.failures.append(f"{g.name}: {e}")
                    return  # the broker went away: this commit stays in doubt
                g.acked.update(offsets)
                g.in_flight = None
                with self._lock:
                    self.acks += 1

    def run_commits(self, until: Callable[[], None]) -> None:
        """Commit from THREADS threads until ``until()`` returns (it kills the broker or just waits)."""
        stop = threading.Event()
        shards = [self.groups[i::THREADS] for i in range(THREADS)]
        threads = [threading.Thread(target=self.commit_loop, args=(s, stop, self.rng.random())) for s in shards]
        for t in threads:
            t.start()
        try:
            until()
        finally:
            stop.set()
            for t in threads:
                t.join(60)
        assert not self.failures, self.failures

    # -- verification ------------------------------------------------------------------------------------

    def verify(self, full_describe: bool = True, absent_state: str = "Dead") -> None:
        """``full_describe``: whether DescribeGroups reports protocol and instance ids (Tansu 0.6.0 leaves the
        protocol, instance ids, client ids, hosts, metadata and assignments empty). ``absent_state``: how the
        broker describes a group that does not exist (Kafka and ours: Dead; Tansu 0.6.0: Empty)."""
        with Admin({"bootstrap.servers": self.bootstrap}) as admin:
            for g in self.groups:
                got = {tp[1]: om.offset for tp, om in admin.list_group_offsets(g.name).items()}
                doubt = g.in_flight or {}
                before = f"acknowledged {dict(sorted(g.acked.items()))}, in flight {doubt}"
                for p in range(PARTITIONS):
                    ok = {g.acked.get(p)} | ({doubt[p]} if p in doubt else set())
                    assert got.get(p) in ok, (
                        f"{g.name}[{p}]: committed {got.get(p)} after the restart; acknowledged "
                        f"{g.acked.get(p)}, in flight {doubt.get(p)}"
                    )
                for p, o in got.items():  # what the in-flight commit did, it did whole or not at all per p
                    g.acked[p] = o
                g.in_flight = None
                desc = admin.describe_groups([g.name])[g.name]
                if g.simple:
                    # A simple group exists only through its offsets: with none (no commit acknowledged, as the
                    # checks above proved, and the one in flight at the kill did not land) it does not exist.
                    want = "Empty" if got else absent_state
                    self.absent += not got
                    assert desc.state == want and not desc.members, (
                        f"{g.name}: {desc.state} {desc.members}, expected {want}; committed after the restart "
                        f"{dict(sorted(got.items()))}, before it {before}"
                    )
                    continue
                expected = sorted((m.member_id, m.instance_id if full_describe else None) for m in g.members)
                described = sorted((m.member_id, m.group_instance_id if full_describe else None) for m in desc.members)
                assert desc.state == "Stable", f"{g.name}: state {desc.state} after the restart"
                assert described == expected, f"{g.name}: members {described}, expected {expected}"
                assert desc.protocol == "range" or not full_describe
                gens = {m.generation for m in g.members}
                for m in g.members:
                    code = retrying(m.heartbeat)
                    assert code == ErrorCode.NONE, (
                        f"{g.name}: member {m.member_id} heartbeat at generation {gens} got {ErrorCode(code).name}"
                    )


def _in_parallel(calls: list[Callable[[], None]], timeout: float = 90) -> None:
    """Run ``calls`` in threads (rebalances of different groups overlap, as they do on a real broker)."""
    errors: list[BaseException] = []

    def run(call: Callable[[], None]) -> None:
        try:
            call()
        except BaseException as e:  # re-raised below
            errors.append(e)

    threads = [threading.Thread(target=run, args=(c,)) for c in calls]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout)
    if errors:
        raise errors[0]
    assert not any(t.is_alive() for t in threads), "a rebalance did not finish"


def _hostport(bootstrap: str) -> tuple[str, int]:
    host, _, port = bootstrap.rpartition(":")
    return host, int(port)


def _seed() -> int:
    """``GROUP_CRASH_SEED`` when set (a replay), else a new random seed; printed either way."""
    raw = os.environ.get(SEED_ENV)
    seed = int(raw) if raw else random.randrange(1 << 30)
    print(f"seed {seed} ({SEED_ENV}={seed} replays it)")
    return seed


@contextlib.contextmanager
def _naming_seed(seed: int) -> Iterator[None]:
    """A failure's report names the seed (captured output is easy to lose, the assertion is not)."""
    try:
        yield
    except BaseException as e:
        e.add_note(f"workload seed {seed}: replay its choices with {SEED_ENV}={seed}")
        raise


def _workload(bootstrap: str, seed: int, session_timeout_ms: int, static_share: float = 0.5) -> Workload:
    topic = unique("crash")
    create_topic(bootstrap, topic, PARTITIONS)
    return Workload(bootstrap, topic, seed, session_timeout_ms, static_share)


@pytest.mark.broker_ours
def test_commits_and_groups_survive_kill9(broker_factory: BrokerFactory) -> None:
    seed = _seed()
    broker = broker_factory(BrokerKind.GROUPSTREAM, settings={"group.initial.rebalance.delay.ms": "0"})
    w = _workload(broker.bootstrap, seed, SESSION_TIMEOUT_MS)
    with _naming_seed(seed), w.heartbeats():
        w.form_groups()
        for round_ in range(ROUNDS):
            if round_:
                w.change_membership()
            target = w.acks + w.rng.randint(20, 300)

            def kill_at_random_point(broker: BrokerProcess = broker, target: int = target) -> None:
                wait_for(lambda: w.acks >= target, 60, f"{target} acknowledged commits")
                broker.kill9()

            try:
                w.run_commits(kill_at_random_point)
            finally:
                if not broker.running:
                    broker.start()
            w.verify()
    print(f"seed {seed}: {w.acks} acknowledged commits over {ROUNDS} kills; {w.absent} checks of a simple group "
          "that had nothing committed found it absent")


@pytest.mark.broker_tansu
def test_crash_workload_self_check_without_kill(broker_factory: BrokerFactory) -> None:
    broker = broker_factory(BrokerKind.TANSU)
    # dynamic members only: under this workload Tansu 0.6.0 now and then drops a static member (its heartbeat
    # and commits get UNKNOWN_MEMBER_ID) although it heartbeats every second
    seed = _seed()
    w = _workload(broker.bootstrap, seed, TANSU_SESSION_TIMEOUT_MS, static_share=0.0)
    with _naming_seed(seed), w.heartbeats():
        w.form_groups()
        for round_ in range(ROUNDS):
            if round_:
                w.change_membership()
            target = w.acks + w.rng.randint(20, 300)
            w.run_commits(lambda target=target: wait_for(lambda: w.acks >= target, 60, "commits"))
            w.verify(full_describe=False, absent_state="Empty")
