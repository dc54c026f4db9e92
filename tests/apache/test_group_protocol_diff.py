"""Differential tests of the group protocol (issue 13, item 4): the same scripted scenarios, request by request,
against our broker and against Apache Kafka 4.x, and the two transcripts must be equal step by step.

Why: our coordinator follows Kafka's group protocols from the KIPs and from what clients expect; Kafka's own
coordinator is the reference for every answer a client may act on: error codes, generations and member
epochs, the group's states, the assignments handed out, and what DescribeGroups and ConsumerGroupDescribe
report. Each scenario is driven by ``support.group_script`` (explicit requests, our codec, one connection per
member), so both brokers see the same bytes in the same order; member ids and topic ids are replaced by the
scenario's names for them. Time is never slept: timeouts are the smallest both brokers allow (classic
sessions of 6 s, the minimum of ``group.min.session.timeout.ms``; ``consumer`` groups with 6 s sessions and
500 ms heartbeats, set on both brokers; rebalance timeouts of a few seconds, set per member), and the script
waits for the group's described state to change.

Both brokers run each scenario at the same time (in two threads): the scenarios are mostly waits on those
timeouts. What is normalised or pinned, and why:

- ``consumer`` group epochs: Kafka 4.4 creates a group at epoch 1 (KAFKA-20268), so every epoch above 0 is
  one more than ours; the Apache transcript counts from 0 (``Script.epoch_base``);
- Kafka 4.4 batches target assignments (KIP-1263, ``APACHE_GROUP_CONFIGS``), and so do we by default
  (``group.consumer.assignment.interval.ms``, 1 s): the scenario's group on Kafka and our broker are set to
  compute them at once, so that the transcripts compare the protocol, which the batching only delays;
- deliberate differences, pinned on each side: a new regular expression is resolved within the heartbeat
  that brings it with us, in the background by Kafka (``REGEX_STEPS``); a duplicate ``group.instance.id``
  in a classic group fences the newcomer with us, the running member with Kafka (``DUPLICATE_STEPS``); our
  server ``range`` assignor is sticky, Kafka's is not (``RANGE_STEP``); a group id is of one protocol with
  us, Kafka 4 mixes them (``MIXED_STEPS``); our DescribeGroups describes consumer groups too
  (``DESCRIBE_STEPS``).
"""

from __future__ import annotations

import concurrent.futures
import uuid
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import pytest

from groupstream.protocol.messages import by_name
from support.apache_kafka import ApacheKafkaCluster, ExternalKafkaCluster
from support.brokers import KIP848_TEST_SETTINGS, BrokerKind, BrokerProcess
from support.group_script import (
    ClassicMember,
    ConsumerMember,
    Script,
    Step,
    compare,
    coordinator_address,
    err,
    fetch_offsets,
    form_classic,
    new_member_id,
)
from support.waiting import wait_until

# Both brokers in every test, so selected with Apache Kafka (`--brokers` naming apache): without it there is
# nothing to compare with.
pytestmark = [pytest.mark.compat, pytest.mark.slow, pytest.mark.broker_apache]

PARTITIONS = 4
# Kafka 4.4 (KIP-1263) computes a `consumer` group's target assignment at most once a second by default, on a
# background thread, so a heartbeat that bumps the group epoch is not answered with the new target at once;
# we batch by the same default interval, within the heartbeats. Both compute it within the heartbeat that
# bumps the epoch with these settings (group configs on the Apache side, the broker property on ours): the
# scenarios compare the protocol itself, which the batching only delays.
APACHE_GROUP_CONFIGS = {"consumer.assignment.interval.ms": "0", "consumer.assignor.offload.enable": "false"}
OUR_SETTINGS = {**KIP848_TEST_SETTINGS, "group.consumer.assignment.interval.ms": "0"}
Scenario = Callable[[Script], None]


