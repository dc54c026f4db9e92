"""ACLs on our broker, driven by confluent-kafka (a real peer) over SASL_PLAINTEXT with SCRAM-SHA-256:
``authorizer.class.name`` set to Kafka's StandardAuthorizer, ``super.users=User:admin``.

The administrator manages ACLs with the AdminClient's create/describe/delete_acls, and they survive a restart.
The matrix: for each API family of Kafka's authorization table, ``alice`` without the ACL it needs gets the
AUTHORIZATION_FAILED code Kafka answers, and with it succeeds; Metadata and ListGroups hide what she may not
describe. Users are made with ``groupstream users add`` before the broker starts.
"""

from __future__ import annotations

import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ConfigResource,
    NewPartitions,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from kafka_wire import WireClient
from secure_broker import SecureBrokerProcess

from groupstream.protocol.messages import by_name
from support.brokers import free_port, groupstream_command
from support.waiting import wait_until

pytestmark = [pytest.mark.compat, pytest.mark.broker_ours]

PASSWORDS = {"admin": "admin-secret", "alice": "alice-secret"}
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
T, G, C = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.BROKER
LIT, PRE = ResourcePatternType.LITERAL, ResourcePatternType.PREFIXED
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY


@dataclass
class AclBroker:
    process: SecureBrokerProcess
    port: int
    admins: dict[str, AdminClient] = field(default_factory=dict)

    def conf(self, user: str) -> dict[str, Any]:
        return {"bootstrap.servers": f"127.0.0.1:{self.port}", "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": user, "sasl.password": PASSWORDS[user]}  # fmt: skip

    def admin(self, user: str) -> AdminClient:
        """One client per user, kept: librdkafka fails the futures of a client that is garbage-collected."""
        if user not in self.admins:
            self.admins[user] = AdminClient(self.conf(user))
        return self.admins[user]


@pytest.fixture(scope="module")
def acl_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AclBroker]:
    workdir = tmp_path_factory.mktemp("acl-broker")
    port = free_port()
    settings = {"sasl.enabled.mechanisms": "SCRAM-SHA-256", "authorizer.class.name": AUTHORIZER,
                "super.users": "User:admin", "group.initial.rebalance.delay.ms": "0",
                "auto.create.topics.enable": "false"}  # fmt: skip
    process = SecureBrokerProcess(workdir, [f"SASL_PLAINTEXT://127.0.0.1:{port}"], settings=settings)
    for user, password in PASSWORDS.items():
        added = subprocess.run([*groupstream_command(), "users", "add", "--data-dir", str(process.data_dir), "--user",
                                user, "--password", password], capture_output=True, text=True, timeout=60)  # fmt: skip
        assert added.returncode == 0, added.stderr
    with process:
        yield AclBroker(process, port)


def code_of(error: BaseException) -> int:
    assert isinstance(error, KafkaException), repr(error)
    return int(error.args[0].code())


def refused(action: Callable[[], object]) -> int:
    """The Kafka error code ``action`` fails with (it must fail)."""
    try:
        action()
    except KafkaException as e:
        return code_of(e)
    raise AssertionError("the action succeeded where it must be refused")


def grant(b: AclBroker, *bindings: AclBinding) -> None:
    for future in b.admin("admin").create_acls(list(bindings)).values():
        future.result(30)


