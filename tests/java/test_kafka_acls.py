"""``kafka-acls`` (Kafka 4.4's AclCommand) against our broker and against Apache Kafka 4.4, both with Kafka's
StandardAuthorizer settings: the same script of adds, lists (by resource, by pattern match, by principal),
removals, the ``--producer``/``--consumer`` conveniences and a refused binding must print the same ACLs and
exit the same way.

Both brokers run with ``super.users=User:ANONYMOUS`` so that the tool, connecting over PLAINTEXT, may manage
ACLs (Kafka's combined KRaft node needs its own listeners' principal to be a super user anyway). Kafka lists a
resource's ACLs in no fixed order, so each printed block is compared as a set of lines.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from java_harness import Harness, Step, compare

from support.apache_kafka import ApacheKafkaCluster
from support.brokers import BrokerKind, BrokerProcess

pytestmark = [pytest.mark.compat, pytest.mark.broker_ours, pytest.mark.broker_apache]

ACL_SETTINGS = {
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": "User:ANONYMOUS",
}


@pytest.fixture(scope="module")
def ours_with_acls(java_ready: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with BrokerProcess(BrokerKind.GROUPSTREAM, tmp_path_factory.mktemp("acl-ours"), settings=ACL_SETTINGS) as b:
        yield b


@pytest.fixture(scope="module")
def apache_with_acls(java_ready: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApacheKafkaCluster]:
    with ApacheKafkaCluster(tmp_path_factory.mktemp("acl-apache"), 1, settings=ACL_SETTINGS) as cluster:
        yield cluster


def printed_acls(out: str) -> list[tuple[str, tuple[str, ...]]]:
    """The tool's output as (heading, sorted ACL lines) blocks, sorted: the tool prints resources in the order
    of a hash map, which the run's random tag in the names reorders. Stack frames are left out (the JVM's
    reflection frames differ from run to run)."""
    blocks: list[tuple[str, list[str]]] = []
    for line in out.splitlines():
        text = line.strip()
        if not text or text.startswith("at "):
            continue
        if text.startswith("(principal=") and blocks:
            blocks[-1][1].append(text)
        else:
            blocks.append((text, []))
    return sorted((heading, tuple(sorted(lines))) for heading, lines in blocks)


def acls_scenario(h: Harness, bootstrap: str) -> list[Step]:
    tag = f"acl{uuid.uuid4().hex[:6]}"
    topic, group = f"{tag}-orders", f"{tag}-pay-"
    steps: list[Step] = []
    for name, args in [
        ("add read and write", ["--add", "--allow-principal", "User:alice", "--operation", "Read", "--operation",
                                "Write", "--topic", topic]),
        ("add prefixed group", ["--add", "--allow-principal", "User:bob", "--allow-host", "10.0.0.1", "--operation",
                                "Describe", "--group", group, "--resource-pattern-type", "prefixed"]),
        ("add deny on every topic", ["--add", "--deny-principal", "User:mallory", "--operation", "All", "--topic",
                                     "*"]),
        ("add cluster", ["--add", "--allow-principal", "User:alice", "--operation", "Alter", "--cluster"]),
        ("list the topic", ["--list", "--topic", topic]),
        ("list what applies to the topic", ["--list", "--topic", topic, "--resource-pattern-type", "match"]),
        ("list what applies to a group", ["--list", "--group", f"{group}eu", "--resource-pattern-type", "match"]),
        ("list alice's", ["--list", "--principal", "User:alice"]),
        ("remove write", ["--remove", "--allow-principal", "User:alice", "--operation", "Write", "--topic", topic,
                          "--force"]),
        ("list the topic after", ["--list", "--topic", topic]),
        ("producer", ["--add", "--producer", "--allow-principal", "User:p", "--topic", f"{tag}-out"]),
        ("consumer", ["--add", "--consumer", "--allow-principal", "User:c", "--topic", f"{tag}-in", "--group",
                      f"{tag}-cg"]),
        ("list the producer's", ["--list", "--principal", "User:p"]),
        ("list the consumer's", ["--list", "--principal", "User:c"]),
        ("refused: a principal without a type", ["--add", "--allow-principal", "alice", "--operation", "Read",
                                                 "--topic", topic]),
        ("remove the cluster's", ["--remove", "--cluster", "--force"]),
        ("list alice's at the end", ["--list", "--principal", "User:alice"]),
    ]:  # fmt: skip
        done = h.tool("kafka-acls", ["--bootstrap-server", bootstrap, *args])
        out = (done.out + done.err).replace(tag, "<tag>")
        steps.append((name, {"code": done.code, "printed": printed_acls(out)}))
    return steps


def test_kafka_acls_prints_what_it_prints_against_apache_kafka(
    ours_with_acls: BrokerProcess, apache_with_acls: ApacheKafkaCluster, harness: Harness
) -> None:
    theirs = acls_scenario(harness, apache_with_acls.bootstrap)
    ours = acls_scenario(harness, ours_with_acls.bootstrap)
    compare(ours, theirs)


def described(bootstrap: str, tag: str) -> set[tuple[str, ...]]:
    """Every binding that names the run's tag (in its principal or resource), tag replaced, read with
    confluent-kafka's describe_acls."""
    from confluent_kafka.admin import AclBindingFilter, AclOperation, AclPermissionType, AdminClient
    from confluent_kafka.admin import ResourcePatternType as RPT
    from confluent_kafka.admin import ResourceType as RT

    admin = AdminClient({"bootstrap.servers": bootstrap})
    f = AclBindingFilter(RT.ANY, None, RPT.ANY, None, None, AclOperation.ANY, AclPermissionType.ANY)
    return {
        tuple(x.replace(tag, "<tag>") for x in (b.restype.name, b.name, b.resource_pattern_type.name, b.principal,
                                                  b.host, b.operation.name, b.permission_type.name))
        for b in admin.describe_acls(f).result(30)
        if tag in b.principal or tag in b.name
    }  # fmt: skip


