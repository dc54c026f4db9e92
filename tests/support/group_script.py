"""Group protocol scripts spoken request by request, for comparing two brokers (issue 13, item 4).

Why: to compare our group coordinator with Apache Kafka's, both must be sent the same bytes in the same order
and their answers recorded as they come, with nothing in between that decides on its own (a real client
retries, backs off and rejoins when it likes). So every request here is explicit: a member sends exactly what
the scenario says, on its own connection (as a process would), and a request the coordinator parks (a
JoinGroup waiting for the others, a SyncGroup waiting for the leader) can be sent and its answer collected
later. What is legitimately different between two runs (member ids the broker chose, topic ids, the group
name's run tag) is named by the scenario's own names in the transcript, so two transcripts compare equal
step by step when the coordinators behave alike.

Built on our sans-IO codec (``ClientConnection``) and one blocking socket per member; nothing of the client.
"""

from __future__ import annotations

import re
import select
import socket
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from groupstream.protocol.connection import ClientConnection
from groupstream.protocol.consumer_protocol import (
    ConsumerAssignment,
    ConsumerSubscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from groupstream.protocol.error_codes import ErrorCode
from groupstream.protocol.messages import APIS, by_name
from support.kafka_probes import find_group_coordinator, metadata
from support.waiting import wait_until

__all__ = [
    "VERSIONS",
    "ClassicMember",
    "ConsumerMember",
    "Script",
    "Step",
    "Wire",
    "compare",
    "coordinator_address",
]

# The versions every script speaks, whichever broker it talks to: the newest both Apache Kafka 4.x and we
# serve, so the bytes on the wire are the same for both.
VERSIONS: dict[str, int] = {
    "Metadata": 12,
    "IncrementalAlterConfigs": 1,
    "CreateTopics": 7,
    "JoinGroup": 9,
    "SyncGroup": 5,
    "Heartbeat": 4,
    "LeaveGroup": 5,
    "OffsetCommit": 9,
    "OffsetFetch": 9,
    "DescribeGroups": 5,
    "ListGroups": 5,
    "ConsumerGroupHeartbeat": 1,
    "ConsumerGroupDescribe": 1,
}

Step = tuple[str, Any]
_LOADING = (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE)
_V = TypeVar("_V")


def err(code: int) -> str:
    return ErrorCode(code).name


def coordinator_address(host: str, port: int, group: str) -> tuple[str, int]:
    """Where ``group``'s coordinator is (on a cluster of one's own it may be any node), once there is one."""
    found: list[int] = []

    def located() -> bool:
        code, node = find_group_coordinator(host, port, group)
        if code == 0:
            found.append(node)
        return code == 0

    wait_until(located, 60, f"a coordinator for {group} at {host}:{port}", interval_s=0.1)
    return metadata(host, port).brokers[found[-1]]


class Wire:
    """One connection: requests encoded by our codec, answers taken in the order they were asked (a broker
    answers one connection's requests in order), so a parked request can be sent now and collected later."""

    def __init__(self, host: str, port: int, client_id: str, timeout: float = 30.0) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.conn = ClientConnection(APIS, client_id)
        self.outstanding = 0

    def close(self) -> None:
        self.sock.close()

    def send(self, api_name: str, version: int | None = None, **fields: Any) -> None:
        """``api_name`` at the scripts' version (``VERSIONS``) unless ``version`` says otherwise."""
        api = by_name(api_name)
        v = VERSIONS[api_name] if version is None else version
        _, wire = self.conn.send_request(api, v, api.Request(**fields))
        self.sock.sendall(wire)
        self.outstanding += 1

    def ready(self) -> bool:
        """Whether the oldest outstanding answer has (begun to) arrive, without blocking."""
        readable, _, _ = select.select([self.sock], [], [], 0)
        return bool(readable)

    def receive(self) -> Any:
        if self.outstanding == 0:
            raise AssertionError("receive() with no request outstanding on this connection")
        while True:
            got = self.conn.next_response()
            if got is not None:
                self.outstanding -= 1
                return got[3]
            data = self.sock.recv(65536)
            if not data:
                raise ConnectionError("the broker closed the connection")
            self.conn.receive_data(data)

    def call(self, api_name: str, version: int | None = None, **fields: Any) -> Any:
        self.send(api_name, version, **fields)
        return self.receive()


@dataclass
class Script:
    """One run of a scenario against one broker: its transcript, and the names it gives to what the broker
    chose (member ids, topic ids)."""

    host: str
    port: int
    group: str
    topic: str
    steps: list[Step] = field(default_factory=list)
    names: dict[str, str] = field(default_factory=dict)  # member id or topic id -> the scenario's name
    wires: list[Wire] = field(default_factory=list)
    ids: Mapping[str, str] = field(default_factory=dict)  # consumer-protocol member ids, chosen by the test
    # What a new ``consumer`` group's epochs start from: Kafka 4.4 creates a group at epoch 1 with an empty
    # target assignment (KAFKA-20268, for assignments computed in the background), so its first member is
    # at epoch 2 where ours is at 1. Epochs above 0 are recorded less this (0, -1 and -2 mean themselves).
    epoch_base: int = 0

    # -- plumbing -----------------------------------------------------------------------------------------

    def wire(self, client_id: str) -> Wire:
        w = Wire(self.host, self.port, client_id)
        self.wires.append(w)
        return w

    def close(self) -> None:
        for w in self.wires:
            w.close()

    def record(self, step: str, value: _V) -> _V:
        self.steps.append((step, value))
        return value

    def name(self, broker_value: str) -> str:
        """The scenario's name for a member id or topic id ('' stays '')."""
        if not broker_value:
            return ""
        return self.names.get(broker_value, f"<unnamed {broker_value}>")

    def topics(self, names: Iterable[str]) -> tuple[str, ...]:
        """Topic names with the scenario's topic (its name carries the run's tag) as ``<topic>``."""
        return tuple("<topic>" if t == self.topic else t for t in names)

    def pairs(self, partitions: Iterable[tuple[str, int]]) -> tuple[tuple[str, int], ...]:
        return tuple(("<topic>" if t == self.topic else t, p) for t, p in partitions)

    def epoch(self, value: int) -> int:
        """An epoch as the transcript counts it (see ``epoch_base``)."""
        return value - self.epoch_base if value > 0 else value

    def learn(self, broker_value: str, name: str) -> None:
        if broker_value and broker_value not in self.names:
            self.names[broker_value] = name

    # -- set-up (not part of the transcript) ----------------------------------------------------------------

    def create_topic(self, partitions: int) -> None:
        """The scenario's topic, visible with a leader for every partition, and the group's coordinator
        loaded (Kafka creates ``__consumer_offsets`` on the first FindCoordinator)."""
        w = self.wire("diff-setup")
        C: Any = by_name("CreateTopics").Request
        resp = w.call("CreateTopics", topics=[C.CreatableTopic(name=self.topic, num_partitions=partitions,
                      replication_factor=1, assignments=[], configs=[])], timeout_ms=30_000)  # fmt: skip
        assert resp.topics[0].error_code == 0, f"CreateTopics {self.topic}: {err(resp.topics[0].error_code)}"
        M: Any = by_name("Metadata").Request

        def visible() -> bool:
            md = w.call("Metadata", topics=[M.MetadataRequestTopic(name=self.topic)],
                        allow_auto_topic_creation=False)  # fmt: skip
            t = md.topics[0]
            if (
                t.error_code != 0
                or len(t.partitions) != partitions
                or any(p.leader_id < 0 for p in t.partitions)
            ):
                return False
            self.learn(str(t.topic_id), "<topic>")
            return True

        wait_until(visible, 30, f"topic {self.topic} with {partitions} led partitions", interval_s=0.1)
        wait_until(lambda: find_group_coordinator(self.host, self.port, self.group)[0] == 0, 60,
                   f"a coordinator for {self.group}", interval_s=0.1)  # fmt: skip
        self._wait_assignable(partitions)
        wait_until(lambda: self.describe_classic_raw().groups[0].error_code not in _LOADING, 60,
                   f"the coordinator of {self.group} loaded", interval_s=0.1)  # fmt: skip

    def _wait_assignable(self, partitions: int) -> None:
        """Until the group coordinator assigns the topic's partitions: Kafka's coordinator learns of a new
        topic from its own copy of the cluster metadata, which may lag the Metadata answers; a group formed
        before then is assigned nothing. A throwaway ``consumer`` group (not the scenario's) asks."""
        group = f"{self.group}-ready"
        host, port = coordinator_address(self.host, self.port, group)
        probe_script = replace(self, host=host, port=port, group=group, steps=[], names={}, wires=[])
        probe = ConsumerMember(probe_script, "ready", new_member_id(), assignor=None)
        self.wires.append(probe.wire)

        def assigned() -> bool:
            r = probe.heartbeat_raw()
            if r.error_code in _LOADING:
                return False
            assert r.error_code == 0, f"probe heartbeat: {err(r.error_code)} {r.error_message}"
            return sum(len(ps) for _, ps in probe.assigned) == partitions

        wait_until(assigned, 30, f"the coordinator assigning {self.topic}'s {partitions} partitions",
                   interval_s=0.1)  # fmt: skip
        probe.leave_raw()

    def set_group_configs(self, configs: Mapping[str, str]) -> None:
        """Group-level configs (IncrementalAlterConfigs SET on resource type GROUP), set before the group
        exists: how Apache Kafka is told to run one group the way the scenario needs."""
        R: Any = by_name("IncrementalAlterConfigs").Request
        C = R.AlterConfigsResource
        resource = C(resource_type=32, resource_name=self.group,
                     configs=[C.AlterableConfig(name=k, config_operation=0, value=v) for k, v in configs.items()])  # fmt: skip
        resp = self.wire("diff-setup").call(
            "IncrementalAlterConfigs", resources=[resource], validate_only=False
        )
        answer = resp.responses[0]
        assert answer.error_code == 0, (
            f"group configs {dict(configs)}: {err(answer.error_code)} {answer.error_message}"
        )

    # -- DescribeGroups and ConsumerGroupDescribe ----------------------------------------------------------

    def describe_classic_raw(self, version: int | None = None) -> Any:
        return self._admin().call(
            "DescribeGroups", version, groups=[self.group], include_authorized_operations=False
        )

    def describe_consumer_raw(self) -> Any:
        return self._admin().call("ConsumerGroupDescribe", group_ids=[self.group],
                                  include_authorized_operations=False)  # fmt: skip

    def _admin(self) -> Wire:
        if not hasattr(self, "_admin_wire"):
            self._admin_wire = self.wire("diff-admin")
        return self._admin_wire

    def classic_view(self, resp: Any) -> dict[str, Any]:
        g = resp.groups[0]
        members = []
        for m in g.members:
            sub = self.topics(decode_subscription(m.member_metadata).topics) if m.member_metadata else None
            assigned = (
                self.pairs(decode_assignment(m.member_assignment).partitions) if m.member_assignment else ()
            )
            members.append({"member": self.name(m.member_id), "instance": m.group_instance_id,
                            "client": m.client_id, "subscription": sub, "assignment": assigned})  # fmt: skip
        message = None if g.error_message is None else g.error_message.replace(self.group, "<group>")
        return {"error": err(g.error_code), "message": message, "state": g.group_state,
                "protocol_type": g.protocol_type,
                "protocol": g.protocol_data, "members": sorted(members, key=lambda x: str(x["member"]))}  # fmt: skip

    def list_groups(self, step: str) -> list[tuple[str, str, str, str]]:
        """ListGroups v5: this run's groups (named after the scenario's group), with protocol type, state
        and type."""
        r = self._admin().call("ListGroups", states_filter=[], types_filter=[])
        assert r.error_code == 0, f"ListGroups: {err(r.error_code)}"
        mine = sorted((g.group_id.replace(self.group, "<group>"), g.protocol_type, g.group_state, g.group_type)
                      for g in r.groups if g.group_id.startswith(self.group))  # fmt: skip
        return self.record(step, mine)

    def describe_classic(self, step: str, version: int | None = None) -> dict[str, Any]:
        return self.record(step, self.classic_view(self.describe_classic_raw(version)))

    def await_classic(
        self, condition: Callable[[dict[str, Any]], bool], what: str, timeout: float = 30
    ) -> None:
        """Until the described classic group satisfies ``condition`` (not recorded: how often it was asked
        is timing)."""
        last: list[dict[str, Any]] = []

        def holds() -> bool:
            last[:] = [self.classic_view(self.describe_classic_raw())]
            return condition(last[0])

        wait_until(holds, timeout, what, interval_s=0.05, explain=lambda: f"last described: {last}")

    def await_consumer(
        self, condition: Callable[[dict[str, Any]], bool], what: str, timeout: float = 30
    ) -> None:
        """Until the described ``consumer`` group satisfies ``condition`` (not recorded)."""
        last: list[dict[str, Any]] = []

        def holds() -> bool:
            last[:] = [self.consumer_view(self.describe_consumer_raw())]
            return condition(last[0])

        wait_until(holds, timeout, what, interval_s=0.05, explain=lambda: f"last described: {last}")

    def consumer_view(self, resp: Any) -> dict[str, Any]:
        g = resp.groups[0]

        def parts(a: Any) -> list[tuple[str, list[int]]]:
            if a is None:
                return []
            return sorted((self.name(str(tp.topic_id)), sorted(tp.partitions)) for tp in a.topic_partitions)

        members = [{"member": self.name(m.member_id), "instance": m.instance_id, "epoch": self.epoch(m.member_epoch),
                    "client": m.client_id, "topics": sorted(self.topics(m.subscribed_topic_names or [])),
                    "regex": m.subscribed_topic_regex, "assignment": parts(m.assignment),
                    "target": parts(m.target_assignment), "type": m.member_type}
                   for m in g.members]  # fmt: skip
        return {"error": err(g.error_code), "state": g.group_state, "group_epoch": self.epoch(g.group_epoch),
                "assignment_epoch": self.epoch(g.assignment_epoch), "assignor": g.assignor_name,
                "members": sorted(members, key=lambda x: str(x["member"]))}  # fmt: skip

    def describe_consumer(self, step: str) -> dict[str, Any]:
        return self.record(step, self.consumer_view(self.describe_consumer_raw()))


# -- the classic protocol ------------------------------------------------------------------------------------


class ClassicMember:
    """One classic-protocol member (one process): its connection, the member id the broker gave it, the
    generation it last joined. Its requests carry exactly what the scenario says."""

    def __init__(self, script: Script, name: str, *, instance_id: str | None = None, session_timeout_ms: int = 6000,
                 rebalance_timeout_ms: int = 30_000) -> None:  # fmt: skip
        self.s = script
        self.name = name
        self.instance_id = instance_id
        self.session_timeout_ms = session_timeout_ms
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.wire = script.wire(f"diff-{name}")
        self.member_id = ""
        self.generation = -1
        self.assignment: tuple[tuple[str, int], ...] = ()
        self._ids = 0
        self.last_join: Any = None

    def _learn_id(self, member_id: str) -> None:
        if member_id and member_id not in self.s.names:
            self._ids += 1
            self.s.learn(member_id, self.name if self._ids == 1 else f"{self.name}#{self._ids}")

    def send_join(self, **overrides: Any) -> None:
        """JoinGroup as this member sends it; ``overrides`` replace fields (to make it invalid)."""
        J: Any = by_name("JoinGroup").Request
        sub = encode_subscription(ConsumerSubscription((self.s.topic,)), 0)
        fields: dict[str, Any] = dict(
            group_id=self.s.group, session_timeout_ms=self.session_timeout_ms,
            rebalance_timeout_ms=self.rebalance_timeout_ms, member_id=self.member_id,
            group_instance_id=self.instance_id, protocol_type="consumer",
            protocols=[J.JoinGroupRequestProtocol(name="range", metadata=sub)],
        )  # fmt: skip
        fields.update(overrides)
        self.wire.send("JoinGroup", **fields)

    def receive_join(self, step: str) -> dict[str, Any]:
        r = self.wire.receive()
        self._learn_id(r.member_id)
        if r.error_code in (ErrorCode.NONE, ErrorCode.MEMBER_ID_REQUIRED):
            self.member_id = r.member_id
        if r.error_code == ErrorCode.NONE:
            self.generation = r.generation_id
            self.last_join = r
        members = sorted((self.s.name(m.member_id), m.group_instance_id,
                          self.s.topics(decode_subscription(m.metadata).topics)) for m in r.members)  # fmt: skip
        return self.s.record(step, {
            "error": err(r.error_code), "generation": r.generation_id, "protocol_type": r.protocol_type,
            "protocol": r.protocol_name, "leader": self.s.name(r.leader), "skip_assignment": r.skip_assignment,
            "member": self.s.name(r.member_id), "members": members})  # fmt: skip

    def join(self, step: str, **overrides: Any) -> dict[str, Any]:
        self.send_join(**overrides)
        return self.receive_join(step)

    def send_sync(self, plan: Mapping[str, Sequence[int]] | None = None, **overrides: Any) -> None:
        """SyncGroup; the leader passes ``plan``, the partitions of each member by the members' names;
        ``overrides`` replace fields (to make it invalid)."""
        S: Any = by_name("SyncGroup").Request
        assignments = []
        if plan is not None:
            ids = {self.s.name(mid): mid for mid in self.s.names if self.s.names[mid] != "<topic>"}
            for member_name, partitions in sorted(plan.items()):
                a = encode_assignment(ConsumerAssignment(tuple((self.s.topic, p) for p in partitions)), 0)
                assignments.append(S.SyncGroupRequestAssignment(member_id=ids[member_name], assignment=a))
        fields: dict[str, Any] = dict(
            group_id=self.s.group, generation_id=self.generation, member_id=self.member_id,
            group_instance_id=self.instance_id, protocol_type="consumer", protocol_name="range",
            assignments=assignments,
        )  # fmt: skip
        fields.update(overrides)
        self.wire.send("SyncGroup", **fields)

    def receive_sync(self, step: str) -> dict[str, Any]:
        r = self.wire.receive()
        if r.error_code == ErrorCode.NONE:
            self.assignment = decode_assignment(r.assignment).partitions
        partitions = [p for _, p in decode_assignment(r.assignment).partitions] if r.assignment else []
        return self.s.record(step, {"error": err(r.error_code), "protocol_type": r.protocol_type,
                                    "protocol": r.protocol_name, "partitions": partitions})  # fmt: skip

    def sync(
        self, step: str, plan: Mapping[str, Sequence[int]] | None = None, **overrides: Any
    ) -> dict[str, Any]:
        self.send_sync(plan, **overrides)
        return self.receive_sync(step)

    def heartbeat_code(self, generation: int | None = None) -> str:
        r = self.wire.call("Heartbeat", group_id=self.s.group, member_id=self.member_id,
                           generation_id=self.generation if generation is None else generation,
                           group_instance_id=self.instance_id)  # fmt: skip
        return err(r.error_code)

    def heartbeat(self, step: str, generation: int | None = None) -> str:
        return self.s.record(step, self.heartbeat_code(generation))

    def commit(self, step: str, offsets: Mapping[int, int], *, generation: int | None = None,
               member_id: str | None = None) -> dict[int, str]:  # fmt: skip
        R: Any = by_name("OffsetCommit").Request
        T = R.OffsetCommitRequestTopic
        parts = [T.OffsetCommitRequestPartition(partition_index=p, committed_offset=o, committed_metadata="")
                 for p, o in sorted(offsets.items())]  # fmt: skip
        r = self.wire.call("OffsetCommit", group_id=self.s.group,
                           generation_id_or_member_epoch=self.generation if generation is None else generation,
                           member_id=self.member_id if member_id is None else member_id,
                           group_instance_id=self.instance_id, topics=[T(name=self.s.topic, partitions=parts)])  # fmt: skip
        return self.s.record(
            step, {p.partition_index: err(p.error_code) for t in r.topics for p in t.partitions}
        )

    def leave(self, step: str) -> dict[str, Any]:
        L: Any = by_name("LeaveGroup").Request
        r = self.wire.call("LeaveGroup", group_id=self.s.group, members=[
            L.MemberIdentity(member_id=self.member_id, group_instance_id=self.instance_id)])  # fmt: skip
        return self.s.record(step, {"error": err(r.error_code), "members": [
            (self.s.name(m.member_id), m.group_instance_id, err(m.error_code)) for m in r.members]})  # fmt: skip


def form_classic(s: Script, members: Sequence[ClassicMember], partitions: int, prefix: str = "form") -> None:
    """The first member joins and leads alone (generation 1); then the others join in one rebalance
    (generation 2): each newcomer is told MEMBER_ID_REQUIRED (a static one is not) and parks its JoinGroup,
    the leader learns of the rebalance by heartbeat and rejoins, and the leader assigns round-robin by name."""
    first, rest = members[0], members[1:]
    if first.instance_id is None:
        first.join(f"{prefix}: {first.name} joins without a member id")
    first.join(f"{prefix}: {first.name} joins")
    first.sync(f"{prefix}: {first.name} syncs alone", {first.name: list(range(partitions))})
    if not rest:
        return
    for m in rest:
        if m.instance_id is None:
            m.join(f"{prefix}: {m.name} joins without a member id")
        m.send_join()
    # Requests on different connections may be taken in any order: the leader's heartbeat must come after
    # the newcomers' JoinGroups, so wait until the coordinator shows it has them.
    s.await_classic(lambda g: g["state"] == "PreparingRebalance" and len(g["members"]) == len(members),
                    f"{prefix}: every newcomer's JoinGroup taken")  # fmt: skip
    s.describe_classic(f"{prefix}: described while the others wait")
    first.heartbeat(f"{prefix}: {first.name} heartbeats while the others wait")
    first.send_join()
    first.receive_join(f"{prefix}: {first.name} rejoins")
    for m in rest:
        m.receive_join(f"{prefix}: {m.name} joined")
    s.describe_classic(f"{prefix}: described before sync")
    for m in rest:
        m.send_sync()
    names = sorted(m.name for m in members)
    first.sync(f"{prefix}: {first.name} syncs the plan",
               {n: [p for p in range(partitions) if p % len(names) == i] for i, n in enumerate(names)})  # fmt: skip
    for m in rest:
        m.receive_sync(f"{prefix}: {m.name} synced")
    s.describe_classic(f"{prefix}: described once stable")


# -- the consumer protocol (KIP-848) ---------------------------------------------------------------------------


class ConsumerMember:
    """One ``consumer``-protocol member: its own member id (ConsumerGroupHeartbeat v1 has the client choose
    it, so the script is the same bytes for both brokers), its epoch, the assignment it was last given and
    what it reports owning (by default all it was given: it revokes at once; ``hold`` keeps what it has)."""

    def __init__(self, script: Script, name: str, member_id: str, *, instance_id: str | None = None,
                 rebalance_timeout_ms: int = 30_000, assignor: str | None = "range") -> None:  # fmt: skip
        self.s = script
        self.name = name
        self.member_id = member_id
        self.instance_id = instance_id
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.assignor = assignor
        self.wire = script.wire(f"diff-{name}")
        self.regex: str | None = None  # subscribed by this regular expression instead of the topic's name
        self.epoch = 0
        self.assigned: list[tuple[str, list[int]]] = []  # (topic id, partitions) as last given
        self.hold = False
        self.owned: list[tuple[str, list[int]]] = []
        script.learn(member_id, name)

    def heartbeat_raw(self, epoch: int | None = None) -> Any:
        R: Any = by_name("ConsumerGroupHeartbeat").Request
        owned = [R.TopicPartitions(topic_id=uuid.UUID(t), partitions=ps) for t, ps in self.owned]
        r = self.wire.call("ConsumerGroupHeartbeat", group_id=self.s.group, member_id=self.member_id,
                           member_epoch=self.epoch if epoch is None else epoch, instance_id=self.instance_id,
                           rack_id=None, rebalance_timeout_ms=self.rebalance_timeout_ms,
                           subscribed_topic_names=None if self.regex else [self.s.topic],
                           subscribed_topic_regex=self.regex,
                           server_assignor=self.assignor, topic_partitions=owned)  # fmt: skip
        if r.error_code == ErrorCode.NONE:
            self.epoch = r.member_epoch
            if r.assignment is not None:
                self.assigned = sorted((str(tp.topic_id), sorted(tp.partitions))
                                       for tp in r.assignment.topic_partitions)  # fmt: skip
                if not self.hold:
                    self.owned = list(self.assigned)
        return r

    def refused(self, step: str, **fields: Any) -> dict[str, Any]:
        """A ConsumerGroupHeartbeat of this member's join with ``fields`` changed (to make it invalid), and
        the error code and message it got (the run's group name and member ids normalised)."""
        request: dict[str, Any] = dict(
            group_id=self.s.group, member_id=self.member_id, member_epoch=0, instance_id=self.instance_id,
            rack_id=None, rebalance_timeout_ms=self.rebalance_timeout_ms, subscribed_topic_names=[self.s.topic],
            subscribed_topic_regex=None, server_assignor=self.assignor, topic_partitions=[],
        )  # fmt: skip
        request.update(fields)
        r = self.wire.call("ConsumerGroupHeartbeat", **request)
        message = r.error_message
        if message is not None:
            for value, name in [(self.s.group, "<group>"), *self.s.names.items()]:
                message = message.replace(value, name)
            # Epochs quoted in a message, as the transcript counts them (``Script.epoch_base``).
            message = re.sub(r"\((\d+)\)", lambda m: f"({self.s.epoch(int(m[1]))})", message)
            # Kafka matches regular expressions with RE2/J, we with Python's re: what a pattern's error says
            # after the common prefix is each engine's own wording.
            message = re.sub(r"(is not a valid regular expression):.*", r"\1: <the engine's reason>", message)
        return self.s.record(step, {"error": err(r.error_code), "message": message})

    def view(self, r: Any) -> dict[str, Any]:
        assignment = None
        if r.assignment is not None:
            assignment = sorted((self.s.name(str(tp.topic_id)), sorted(tp.partitions))
                                for tp in r.assignment.topic_partitions)  # fmt: skip
        return {"error": err(r.error_code), "member": self.s.name(r.member_id or ""), "epoch": self.s.epoch(r.member_epoch),
                "heartbeat_interval_ms": r.heartbeat_interval_ms, "assignment": assignment}  # fmt: skip

    def heartbeat(self, step: str, epoch: int | None = None) -> dict[str, Any]:
        return self.s.record(step, self.view(self.heartbeat_raw(epoch)))

    def rejoin(self, step: str) -> dict[str, Any]:
        """What a fenced member does: give up every partition and join again at epoch 0."""
        self.epoch, self.assigned, self.owned, self.hold = 0, [], [], False
        return self.heartbeat(step)

    def leave(self, step: str) -> dict[str, Any]:
        """Epoch -1 (leave) for a dynamic member, -2 (leave, keeping the place for a while) for a static one."""
        return self.heartbeat(step, self._leave_epoch())

    def leave_raw(self) -> Any:
        return self.heartbeat_raw(self._leave_epoch())

    def _leave_epoch(self) -> int:
        return -2 if self.instance_id is not None else -1

    def commit(self, step: str, offsets: Mapping[int, int], *, epoch: int | None = None) -> dict[int, str]:
        R: Any = by_name("OffsetCommit").Request
        T = R.OffsetCommitRequestTopic
        parts = [T.OffsetCommitRequestPartition(partition_index=p, committed_offset=o, committed_metadata="")
                 for p, o in sorted(offsets.items())]  # fmt: skip
        r = self.wire.call("OffsetCommit", group_id=self.s.group,
                           generation_id_or_member_epoch=self.epoch if epoch is None else epoch,
                           member_id=self.member_id, group_instance_id=self.instance_id,
                           topics=[T(name=self.s.topic, partitions=parts)])  # fmt: skip
        return self.s.record(
            step, {p.partition_index: err(p.error_code) for t in r.topics for p in t.partitions}
        )


def fetch_offsets(member: ClassicMember | ConsumerMember, step: str, partitions: Sequence[int], *,
                  epoch: int | None = None, member_id: str | None = None, anonymous: bool = False) -> dict[str, Any]:  # fmt: skip
    """OffsetFetch v9 of the scenario's group as ``member`` (its id and epoch, a ``consumer`` group checks
    them), or ``anonymous`` (no member id, epoch -1: an admin tool): the group's error and each partition's
    committed offset or error."""
    s = member.s
    F: Any = by_name("OffsetFetch").Request
    G = F.OffsetFetchRequestGroup
    current = member.epoch if isinstance(member, ConsumerMember) else member.generation
    r = member.wire.call("OffsetFetch", group_id="", topics=[], require_stable=True, groups=[G(
        group_id=s.group, member_id=None if anonymous else member.member_id if member_id is None else member_id,
        member_epoch=-1 if anonymous else current if epoch is None else epoch,
        topics=[G.OffsetFetchRequestTopics(name=s.topic, partition_indexes=list(partitions))])])  # fmt: skip
    g = r.groups[0]
    offsets = {
        p.partition_index: (p.committed_offset, err(p.error_code)) for t in g.topics for p in t.partitions
    }
    return s.record(step, {"error": err(g.error_code), "offsets": offsets})


def new_member_id(name: str = "") -> str:
    """A member id as the Java client makes one (a random UUID), after ``name``: the same ids are used
    against both brokers, and members sort by name (the server assignors order members by id)."""
    return f"{name}{uuid.uuid4()}"


# -- comparing ------------------------------------------------------------------------------------------------


def compare(ours: Sequence[Step], theirs: Sequence[Step], deliberate: Iterable[str] = ()) -> None:
    """Equal step by step, except the steps named in ``deliberate`` (documented differences, which the
    scenario pins on each side itself); the message lists every step that differs."""
    skip = set(deliberate)
    assert [n for n, _ in ours] == [n for n, _ in theirs], "the two runs took different steps"
    diffs = [f"{n}:\n  ours:   {a}\n  Apache: {b}"
             for (n, a), (_, b) in zip(ours, theirs, strict=True) if a != b and n not in skip]  # fmt: skip
    assert not diffs, f"{len(diffs)} of {len(ours)} steps differ from Apache Kafka:\n" + "\n".join(diffs)
