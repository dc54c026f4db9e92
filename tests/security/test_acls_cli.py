"""``groupstream acls add|list|remove`` against our broker with Kafka's StandardAuthorizer settings
(``super.users=User:ANONYMOUS`` so the CLI, over PLAINTEXT, may manage ACLs), run in this process (the console
script costs seconds per start).

What kafka-acls.sh means by its options is checked on what reaches the broker, read back by a real peer
(confluent-kafka's ``describe_acls``): the hosts default to ``*``, ``--operation`` to All, ``--producer`` and
``--consumer`` grant Kafka's sets, ``match`` lists what applies to a name, ``remove`` without a principal
removes all of a resource's ACLs; mistakes are one line and exit 2. tests/java/test_kafka_acls.py runs
kafka-acls.sh itself against both brokers."""

from __future__ import annotations

import contextlib
import io
import json
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AclBindingFilter, AclOperation, AclPermissionType, AdminClient
from confluent_kafka.admin import ResourcePatternType as RPT
from confluent_kafka.admin import ResourceType as RT

from groupstream.broker.node import Broker
from groupstream.cli.main import main
from support.inprocess import running_broker

AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


@pytest.fixture(scope="module")
def acl_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    with running_broker(tmp_path_factory.mktemp("acls-cli"), **{"authorizer.class.name": AUTHORIZER,
                        "super.users": "User:ANONYMOUS"}) as broker:  # fmt: skip
        yield broker


def cli(broker: Broker, *args: str, stdin: str = "") -> tuple[int, list[dict[str, str]], str]:
    """Exit code, the rows of the table printed (``--format json``) and stderr."""
    out, err = io.StringIO(), io.StringIO()
    old_stdin, sys.stdin = sys.stdin, io.StringIO(stdin)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(["acls", *args, "--bootstrap-server", f"127.0.0.1:{broker.config.port}", "--format", "json"])
    finally:
        sys.stdin = old_stdin
    rows = [row for line in out.getvalue().splitlines() if line.strip() for row in json.loads(line)["rows"]]
    return code, rows, err.getvalue()


def as_tuples(rows: list[dict[str, str]]) -> set[tuple[str, ...]]:
    return {(r["RESOURCE-TYPE"], r["RESOURCE"], r["PATTERN"], r["PRINCIPAL"], r["HOST"], r["OPERATION"],
             r["PERMISSION"]) for r in rows}  # fmt: skip


def seen_by_confluent(broker: Broker, principal: str) -> set[tuple[str, ...]]:
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{broker.config.port}"})
    f = AclBindingFilter(RT.ANY, None, RPT.ANY, principal, None, AclOperation.ANY, AclPermissionType.ANY)
    return {
        (b.restype.name.replace("BROKER", "CLUSTER"), b.name, b.resource_pattern_type.name, b.principal, b.host,
         b.operation.name, b.permission_type.name)
        for b in admin.describe_acls(f).result(30)
    }  # fmt: skip


def test_add_list_and_remove_as_kafka_acls_means_them(acl_broker: Broker) -> None:
    tag = uuid.uuid4().hex[:6]
    topic, prefix, alice, bob = f"{tag}-orders", f"{tag}-pay-", f"User:alice{tag}", f"User:bob{tag}"

    code, rows, err = cli(acl_broker, "add", "--allow-principal", alice, "--operation", "Read", "--operation",
                          "write", "--topic", topic)  # fmt: skip
    assert code == 0, err
    want = {("TOPIC", topic, "LITERAL", alice, "*", "READ", "ALLOW"), ("TOPIC", topic, "LITERAL", alice, "*", "WRITE", "ALLOW")}  # fmt: skip
    assert as_tuples(rows) == want
    code, rows, err = cli(acl_broker, "add", "--deny-principal", alice, "--deny-host", "10.0.0.9", "--group", prefix,
                          "--resource-pattern-type", "prefixed")  # fmt: skip
    assert code == 0, err
    assert as_tuples(rows) == {("GROUP", prefix, "PREFIXED", alice, "10.0.0.9", "ALL", "DENY")}
    code, rows, err = cli(acl_broker, "add", "--allow-principal", alice, "--operation", "Alter", "--cluster")
    assert code == 0, err
    assert seen_by_confluent(acl_broker, alice) == want | {
        ("GROUP", prefix, "PREFIXED", alice, "10.0.0.9", "ALL", "DENY"),
        ("CLUSTER", "kafka-cluster", "LITERAL", alice, "*", "ALTER", "ALLOW"),
    }

    # adding again changes nothing and says so
    code, rows, err = cli(acl_broker, "add", "--allow-principal", alice, "--operation", "READ", "--topic", topic)
    assert (code, rows) == (0, []) and "already there: ALLOW" in err, err

    code, rows, _ = cli(acl_broker, "list", "--topic", topic)
    assert as_tuples(rows) == want
    code, rows, _ = cli(acl_broker, "list", "--group", f"{prefix}eu")
    assert rows == []  # literal: no group of that exact name has ACLs
    code, rows, _ = cli(acl_broker, "list", "--group", f"{prefix}eu", "--resource-pattern-type", "match")
    assert as_tuples(rows) == {("GROUP", prefix, "PREFIXED", alice, "10.0.0.9", "ALL", "DENY")}
    code, rows, _ = cli(acl_broker, "list", "--principal", alice)
    assert len(rows) == 4 and {r["PRINCIPAL"] for r in rows} == {alice}

    code, rows, _ = cli(acl_broker, "remove", "--allow-principal", alice, "--operation", "Write", "--topic", topic,
                        "--force")  # fmt: skip
    assert (code, as_tuples(rows)) == (0, {("TOPIC", topic, "LITERAL", alice, "*", "WRITE", "ALLOW")})
    # no principal: every ACL of the resource goes
    cli(acl_broker, "add", "--allow-principal", bob, "--topic", topic)
    code, rows, _ = cli(acl_broker, "remove", "--topic", topic, "--force")
    assert as_tuples(rows) == {("TOPIC", topic, "LITERAL", alice, "*", "READ", "ALLOW"),
                               ("TOPIC", topic, "LITERAL", bob, "*", "ALL", "ALLOW")}  # fmt: skip
    code, rows, _ = cli(acl_broker, "remove", "--cluster", "--group", prefix, "--resource-pattern-type", "prefixed",
                        "--force")  # fmt: skip
    assert seen_by_confluent(acl_broker, alice) == set() == seen_by_confluent(acl_broker, bob)