def acl_commands(tag: str) -> list[tuple[str, list[str]]]:
    alice, bob, mallory, p, c = (f"User:{n}-{tag}" for n in ("alice", "bob", "mallory", "p", "c"))
    t, t2, t3, group = f"{tag}-orders", f"{tag}-audit", f"{tag}-out", f"{tag}-pay-"
    return [
        ("add", ["--allow-principal", alice, "--operation", "Read", "--operation", "Write", "--topic", t]),
        ("add", ["--allow-principal", bob, "--allow-host", "10.0.0.1", "--operation", "Describe", "--group", group,
                 "--resource-pattern-type", "prefixed"]),
        ("add", ["--deny-principal", mallory, "--topic", t2]),
        ("add", ["--allow-principal", alice, "--topic", t2, "--operation", "DescribeConfigs"]),
        ("add", ["--producer", "--idempotent", "--allow-principal", p, "--topic", t3, "--transactional-id",
                 f"{tag}-tx"]),
        ("add", ["--consumer", "--allow-principal", c, "--topic", t3, "--group", f"{tag}-cg"]),
        ("remove", ["--allow-principal", alice, "--operation", "Write", "--topic", t, "--force"]),
        ("remove", ["--topic", t2, "--force"]),
        ("remove", ["--consumer", "--allow-principal", c, "--topic", t3, "--group", f"{tag}-cg", "--force"]),
    ]  # fmt: skip


def test_groupstream_acls_leaves_the_acls_kafka_acls_leaves(
    ours_with_acls: BrokerProcess, apache_with_acls: ApacheKafkaCluster, harness: Harness
) -> None:
    """The same commands, through kafka-acls.sh on Apache Kafka and through ``groupstream acls`` on our broker,
    leave the same bindings (kafka-acls.sh's defaults, conveniences and removal rules, as our CLI reads them)."""
    import contextlib
    import io

    from groupstream.cli.main import main

    theirs_tag, ours_tag = f"gk{uuid.uuid4().hex[:6]}", f"gk{uuid.uuid4().hex[:6]}"
    for action, args in acl_commands(theirs_tag):
        done = harness.tool("kafka-acls", ["--bootstrap-server", apache_with_acls.bootstrap, f"--{action}", *args])
        assert done.code == 0, done.out + done.err
    for action, args in acl_commands(ours_tag):
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()) as err:
            code = main(["acls", action, *args, "--bootstrap-server", ours_with_acls.bootstrap])
        assert code == 0, err.getvalue()
    theirs, ours = described(apache_with_acls.bootstrap, theirs_tag), described(ours_with_acls.bootstrap, ours_tag)
    assert len(theirs) == 8  # alice READ, bob DESCRIBE, the producer's three + two + IDEMPOTENT_WRITE (not vacuous)
    assert ours == theirs
