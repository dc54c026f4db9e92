"""Kafka's authorization rule and ACL filters (`groupstream.security.acl`), case by case, and the ACL file."""

from __future__ import annotations

from pathlib import Path

import pytest

from groupstream.security.acl import (
    AclBinding,
    AclFilter,
    AclRules,
    Operation,
    PatternType,
    Permission,
    ResourceType,
    authorize,
    authorize_any_of_type,
    binding_problem,
    parse_enum,
)
from groupstream.security.acl_store import AclFileError, AclStore

T, G, C = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = Permission.ALLOW, Permission.DENY
Op = Operation
RULES = AclRules()


def acl(rtype: ResourceType, name: str, op: Operation, perm: Permission = ALLOW, principal: str = "User:alice",
        host: str = "*", pattern: PatternType = LIT) -> AclBinding:  # fmt: skip
    return AclBinding(rtype, name, pattern, principal, host, op, perm)


def may(bindings: list[AclBinding], op: Operation, rtype: ResourceType, name: str, principal: str = "User:alice",
        host: str = "10.0.0.1", rules: AclRules = RULES) -> bool:  # fmt: skip
    return authorize(bindings, rules, principal, host, op, rtype, name)


def test_an_allow_grants_its_operation_only_to_its_principal_and_resource() -> None:
    b = [acl(T, "orders", Op.WRITE)]
    assert may(b, Op.WRITE, T, "orders")
    assert not may(b, Op.READ, T, "orders")
    assert not may(b, Op.WRITE, T, "orders2")
    assert not may(b, Op.WRITE, G, "orders")
    assert not may(b, Op.WRITE, T, "orders", principal="User:bob")


@pytest.mark.parametrize("granted", [Op.READ, Op.WRITE, Op.DELETE, Op.ALTER])
def test_read_write_delete_and_alter_imply_describe(granted: Operation) -> None:
    assert may([acl(T, "t", granted)], Op.DESCRIBE, T, "t")


def test_alter_configs_implies_describe_configs_and_all_grants_everything() -> None:
    assert may([acl(T, "t", Op.ALTER_CONFIGS)], Op.DESCRIBE_CONFIGS, T, "t")
    assert not may([acl(T, "t", Op.DESCRIBE_CONFIGS)], Op.ALTER_CONFIGS, T, "t")
    assert not may([acl(T, "t", Op.CREATE)], Op.DESCRIBE, T, "t")  # CREATE implies nothing
    for op in (Op.READ, Op.WRITE, Op.DESCRIBE, Op.ALTER_CONFIGS, Op.DELETE):
        assert may([acl(T, "t", Op.ALL)], op, T, "t")


def test_deny_wins_over_allow_and_implies_nothing() -> None:
    b = [acl(T, "t", Op.READ), acl(T, "t", Op.READ, DENY)]
    assert not may(b, Op.READ, T, "t")
    # a DENY of READ does not deny the DESCRIBE that the ALLOW of READ implies
    assert may(b, Op.DESCRIBE, T, "t")
    assert not may([acl(T, "t", Op.READ), acl(T, "*", Op.ALL, DENY, principal="User:*")], Op.READ, T, "t")


def test_wildcards_of_name_principal_and_host_and_prefixes() -> None:
    assert may([acl(T, "*", Op.READ)], Op.READ, T, "anything")
    assert may([acl(T, "t", Op.READ, principal="User:*")], Op.READ, T, "t", principal="User:bob")
    assert may([acl(T, "pay-", Op.READ, pattern=PRE)], Op.READ, T, "pay-eu")
    assert not may([acl(T, "pay-", Op.READ, pattern=PRE)], Op.READ, T, "pa")
    assert may([acl(T, "t", Op.READ, host="10.0.0.1")], Op.READ, T, "t", host="10.0.0.1")
    assert not may([acl(T, "t", Op.READ, host="10.0.0.1")], Op.READ, T, "t", host="10.0.0.2")
    assert not may([acl(T, "pay-", Op.READ, pattern=PRE), acl(T, "pay-eu", Op.READ, DENY)], Op.READ, T, "pay-eu")