@pytest.fixture(scope="module")
def ours(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """Our broker with the settings the Apache node runs with (``support.kafka_config``): no initial
    rebalance delay, ``consumer`` sessions of 6 s with 500 ms heartbeats; targets computed at once."""
    with BrokerProcess(BrokerKind.GROUPSTREAM, tmp_path_factory.mktemp("groupstream"),
                       settings=OUR_SETTINGS) as b:  # fmt: skip
        yield b


def run_both(scenario: Scenario, ours: BrokerProcess, apache: ApacheKafkaCluster | ExternalKafkaCluster,
             tag: str) -> tuple[list[Step], list[Step]]:  # fmt: skip
    """The scenario against each broker at once; (ours, Apache Kafka's) transcripts."""
    # The same names and member ids on both: the scripts are byte for byte alike.
    group, topic = f"diff-{tag}", f"diff-{tag}"
    ids = {name: new_member_id(name) for name in ("a", "a2", "b", "c", "d")}

    def run(bootstrap: str, apache: bool) -> list[Step]:
        first_host, first_port = bootstrap.split(",")[0].rsplit(":", 1)
        host, port = coordinator_address(first_host, int(first_port), group)
        s = Script(host, port, group, topic, ids=ids, epoch_base=1 if apache else 0)
        try:
            if apache:
                s.set_group_configs(APACHE_GROUP_CONFIGS)
            s.create_topic(PARTITIONS)
            scenario(s)
            return s.steps
        finally:
            s.close()

    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        mine = pool.submit(run, ours.bootstrap, False)
        theirs = pool.submit(run, apache.bootstrap, True)
        return mine.result(), theirs.result()


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


# -- classic protocol ----------------------------------------------------------------------------------------


def classic_join_leave_commit(s: Script) -> None:
    a, b = ClassicMember(s, "a"), ClassicMember(s, "b")
    s.describe_classic("unknown group described")
    s.describe_classic("unknown group described at v6", version=6)
    form_classic(s, [a, b], PARTITIONS)
    a.commit("a commits with the previous generation", {0: 5}, generation=a.generation - 1)
    a.commit("a commits with a generation ahead", {0: 5}, generation=a.generation + 1)
    a.commit("a commits as an unknown member", {0: 5}, member_id="nobody")
    a.commit("a commits with its generation", {0: 5})
    a.heartbeat("a heartbeats with the previous generation", a.generation - 1)
    b.leave("b leaves")
    b.heartbeat("b heartbeats after leaving")
    s.describe_classic("described after b left")
    a.heartbeat("a heartbeats after b left")
    a.join("a rejoins alone")
    a.sync("a syncs alone", {"a": list(range(PARTITIONS))})
    s.describe_classic("described with a alone")
    a.leave("a leaves")
    s.describe_classic("described empty")
    a.commit("a commits for the empty group without a generation", {1: 7}, generation=-1, member_id="")
    fetch_offsets(a, "offsets fetched without a member", [0, 1], anonymous=True)


def test_classic_join_leave_commit(
    ours: BrokerProcess, apache_node: ApacheKafkaCluster | ExternalKafkaCluster
) -> None:
    mine, theirs = run_both(classic_join_leave_commit, ours, apache_node, unique("cj"))
    compare(mine, theirs)


def step(steps: list[Step], name: str) -> Any:
    """The value one side recorded for the step ``name``."""
    found = [v for n, v in steps if n == name]
    assert len(found) == 1, f"step {name!r} recorded {len(found)} times"
    return found[0]


def classic_static_bounce(s: Script) -> None:
    a, b = ClassicMember(s, "a", instance_id="inst-a"), ClassicMember(s, "b")
    form_classic(s, [a, b], PARTITIONS)
    # a's process restarts: a new connection, no member id, the same instance id; the old one says no more.
    a2 = ClassicMember(s, "a2", instance_id="inst-a")
    a2.join("a's restarted process joins with a's instance id")
    a2.sync("a's restarted process syncs")
    b.heartbeat("b heartbeats after the bounce")
    a.heartbeat("a's old member id heartbeats")
    s.describe_classic("described after the bounce")
    a2.commit("a's restarted process commits", {0: 3})
    a.commit("a's old member id commits", {0: 4}, generation=a.generation)
    a2.leave("a's restarted process leaves")
    b.heartbeat("b heartbeats after a left")
    s.describe_classic("described after a left")


def test_classic_static_bounce(
    ours: BrokerProcess, apache_node: ApacheKafkaCluster | ExternalKafkaCluster
) -> None:
    mine, theirs = run_both(classic_static_bounce, ours, apache_node, unique("cs"))
    compare(mine, theirs)


def classic_session_expiry(s: Script) -> None:
    a, b = ClassicMember(s, "a"), ClassicMember(s, "b")
    form_classic(s, [a, b], PARTITIONS)

    def rebalancing() -> bool:  # a keeps its own session alive (every 0.5 s) while b's runs out
        code = a.heartbeat_code()
        assert code in ("NONE", "REBALANCE_IN_PROGRESS"), f"a's heartbeat while b's session runs out: {code}"
        return code == "REBALANCE_IN_PROGRESS"

    wait_until(rebalancing, 30, "b's session to expire (a told to rejoin)", interval_s=0.5)
    s.describe_classic("described once b's session expired")
    a.join("a rejoins")
    a.sync("a syncs alone", {"a": list(range(PARTITIONS))})
    s.describe_classic("described with a alone")
    b.heartbeat("b heartbeats after its session expired")
    b.commit("b commits after its session expired", {0: 1})
    b.join("b joins again with its expired member id")


def test_classic_session_expiry(
    ours: BrokerProcess, apache_node: ApacheKafkaCluster | ExternalKafkaCluster
) -> None:
    mine, theirs = run_both(classic_session_expiry, ours, apache_node, unique("ce"))
    compare(mine, theirs)


def classic_rebalance_timeout(s: Script) -> None:
    """b does not rejoin (revoke) within the rebalance timeout: the rebalance completes without it."""
    a, b, c = (ClassicMember(s, n, rebalance_timeout_ms=3000) for n in "abc")
    form_classic(s, [a, b], PARTITIONS)
    c.join("c joins without a member id")
    c.send_join()
    s.await_classic(
        lambda g: g["state"] == "PreparingRebalance" and len(g["members"]) == 3, "c's JoinGroup taken"
    )
    a.heartbeat("a heartbeats after c joined")
    a.send_join()
    a.receive_join("a rejoined (after the rebalance timeout)")
    c.receive_join("c joined")
    s.describe_classic("described without b")
    b.heartbeat("b heartbeats after the rebalance went on without it")
    c.send_sync()
    a.sync("a syncs the plan", {"a": [0, 2], "c": [1, 3]})
    c.receive_sync("c synced")
    s.describe_classic("described once stable")


def test_classic_rebalance_timeout(
    ours: BrokerProcess, apache_node: ApacheKafkaCluster | ExternalKafkaCluster
) -> None:
    mine, theirs = run_both(classic_rebalance_timeout, ours, apache_node, unique("cr"))
    compare(mine, theirs)


def classic_never_syncs(s: Script) -> None:
    """c joins a rebalance but never sends its SyncGroup (it heartbeats all along): once the rebalance
    timeout has passed since the join phase ended, the coordinator drops it and rebalances without it."""
    a, b, c = (ClassicMember(s, n, rebalance_timeout_ms=3000) for n in "abc")
    form_classic(s, [a, b], PARTITIONS)
    c.join("c joins without a member id")
    c.send_join()
    s.await_classic(
        lambda g: g["state"] == "PreparingRebalance" and len(g["members"]) == 3, "c's JoinGroup taken"
    )
    for m in (a, b):
        m.heartbeat(f"{m.name} heartbeats after c joined")
        m.send_join()
    for m in (a, b, c):
        m.receive_join(f"{m.name} joined generation 3")
    b.send_sync()
    a.sync("a syncs the plan", {"a": [0, 3], "b": [1], "c": [2]})
    b.receive_sync("b synced")
    s.describe_classic("described while c has not synced")

    def dropped() -> bool:  # a, b and c heartbeat (every 0.5 s) until the coordinator gives up on c's sync
        codes = {m.name: m.heartbeat_code() for m in (a, b, c)}
        assert set(codes.values()) <= {"NONE", "REBALANCE_IN_PROGRESS", "UNKNOWN_MEMBER_ID"}, codes
        return codes["c"] != "NONE"

    wait_until(dropped, 30, "c dropped for never syncing", interval_s=0.5)
    c.heartbeat("c heartbeats once dropped")
    a.heartbeat("a heartbeats once c was dropped")
    s.describe_classic("described once c was dropped")


def test_classic_member_that_never_syncs(
    ours: BrokerProcess, apache_node: ApacheKafkaCluster | ExternalKafkaCluster
) -> None:
    mine, theirs = run_both(classic_never_syncs, ours, apache_node, unique("cn"))
    compare(mine, theirs)


def classic_refusals(s: Script) -> None:
    """Classic requests refused: bad session timeouts, an empty group id, another protocol type or no
    common protocol, and a known group's requests from an unknown member or with the wrong generation."""
    J: Any = by_name("JoinGroup").Request
    x = ClassicMember(s, "x")
    x.join("a session timeout below the minimum", session_timeout_ms=5999)
    x.join("a session timeout above the maximum", session_timeout_ms=1_800_001)
    x.join("an empty group id", group_id="")
    x.heartbeat("a heartbeat to a group that does not exist")
    x.commit("a commit with a generation to a group that does not exist", {0: 1}, generation=1, member_id="m")
    a = ClassicMember(s, "a")
    form_classic(s, [a], PARTITIONS)
    y = ClassicMember(s, "y")
    y.join("another protocol type", protocol_type="connect")
    y.join("no protocol in common", protocols=[J.JoinGroupRequestProtocol(name="roundrobin", metadata=b"")])
    y.join("an unknown member id", member_id="nobody")
    y.heartbeat("a heartbeat from an unknown member id")
    y.member_id, y.generation = a.member_id, a.generation
    y.sync("a's member id syncing with another protocol name", protocol_name="roundrobin")
    y.sync("a's member id syncing with another protocol type", protocol_type="connect")
    y.sync("a's member id syncing an older generation", generation_id=a.generation - 1)
    y.member_id = "nobody"
    y.leave("an unknown member leaves")
    s.describe_classic("described after the refusals")


def test_classic_refusals(
    ours: BrokerProcess, apache_node: ApacheKafkaCluster | ExternalKafkaCluster
) -> None:
    mine, theirs = run_both(classic_refusals, ours, apache_node, unique("cx"))
    compare(mine, theirs)


# Our deliberate rule (README, "A duplicate group.instance.id fences the newcomer"): while the member holding
# an instance id is alive, a second process joining under it is the one fenced. Kafka lets the newcomer in
# and fences the running member. These steps differ by design; each side is pinned below.
DUPLICATE_STEPS = (
    "the second process's JoinGroup answered",
    "a heartbeats after the second process joined",
    "described after the second process joined",
    "the second process heartbeats",
)


def classic_duplicate_instance(s: Script) -> None:
    a = ClassicMember(s, "a", instance_id="inst-a")
    form_classic(s, [a], PARTITIONS)
    d = ClassicMember(s, "d", instance_id="inst-a")
    d.send_join()

    def answered() -> bool:  # a is alive: it heartbeats until the newcomer's JoinGroup is answered
        a.heartbeat_code()
        return d.wire.ready()

    wait_until(answered, 30, "the second process's JoinGroup answered", interval_s=0.1)
    d.receive_join(DUPLICATE_STEPS[0])
    a.heartbeat(DUPLICATE_STEPS[1])
    s.describe_classic(DUPLICATE_STEPS[2])
    d.heartbeat(DUPLICATE_STEPS[3])


def test_classic_duplicate_instance_id(ours: BrokerProcess,
                                       apache_node: ApacheKafkaCluster | ExternalKafkaCluster) -> None:  # fmt: skip
    mine, theirs = run_both(classic_duplicate_instance, ours, apache_node, unique("cd"))
    compare(mine, theirs, deliberate=DUPLICATE_STEPS)
    joined, heartbeat, described, newcomer = (step(mine, n) for n in DUPLICATE_STEPS)
    assert (joined["error"], heartbeat, newcomer) == ("FENCED_INSTANCE_ID", "NONE", "FENCED_INSTANCE_ID"), (
        mine
    )
    assert [m["member"] for m in described["members"]] == ["a"], described
    joined, heartbeat, described, newcomer = (step(theirs, n) for n in DUPLICATE_STEPS)
    assert (joined["error"], joined["generation"], joined["skip_assignment"]) == ("NONE", 1, True), theirs
    assert (heartbeat, newcomer) == ("FENCED_INSTANCE_ID", "NONE"), theirs
    assert [m["member"] for m in described["members"]] == ["d"], described


# -- consumer protocol (KIP-848) -----------------------------------------------------------------------------


def consumer_members(s: Script, *names: str, **kwargs: Any) -> list[ConsumerMember]:
    """Members with ids the test chose (the same on both brokers: ``Script.ids``)."""
    return [ConsumerMember(s, n, s.ids[n], **kwargs) for n in names]


def consumer_join_leave_commit(s: Script) -> None:
    a, b = consumer_members(s, "a", "b")
    s.describe_consumer("unknown group described")
    a.heartbeat("a joins")
    a.heartbeat("a heartbeats")
    s.describe_consumer("described with a")
    b.heartbeat("b joins")
    s.describe_consumer("described after b joined")
    a.heartbeat("a heartbeats after b joined")
    s.describe_consumer("described while a revokes")
    b.heartbeat("b heartbeats before a revoked")
    a.heartbeat("a reports its revocation")
    b.heartbeat("b heartbeats after a revoked")
    b.heartbeat("b heartbeats again")
    s.describe_consumer("described once reconciled")
    a.commit("a commits with its epoch", {0: 5})
    a.commit("a commits with an older epoch", {0: 5}, epoch=a.epoch - 1)
    a.commit("a commits with an epoch ahead", {0: 5}, epoch=a.epoch + 1)
    fetch_offsets(a, "a fetches offsets at its epoch", [0, 1])
    fetch_offsets(a, "a fetches offsets at an older epoch", [0], epoch=a.epoch - 1)
    fetch_offsets(a, "a fetches offsets at an epoch ahead", [0], epoch=a.epoch + 1)
    fetch_offsets(a, "an unknown member fetches offsets", [0], member_id="nobody")
    a.heartbeat("a heartbeats with an older epoch", epoch=a.epoch - 1)
    a.heartbeat("a heartbeats with an epoch ahead", epoch=a.epoch + 1)
    b.leave("b leaves")
    b.heartbeat("b heartbeats after leaving", epoch=b.epoch)
    b.commit("b commits after leaving", {1: 5})
    s.describe_consumer("described after b left")
    a.heartbeat("a heartbeats after b left")
    a.heartbeat("a heartbeats again")
    s.describe_consumer("described with a alone")
    a.leave("a leaves")
    s.describe_consumer("described empty")
    a.commit("a commits for the empty group without an epoch", {1: 7}, epoch=-1)
    fetch_offsets(a, "offsets fetched without a member", [0, 1], anonymous=True)


def test_consumer_join_leave_commit(
    ours: BrokerProcess, apache_node: ApacheKafkaCluster | ExternalKafkaCluster
) -> None:
    mine, theirs = run_both(consumer_join_leave_commit, ours, apache_node, unique("kj"))
    compare(mine, theirs)


def reconcile(s: Script, members: list[ConsumerMember], prefix: str) -> None:
    """Each member heartbeats in turn until the group is stable: revocations reported, new partitions
    handed out (a fixed order, so both brokers see the same sequence); every heartbeat is recorded."""
    for round_ in range(1, 4):
        for m in members:
            m.heartbeat(f"{prefix}: {m.name} heartbeats (round {round_})")
    s.describe_consumer(f"{prefix}: described")


def consumer_static_bounce_duplicate(s: Script) -> None:
    a = ConsumerMember(s, "a", s.ids["a"], instance_id="inst-a")
    (b,) = consumer_members(s, "b")
    a.heartbeat("a joins with an instance id")
    b.heartbeat("b joins")
    reconcile(s, [a, b], "formed")
    d = ConsumerMember(s, "d", s.ids["d"], instance_id="inst-a")
    d.heartbeat("a second process joins with a's instance id")
    s.describe_consumer("described after the second process was refused")
    a.leave("a leaves, keeping its place (epoch -2)")
    s.describe_consumer("described while a's place is kept")
    b.heartbeat("b heartbeats while a's place is kept")
    a2 = ConsumerMember(s, "a2", s.ids["a2"], instance_id="inst-a")
    a2.heartbeat("a's restarted process joins with a's instance id")
    s.describe_consumer("described after the bounce")
    a2.heartbeat("a's restarted process heartbeats")
    b.heartbeat("b heartbeats after the bounce")
    a.heartbeat("a's old member id heartbeats", epoch=0)
    a2.commit("a's restarted process commits", {0: 3})
    a2.leave("a's restarted process leaves for good")
    s.describe_consumer("described after the static member left")


def test_consumer_static_bounce_and_duplicate_instance_id(
    ours: BrokerProcess, apache_node: ApacheKafkaCluster | ExternalKafkaCluster
) -> None:
    mine, theirs = run_both(consumer_static_bounce_duplicate, ours, apache_node, unique("ks"))
    compare(mine, theirs)


def consumer_session_expiry(s: Script) -> None:
    a, b = consumer_members(s, "a", "b")
    a.heartbeat("a joins")
    b.heartbeat("b joins")
    reconcile(s, [a, b], "formed")

    def b_gone() -> bool:  # a heartbeats (its session must not run out too) until b's session has
        r = a.heartbeat_raw()
        assert r.error_code == 0, f"a's heartbeat while b's session runs out: {r.error_code}"
        g = s.consumer_view(s.describe_consumer_raw())
        return [m["member"] for m in g["members"]] == ["a"]

    wait_until(b_gone, 30, "b's session to expire", interval_s=0.5)
    b.heartbeat("b heartbeats after its session expired")
    b.commit("b commits after its session expired", {2: 1})
    reconcile(s, [a], "a alone")
    b.rejoin("b joins again")
    reconcile(s, [a, b], "b back")


def test_consumer_session_expiry(
    ours: BrokerProcess, apache_node: ApacheKafkaCluster | ExternalKafkaCluster
) -> None:
    mine, theirs = run_both(consumer_session_expiry, ours, apache_node, unique("ke"))
    compare(mine, theirs)


def consumer_rebalance_timeout(s: Script) -> None:
    """a does not revoke within its rebalance timeout: it is fenced and b gets the partitions."""
    a = ConsumerMember(s, "a", s.ids["a"], rebalance_timeout_ms=2000)
    b = ConsumerMember(s, "b", s.ids["b"], rebalance_timeout_ms=2000)
    a.heartbeat("a joins")
    b.heartbeat("b joins")
    a.hold = True
    a.heartbeat("a is asked to revoke")
    a.heartbeat("a heartbeats still owning everything")
    s.describe_consumer("described while a holds on")
    s.await_consumer(
        lambda g: [m["member"] for m in g["members"]] == ["b"], "a fenced after its rebalance timeout"
    )
    s.describe_consumer("described once a was fenced")
    a.heartbeat("a heartbeats after it was fenced")
    a.commit("a commits after it was fenced", {0: 1})
    reconcile(s, [b], "b alone")
    a.rejoin("a joins again")
    for _ in range(3):  # which member gets which range differs by design (RANGE_STEP); each side pinned below
        a.heartbeat_raw(), b.heartbeat_raw()
    g = s.consumer_view(s.describe_consumer_raw())
    s.record("a back: epochs and states", {**g, "members": [{**m, "assignment": len(m["assignment"][0][1]),
                                           "target": None} for m in g["members"]]})  # fmt: skip
    s.record(RANGE_STEP, {m["member"]: m["assignment"] for m in g["members"]})


# Our server-side `range` assignor is sticky (src/groupstream/assignment/server_range.py): when the member
# set changes, each range goes preferably to the member already holding most of it. Kafka 4.4's hands range
# i to the i-th member by (instance id, member id), whatever they held: here b, alone with every partition,
# keeps 0-1 with us and moves to 2-3 with Kafka when a comes back.
RANGE_STEP = "a back: who got which range"


def test_consumer_rebalance_timeout(
    ours: BrokerProcess, apache_node: ApacheKafkaCluster | ExternalKafkaCluster
) -> None:
    mine, theirs = run_both(consumer_rebalance_timeout, ours, apache_node, unique("kr"))
    compare(mine, theirs, deliberate=[RANGE_STEP])
    assert step(mine, RANGE_STEP) == {"a": [("<topic>", [2, 3])], "b": [("<topic>", [0, 1])]}, mine
    assert step(theirs, RANGE_STEP) == {"a": [("<topic>", [0, 1])], "b": [("<topic>", [2, 3])]}, theirs


def consumer_refusals(s: Script) -> None:
    """Invalid ConsumerGroupHeartbeats (each a join with one thing wrong), then wrong epochs and ids of a
    member of a live group: the error codes and messages clients log."""
    a, b = consumer_members(s, "a", "b")
    a.refused("an empty member id", member_id="")
    a.refused("an empty instance id", instance_id="")
    a.refused("an empty rack id", rack_id="")
    a.refused("no rebalance timeout", rebalance_timeout_ms=-1)
    a.refused("owned partitions missing when joining", topic_partitions=None)
    a.refused("neither topic names nor a regex", subscribed_topic_names=None)
    a.refused("a static leave without an instance id", member_epoch=-2)
    a.refused("epoch -3", member_epoch=-3)
    a.refused("an unknown server assignor", server_assignor="sticky")
    a.refused("a bad regular expression", subscribed_topic_names=None, subscribed_topic_regex="t(")
    a.refused("epoch 5 for a group that does not exist", member_epoch=5)
    a.heartbeat("a joins")
    b.refused("b heartbeats at epoch 1 without having joined", member_epoch=1)
    a.refused("a heartbeats at an epoch ahead", member_epoch=a.epoch + 1, topic_partitions=None)
    a.refused("a leaves with another member's instance id", member_epoch=-2, instance_id="someone")


def test_consumer_refusals(
    ours: BrokerProcess, apache_node: ApacheKafkaCluster | ExternalKafkaCluster
) -> None:
    mine, theirs = run_both(consumer_refusals, ours, apache_node, unique("kx"))
    compare(mine, theirs)


# Deliberate: we resolve a new regular expression within the heartbeat that brings it, so the member's first
# answer carries its partitions. Kafka 4.4 resolves it in the background: the join is answered with nothing,
# and the resolution bumps the group epoch once more. Each side is pinned below; what follows is equal.
REGEX_STEPS = ("a joins subscribed by a regular expression", "described once the regex was resolved")


def consumer_regex(s: Script) -> None:
    a = ConsumerMember(s, "a", s.ids["a"])
    a.regex = f"{s.topic[:-2]}.*"
    a.heartbeat(REGEX_STEPS[0])

    def resolved() -> bool:  # a heartbeats (its session goes on) until the resolution gave it the partitions
        r = a.heartbeat_raw()
        assert r.error_code == 0, f"a's heartbeat while its regex is resolved: {err(r.error_code)}"
        return bool(a.assigned) and s.consumer_view(s.describe_consumer_raw())["state"] == "Stable"

    wait_until(resolved, 30, "a's regular expression resolved and its partitions given", interval_s=0.2)
    resolved_at = s.describe_consumer(REGEX_STEPS[1])["group_epoch"]
    g = s.consumer_view(s.describe_consumer_raw())
    s.record(
        "regex, subscription and partitions",
        [(m["regex"], m["topics"], m["assignment"]) for m in g["members"]],
    )
    a.leave("a leaves")
    g = s.consumer_view(s.describe_consumer_raw())
    s.record("described empty (epochs counted from the resolution's)",
             {**g, "group_epoch": g["group_epoch"] - resolved_at, "assignment_epoch": g["assignment_epoch"] - resolved_at})  # fmt: skip


def test_consumer_regex_subscription(
    ours: BrokerProcess, apache_node: ApacheKafkaCluster | ExternalKafkaCluster
) -> None:
    mine, theirs = run_both(consumer_regex, ours, apache_node, unique("kg"))
    compare(mine, theirs, deliberate=REGEX_STEPS)
    everything = [("<topic>", list(range(PARTITIONS)))]
    for steps, first_answer, epoch in ((mine, everything, 1), (theirs, [], 2)):
        joined, resolved = (step(steps, n) for n in REGEX_STEPS)
        assert (joined["error"], joined["epoch"], joined["assignment"]) == ("NONE", 1, first_answer), steps
        (member,) = resolved["members"]
        assert (resolved["group_epoch"], member["epoch"], member["assignment"]) == (
            epoch,
            epoch,
            everything,
        ), steps


# -- both protocols on one group id ------------------------------------------------------------------------------

# Online migration (README): a classic member may join a consumer group and a `consumer` member converts a live
# classic group, on both brokers.
MIXED_STEPS = ("a classic member joins the consumer group", "a consumer member joins the classic group")
# Deliberate: our DescribeGroups describes a consumer group too (for tools that speak only DescribeGroups);
# Kafka 4 reports it as no classic group (KIP-1043: Dead before v6, GROUP_ID_NOT_FOUND from v6).
# After MIXED_STEPS, the classic group has become a consumer group on both brokers.
LIST_STEP = "the run's groups listed"
DESCRIBE_STEPS = ("the consumer group seen by DescribeGroups", "the consumer group seen by DescribeGroups v6")


def mixed_protocols(s: Script) -> None:
    (a,) = consumer_members(s, "a")
    a.heartbeat("a joins")
    s.describe_classic(DESCRIBE_STEPS[0])
    s.describe_classic(DESCRIBE_STEPS[1], version=6)
    ClassicMember(s, "c").join(MIXED_STEPS[0])
    s.describe_consumer("described after the classic member asked")
    # A classic group of the same run (it shares the transcript and the names), then a `consumer` member.
    group = f"{s.group}-classic"
    host, port = coordinator_address(s.host, s.port, group)
    classic = replace(s, host=host, port=port, group=group)
    k = ClassicMember(classic, "k")
    form_classic(classic, [k], PARTITIONS, prefix="classic group")
    ConsumerMember(classic, "b", s.ids["b"]).heartbeat(MIXED_STEPS[1])
    s.list_groups(LIST_STEP)


def test_mixed_protocols(ours: BrokerProcess, apache_node: ApacheKafkaCluster | ExternalKafkaCluster) -> None:
    mine, theirs = run_both(mixed_protocols, ours, apache_node, unique("km"))
    # online migration (Kafka 4): a classic member asking a consumer group is told to join with a member id,
    # and a consumer member's heartbeat converts the live classic group, on both brokers alike
    # (deliberate: the converting member's first answer; the converted group's first target is computed at once
    # by us, at the next epoch, while Kafka's background assignor answers it at the classic generation first)
    compare(mine, theirs, deliberate=(*DESCRIBE_STEPS, MIXED_STEPS[1]))
    for steps, first_epoch in ((mine, 2), (theirs, 1)):
        classic_join, consumer_join = (step(steps, n) for n in MIXED_STEPS)
        assert (classic_join["error"], consumer_join["error"]) == ("MEMBER_ID_REQUIRED", "NONE"), steps
        assert consumer_join["epoch"] == first_epoch, consumer_join
        listed = {g[0]: g[1:] for g in step(steps, LIST_STEP)}
        assert listed["<group>-classic"] == ("consumer", "Reconciling", "consumer"), listed
    v5, v6 = (step(mine, n) for n in DESCRIBE_STEPS)
    for described in (v5, v6):
        assert (described["error"], described["state"], described["protocol_type"]) == (
            "NONE",
            "Stable",
            "consumer",
        )
        assert [m["member"] for m in described["members"]] == ["a"], described
    v5, v6 = (step(theirs, n) for n in DESCRIBE_STEPS)
    assert (v5["error"], v5["state"], v5["members"]) == ("NONE", "Dead", []), v5
    assert (v6["error"], v6["message"]) == ("GROUP_ID_NOT_FOUND", "Group <group> is not a classic group."), v6