def allow(rtype: ResourceType, name: str, op: AclOperation, pattern: ResourcePatternType = LIT) -> AclBinding:
    return AclBinding(rtype, name, pattern, "User:alice", "*", op, ALLOW)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def test_acls_are_managed_with_confluent_admin_and_survive_a_restart(acl_broker: AclBroker) -> None:
    b = acl_broker
    admin = b.admin("admin")
    topic, prefix = unique("managed"), unique("pay") + "-"
    wanted = [allow(T, topic, AclOperation.READ), allow(G, prefix, AclOperation.ALL, PRE),
              AclBinding(T, topic, LIT, "User:*", "10.9.9.9", AclOperation.WRITE, DENY)]  # fmt: skip
    grant(b, *wanted)

    def described(f: AclBindingFilter) -> set[AclBinding]:
        return set(b.admin("admin").describe_acls(f).result(30))

    everything = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                                  AclPermissionType.ANY)  # fmt: skip
    assert set(wanted) <= described(everything)
    on_topic = AclBindingFilter(T, topic, ResourcePatternType.MATCH, None, None, AclOperation.ANY, AclPermissionType.ANY)
    assert described(on_topic) == {wanted[0], wanted[2]}
    in_group = AclBindingFilter(G, prefix + "eu", ResourcePatternType.MATCH, None, None, AclOperation.ANY,
                                AclPermissionType.ANY)  # fmt: skip
    assert described(in_group) == {wanted[1]}

    # alice may not manage ACLs (asked on the wire: librdkafka 2.16's describe_acls drops the top-level error of
    # DescribeAcls and returns an empty list); a binding Kafka refuses is refused with its reason
    with WireClient(b.port) as wire:
        assert wire.scram("alice", PASSWORDS["alice"]).error_code == 0
        answer = wire.request("DescribeAcls", 3, resource_type_filter=1, resource_name_filter=None,
                              pattern_type_filter=1, principal_filter=None, host_filter=None, operation=1,
                              permission_type=1)  # fmt: skip
        assert (answer.error_code, answer.resources) == (KafkaError.CLUSTER_AUTHORIZATION_FAILED, [])
    assert b.admin("alice").describe_acls(everything).result(30) == []
    assert refused(lambda: grant(b, AclBinding(C, "not-the-cluster", LIT, "User:alice", "*", AclOperation.ALTER, ALLOW))) \
        == KafkaError.INVALID_REQUEST  # fmt: skip

    b.process.stop()
    b.process.start()
    assert set(wanted) <= described(everything), "ACLs lost over a restart"
    deny_filter = AclBindingFilter(T, topic, LIT, None, None, AclOperation.ANY, DENY)
    deleted = admin.delete_acls([deny_filter])[deny_filter].result(30)
    assert deleted == [wanted[2]]
    assert described(on_topic) == {wanted[0]}


def test_produce_needs_write_and_idempotence_needs_write_somewhere(acl_broker: AclBroker) -> None:
    b = acl_broker
    topic = unique("produce")
    b.admin("admin").create_topics([NewTopic(topic, 1, 1)])[topic].result(30)

    def produce(idempotent: bool) -> KafkaError | None:
        outcome: list[KafkaError | None] = []
        p = Producer({**b.conf("alice"), "enable.idempotence": idempotent, "message.timeout.ms": 10_000,
                      "on_delivery": lambda err, _msg: outcome.append(err)})  # fmt: skip
        p.produce(topic, b"v")
        p.flush(30)
        assert outcome, "no delivery report within 30 s"
        return outcome[0]

    for idempotent in (False, True):
        err = produce(idempotent)
        assert err is not None, "a write without ACL was accepted"
        assert err.code() in (KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.CLUSTER_AUTHORIZATION_FAILED), err
    grant(b, allow(T, topic, AclOperation.WRITE))
    assert produce(idempotent=False) is None
    assert produce(idempotent=True) is None  # WRITE on a topic grants IDEMPOTENT_WRITE (KIP-679)


def test_consuming_in_a_group_needs_read_on_the_group_and_the_topic(acl_broker: AclBroker) -> None:
    b = acl_broker
    topic, group = unique("consume"), unique("readers")
    admin = b.admin("admin")
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)
    p = Producer(b.conf("admin"))
    for i in range(10):
        p.produce(topic, str(i).encode(), partition=i % 2)
    assert p.flush(30) == 0

    def first_error_or_records() -> tuple[int | None, int]:
        c = Consumer({**b.conf("alice"), "group.id": group, "auto.offset.reset": "earliest"})
        c.subscribe([topic])
        got = 0
        try:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and got < 10:
                m = c.poll(0.5)
                if m is None:
                    continue
                if m.error() is not None:
                    if m.error().code() in (KafkaError.GROUP_AUTHORIZATION_FAILED,
                                            KafkaError.TOPIC_AUTHORIZATION_FAILED):  # fmt: skip
                        return m.error().code(), got
                    continue
                got += 1
            if got:
                c.commit(asynchronous=False)
            return None, got
        finally:
            c.close()

    assert first_error_or_records()[0] == KafkaError.GROUP_AUTHORIZATION_FAILED
    grant(b, allow(G, group, AclOperation.READ))
    assert first_error_or_records()[0] == KafkaError.TOPIC_AUTHORIZATION_FAILED
    grant(b, allow(T, topic, AclOperation.READ))
    assert first_error_or_records() == (None, 10)
    committed = admin.list_consumer_group_offsets([_group_request(group)])[group].result(30)
    assert sorted(tp.offset for tp in committed.topic_partitions) == [5, 5]


def _group_request(group: str) -> Any:
    from confluent_kafka import ConsumerGroupTopicPartitions

    return ConsumerGroupTopicPartitions(group)