def test_super_users_and_resources_without_acls() -> None:
    supers = AclRules(super_users=frozenset({"User:admin"}))
    assert may([acl(T, "t", Op.ALL, DENY, principal="User:*")], Op.DELETE, T, "t", principal="User:admin", rules=supers)
    open_rules = AclRules(allow_everyone_if_no_acl_found=True)
    assert not may([], Op.READ, T, "t")
    assert may([], Op.READ, T, "t", rules=open_rules)
    # once any binding names the resource (even for someone else), what is not allowed is denied
    assert not may([acl(T, "t", Op.READ, principal="User:bob")], Op.READ, T, "t", rules=open_rules)
    assert may([acl(T, "other", Op.READ, principal="User:bob")], Op.READ, T, "t", rules=open_rules)


def test_idempotent_write_from_write_on_some_topic() -> None:
    def some(b: list[AclBinding], rules: AclRules = RULES) -> bool:
        return authorize_any_of_type(b, rules, "User:alice", "10.0.0.1", Op.WRITE, T)

    assert not some([])
    assert some([], AclRules(allow_everyone_if_no_acl_found=True))
    assert some([acl(T, "t", Op.WRITE)])
    assert some([acl(T, "pay-", Op.ALL, pattern=PRE)])
    assert not some([acl(T, "t", Op.WRITE), acl(T, "*", Op.WRITE, DENY)])
    assert not some([acl(T, "pay-eu", Op.WRITE), acl(T, "pay-", Op.WRITE, DENY, pattern=PRE)])
    assert some([acl(T, "t", Op.WRITE), acl(T, "u", Op.WRITE, DENY)])


def test_filters_select_as_describe_and_delete_acls_do() -> None:
    lit = acl(T, "pay-eu", Op.READ)
    pre = acl(T, "pay-", Op.WRITE, pattern=PRE)
    wild = acl(T, "*", Op.DESCRIBE, principal="User:bob")
    group = acl(G, "g", Op.READ)
    every = [lit, pre, wild, group]

    def select(rtype: ResourceType = ResourceType.ANY, name: str | None = None, pattern: PatternType = PatternType.ANY,
               principal: str | None = None, op: Operation = Op.ANY) -> list[AclBinding]:  # fmt: skip
        f = AclFilter(rtype, name, pattern, principal, None, op, Permission.ANY)
        return [b for b in every if f.matches(b)]

    assert select() == every
    assert select(T) == [lit, pre, wild]
    assert select(name="pay-eu") == [lit]  # ANY: the exact name, whatever the pattern type
    assert select(T, "pay-eu", PatternType.MATCH) == [lit, pre, wild]  # everything that applies to pay-eu
    assert select(pattern=PRE) == [pre]
    assert select(principal="User:bob") == [wild]
    assert select(op=Op.READ) == [lit, group]
    assert AclFilter(T, None, PatternType.UNKNOWN, None, None, Op.ANY, Permission.ANY).problem() is not None


def test_bindings_kafka_refuses_and_unknown_ids() -> None:
    assert binding_problem(acl(T, "t", Op.READ)) is None
    assert "resourceType" in (binding_problem(acl(ResourceType.ANY, "t", Op.READ)) or "")
    assert "patternType" in (binding_problem(acl(T, "t", Op.READ, pattern=PatternType.MATCH)) or "")
    assert "operation" in (binding_problem(acl(T, "t", Op.ANY)) or "")
    assert "empty" in (binding_problem(acl(T, "", Op.READ)) or "")
    assert "kafka-cluster" in (binding_problem(acl(C, "other", Op.ALTER)) or "")
    assert "colon" in (binding_problem(acl(T, "t", Op.READ, principal="alice")) or "")
    assert parse_enum(Operation, 99) == Op.UNKNOWN and parse_enum(Operation, 3) == Op.READ


def test_the_acl_file_survives_reopen_and_refuses_damage(tmp_path: Path) -> None:
    store = AclStore(tmp_path)
    assert store.bindings == ()
    bindings = [acl(T, "t", Op.READ), acl(G, "g-", Op.ALL, DENY, pattern=PRE, host="10.1.1.1")]
    store.save([*bindings, bindings[0]])  # a binding given twice is kept once
    again = AclStore(tmp_path)
    assert sorted(again.bindings) == sorted(bindings)
    data = (tmp_path / "acls").read_bytes()
    (tmp_path / "acls").write_bytes(data.replace(b"READ", b"RAED"))
    with pytest.raises(AclFileError, match="checksum"):
        AclStore(tmp_path)