def test_producer_and_consumer_conveniences_grant_kafkas_sets(acl_broker: Broker) -> None:
    tag = uuid.uuid4().hex[:6]
    p, c = f"User:p{tag}", f"User:c{tag}"
    code, _, err = cli(acl_broker, "add", "--producer", "--idempotent", "--allow-principal", p, "--topic",
                       f"{tag}-out", "--transactional-id", f"{tag}-tx")  # fmt: skip
    assert code == 0, err
    assert seen_by_confluent(acl_broker, p) == {
        *(("TOPIC", f"{tag}-out", "LITERAL", p, "*", op, "ALLOW") for op in ("WRITE", "DESCRIBE", "CREATE")),
        *(("TRANSACTIONAL_ID", f"{tag}-tx", "LITERAL", p, "*", op, "ALLOW") for op in ("WRITE", "DESCRIBE")),
        ("CLUSTER", "kafka-cluster", "LITERAL", p, "*", "IDEMPOTENT_WRITE", "ALLOW"),
    }
    code, _, err = cli(acl_broker, "add", "--consumer", "--allow-principal", c, "--topic", f"{tag}-in", "--group",
                       f"{tag}-cg")  # fmt: skip
    assert code == 0, err
    assert seen_by_confluent(acl_broker, c) == {
        ("TOPIC", f"{tag}-in", "LITERAL", c, "*", "READ", "ALLOW"),
        ("TOPIC", f"{tag}-in", "LITERAL", c, "*", "DESCRIBE", "ALLOW"),
        ("GROUP", f"{tag}-cg", "LITERAL", c, "*", "READ", "ALLOW"),
    }
    code, rows, _ = cli(acl_broker, "remove", "--consumer", "--allow-principal", c, "--topic", f"{tag}-in", "--group",
                        f"{tag}-cg", "--force")  # fmt: skip
    assert (code, len(rows)) == (0, 3) and seen_by_confluent(acl_broker, c) == set()


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["add", "--allow-principal", "alice", "--topic", "t"], "principal 'alice' must be TYPE:NAME"),
        (["add", "--allow-principal", "User:a", "--operation", "Fly", "--topic", "t"], "'Fly' is not an operation"),
        (["add", "--allow-principal", "User:a", "--operation", "Write", "--group", "g"],
         "GROUP ACLs take only the operations"),
        (["add", "--allow-principal", "User:a"], "name at least one resource"),
        (["add", "--topic", "t"], "--allow-principal or --deny-principal"),
        (["add", "--consumer", "--allow-principal", "User:a", "--topic", "t"], "--consumer needs --group"),
        (["remove", "--topic", "t"], "pass --force"),
    ],
)  # fmt: skip
def test_mistakes_are_one_line(acl_broker: Broker, args: list[str], says: str) -> None:
    code, rows, err = cli(acl_broker, *args)
    assert code == 2 and rows == []
    assert says in err and len(err.strip().splitlines()) == 1, err


def test_match_and_prefixed_are_refused_when_adding(acl_broker: Broker) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli(acl_broker, "add", "--allow-principal", "User:a", "--topic", "t", "--resource-pattern-type", "match")
    assert exit_.value.code == 2


def test_a_nonsuper_user_is_refused_with_the_cluster_authorization_error(tmp_path: Path) -> None:
    with running_broker(tmp_path, **{"authorizer.class.name": AUTHORIZER}) as broker:
        code, _, err = cli(broker, "add", "--allow-principal", "User:a", "--topic", "t")
        assert code == 2 and "CLUSTER_AUTHORIZATION_FAILED" in err.upper().replace(" ", "_"), err
        assert len(err.strip().splitlines()) == 1