def test_admin_operations_each_need_their_acl(acl_broker: AclBroker) -> None:
    b = acl_broker
    admin, alice = b.admin("admin"), b.admin("alice")
    mine, other = unique("mine"), unique("other")
    for t in (mine, other):
        admin.create_topics([NewTopic(t, 1, 1)])[t].result(30)
    producer = Producer(b.conf("admin"))
    producer.produce(mine, b"x")
    assert producer.flush(30) == 0
    TAF, CAF = KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.CLUSTER_AUTHORIZATION_FAILED

    # Metadata hides what alice may not describe
    assert mine not in alice.list_topics(timeout=30).topics
    grant(b, allow(T, mine, AclOperation.DESCRIBE))
    seen = alice.list_topics(timeout=30).topics
    assert mine in seen and other not in seen

    # CreateTopics: CREATE on the topic (or the cluster)
    new = unique("made")
    assert refused(lambda: alice.create_topics([NewTopic(new, 1, 1)])[new].result(30)) == TAF
    grant(b, allow(T, "made-", AclOperation.CREATE, PRE))
    alice.create_topics([NewTopic(new, 1, 1)])[new].result(30)

    # DescribeConfigs and IncrementalAlterConfigs: DESCRIBE_CONFIGS and ALTER_CONFIGS on the topic
    res = ConfigResource(ConfigResource.Type.TOPIC, mine)
    assert refused(lambda: alice.describe_configs([res])[res].result(30)) == TAF
    grant(b, allow(T, mine, AclOperation.DESCRIBE_CONFIGS))
    assert "retention.ms" in alice.describe_configs([res])[res].result(30)
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry

    change = ConfigResource(ConfigResource.Type.TOPIC, mine, incremental_configs=[
        ConfigEntry("retention.ms", "3600000", incremental_operation=AlterConfigOpType.SET)])  # fmt: skip
    assert refused(lambda: alice.incremental_alter_configs([change])[change].result(30)) == TAF
    grant(b, allow(T, mine, AclOperation.ALTER_CONFIGS))
    alice.incremental_alter_configs([change])[change].result(30)

    # CreatePartitions: ALTER; DeleteRecords and DeleteTopics: DELETE
    assert refused(lambda: alice.create_partitions([NewPartitions(mine, 2)])[mine].result(30)) == TAF
    grant(b, allow(T, mine, AclOperation.ALTER))
    alice.create_partitions([NewPartitions(mine, 2)])[mine].result(30)
    tp = TopicPartition(mine, 0, 1)
    assert refused(lambda: alice.delete_records([tp])[tp].result(30)) == TAF
    assert refused(lambda: alice.delete_topics([mine])[mine].result(30)) == TAF
    grant(b, allow(T, mine, AclOperation.DELETE))
    assert alice.delete_records([tp])[tp].result(30).low_watermark == 1
    alice.delete_topics([mine])[mine].result(30)

    # the cluster's own: describing SCRAM users needs DESCRIBE on the cluster (asked on the wire: librdkafka
    # 2.16 aborts the process on any error answer to DescribeUserScramCredentials, "munmap_chunk(): invalid
    # pointer", so confluent-kafka is only shown the success)
    with WireClient(b.port) as wire:
        assert wire.scram("alice", PASSWORDS["alice"]).error_code == 0
        user = by_name("DescribeUserScramCredentials").Request.UserName
        answer = wire.request("DescribeUserScramCredentials", 0, users=[user(name="alice")])
        assert answer.error_code == CAF and [(r.user, r.error_code) for r in answer.results] == [("alice", CAF)]
    on_cluster = AclBinding(C, "kafka-cluster", LIT, "User:alice", "*", AclOperation.DESCRIBE, ALLOW)
    grant(b, on_cluster)
    assert "alice" in alice.describe_user_scram_credentials().result(30)
    cluster_filter = AclBindingFilter(C, "kafka-cluster", LIT, "User:alice", "*", AclOperation.DESCRIBE, ALLOW)
    gone = b.admin("admin").delete_acls([cluster_filter])  # the next test must not inherit it
    assert gone[cluster_filter].result(30) == [on_cluster]


