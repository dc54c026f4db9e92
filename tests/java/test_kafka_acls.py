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