def test_groups_are_listed_and_described_only_where_alice_may(acl_broker: AclBroker) -> None:
    b = acl_broker
    topic = unique("listed")
    b.admin("admin").create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    mine, other = unique("g-mine"), unique("g-other")
    for g in (mine, other):  # two groups with committed offsets, made by the administrator
        c = Consumer({**b.conf("admin"), "group.id": g, "enable.auto.commit": False})
        c.commit(offsets=[TopicPartition(topic, 0, 0)], asynchronous=False)
        c.close()
    alice = b.admin("alice")

    def listed() -> set[str]:
        return {g.group_id for g in alice.list_consumer_groups().result(30).valid}

    assert not {mine, other} & listed()
    grant(b, allow(G, mine, AclOperation.DESCRIBE))
    wait_until(lambda: mine in listed(), 10, f"alice to see {mine}")
    assert other not in listed()
    described = alice.describe_consumer_groups([mine, other])
    assert described[mine].result(30).group_id == mine
    assert refused(lambda: described[other].result(30)) == KafkaError.GROUP_AUTHORIZATION_FAILED
    assert refused(lambda: alice.delete_consumer_groups([mine])[mine].result(30)) == KafkaError.GROUP_AUTHORIZATION_FAILED
    grant(b, allow(G, mine, AclOperation.DELETE))
    alice.delete_consumer_groups([mine])[mine].result(30)


def test_acl_apis_without_an_authorizer_answer_security_disabled(tmp_path: Path) -> None:
    from support.brokers import BrokerKind, BrokerProcess

    with BrokerProcess(BrokerKind.GROUPSTREAM, tmp_path) as plain, WireClient(plain.port) as wire:
        answer = wire.request("DescribeAcls", 3, resource_type_filter=1, resource_name_filter=None,
                              pattern_type_filter=1, principal_filter=None, host_filter=None, operation=1,
                              permission_type=1)  # fmt: skip
        assert answer.error_code == KafkaError.SECURITY_DISABLED, answer
        admin = AdminClient({"bootstrap.servers": plain.bootstrap})
        binding = AclBinding(T, "t", LIT, "User:alice", "*", AclOperation.READ, ALLOW)
        assert refused(lambda: admin.create_acls([binding])[binding].result(30)) == KafkaError.SECURITY_DISABLED


def test_offsets_lookups_and_consumer_protocol_groups_need_their_acls(acl_broker: AclBroker) -> None:
    b = acl_broker
    topic, group = unique("lookups"), unique("kip848")
    b.admin("admin").create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    p = Producer(b.conf("admin"))
    p.produce(topic, b"x")
    assert p.flush(30) == 0
    GAF, TAF = KafkaError.GROUP_AUTHORIZATION_FAILED, KafkaError.TOPIC_AUTHORIZATION_FAILED

    # ListOffsets: DESCRIBE on the topic (asked on the wire: librdkafka asks Metadata first, which hides the
    # topic, and reports an unknown partition)
    def list_offsets_error() -> int:
        api = by_name("ListOffsets").Request
        T_ = api.ListOffsetsTopic
        with WireClient(b.port) as wire:
            assert wire.scram("alice", PASSWORDS["alice"]).error_code == 0
            answer = wire.request("ListOffsets", 9, replica_id=-1, isolation_level=0, topics=[
                T_(name=topic, partitions=[T_.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1,
                                                                   timestamp=-1)])])  # fmt: skip
        return int(answer.topics[0].partitions[0].error_code)

    assert list_offsets_error() == TAF
    grant(b, allow(T, topic, AclOperation.DESCRIBE))
    assert list_offsets_error() == 0
    c = Consumer({**b.conf("alice"), "group.id": group})
    try:
        assert c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10) == (0, 1)
    finally:
        c.close()

    # OffsetFetch: DESCRIBE on the group
    alice = b.admin("alice")
    assert refused(lambda: alice.list_consumer_group_offsets([_group_request(group)])[group].result(30)) == GAF

    # ConsumerGroupHeartbeat (KIP-848 groups): READ on the group
    def consumer_protocol_error() -> int | None:
        member = Consumer({**b.conf("alice"), "group.id": group, "group.protocol": "consumer",
                           "auto.offset.reset": "earliest"})  # fmt: skip
        member.subscribe([topic])
        try:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                m = member.poll(0.5)
                if m is not None and m.error() is not None and m.error().code() in (GAF, TAF):
                    return int(m.error().code())
                if m is not None and m.error() is None:
                    return None
            raise AssertionError("neither a record nor an authorization error within 30 s")
        finally:
            member.close()

    assert consumer_protocol_error() == GAF
    grant(b, allow(G, group, AclOperation.READ), allow(T, topic, AclOperation.READ))
    assert consumer_protocol_error() is None
    assert alice.list_consumer_group_offsets([_group_request(group)])[group].result(30).group_id == group
