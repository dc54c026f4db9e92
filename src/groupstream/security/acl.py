"""Kafka's ACL model and its authorization rule, as pure functions of the bindings in force.

A binding allows or denies a principal (``User:alice``, or ``User:*`` for everyone) an operation on resources
from a host (an IP address, or ``*``). Resources are named by a pattern: LITERAL (the name itself, or ``*`` for
every resource of the type) or PREFIXED (every name that starts with it). Kafka's rules, which users rely on:

- a super user may do everything;
- a DENY that matches wins over any ALLOW (deny before allow);
- an ALLOW of READ, WRITE, DELETE or ALTER implies DESCRIBE, and ALTER_CONFIGS implies DESCRIBE_CONFIGS
  (a DENY implies nothing: denying READ does not deny DESCRIBE), and ALL matches every operation;
- a resource that no binding names at all (for any principal) is open to everyone only with
  ``allow.everyone.if.no.acl.found=true``; otherwise, and whenever bindings exist, what is not allowed is denied.

Filters (DescribeAcls, DeleteAcls) select bindings with ANY for "whatever it is", a null name, principal or
host for "any", and pattern type MATCH for "every binding that would apply to this resource name".
Ids and names are Kafka's (``AclOperation``, ``ResourceType``, ``PatternType``, ``AclPermissionType``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import IntEnum
from typing import TypeVar

WILDCARD = "*"
"""A LITERAL resource name or a host that matches every one."""
WILDCARD_PRINCIPAL = "User:*"
CLUSTER_NAME = "kafka-cluster"
"""The name of the one CLUSTER resource."""

E = TypeVar("E", bound=IntEnum)


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class Operation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15


class Permission(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


# The ALLOWs that grant an operation besides itself and ALL.
_IMPLIED_BY: dict[Operation, frozenset[Operation]] = {
    Operation.DESCRIBE: frozenset({Operation.READ, Operation.WRITE, Operation.DELETE, Operation.ALTER}),
    Operation.DESCRIBE_CONFIGS: frozenset({Operation.ALTER_CONFIGS}),
}


@dataclass(frozen=True, slots=True, order=True)
class AclBinding:
    """One ACL: a resource pattern and an access control entry."""

    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: Operation
    permission: Permission

    def names_client(self, principal: str, host: str) -> bool:
        """Whether the binding is about this principal (or everyone) connecting from this host (or any)."""
        return self.principal in (principal, WILDCARD_PRINCIPAL) and self.host in (host, WILDCARD)

    def applies_to(self, resource_type: ResourceType, name: str) -> bool:
        """Whether the binding's pattern covers the resource ``(resource_type, name)``."""
        if self.resource_type != resource_type:
            return False
        if self.pattern_type == PatternType.PREFIXED:
            return name.startswith(self.resource_name)
        return self.resource_name in (name, WILDCARD)


@dataclass(frozen=True, slots=True)
class AclFilter:
    """Selects bindings: ANY, MATCH and None are the wildcards described in the module docstring."""

    resource_type: ResourceType
    resource_name: str | None
    pattern_type: PatternType
    principal: str | None
    host: str | None
    operation: Operation
    permission: Permission

    def matches(self, b: AclBinding) -> bool:
        return self._matches_pattern(b) and self._matches_entry(b)

    def _matches_pattern(self, b: AclBinding) -> bool:
        if self.resource_type != ResourceType.ANY and self.resource_type != b.resource_type:
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH) and self.pattern_type != b.pattern_type:
            return False
        if self.resource_name is None:
            return True
        if self.pattern_type in (PatternType.ANY, b.pattern_type):
            return self.resource_name == b.resource_name
        # MATCH: the bindings that would apply to a resource of this name
        return b.applies_to(b.resource_type, self.resource_name)

    def _matches_entry(self, b: AclBinding) -> bool:
        return (
            (self.principal is None or self.principal == b.principal)
            and (self.host is None or self.host == b.host)
            and self.operation in (Operation.ANY, b.operation)
            and self.permission in (Permission.ANY, b.permission)
        )

    def problem(self) -> str | None:
        """Why the filter is not valid, as Kafka words it; None when it is."""
        for value, what in (
            (self.resource_type, "resource type"),
            (self.pattern_type, "pattern type"),
            (self.operation, "operation"),
            (self.permission, "permission type"),
        ):
            if value == 0:
                return f"Invalid filter: unknown {what}"
        return None


def binding_problem(b: AclBinding) -> str | None:
    """Why a binding cannot be created, in Kafka's words; None when it can."""
    if b.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        return f"Invalid resourceType {b.resource_type.name}"
    if b.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return f"Invalid patternType {b.pattern_type.name}"
    if b.operation in (Operation.UNKNOWN, Operation.ANY):
        return f"Invalid operation {b.operation.name}"
    if b.permission not in (Permission.ALLOW, Permission.DENY):
        return f"Invalid permissionType {b.permission.name}"
    if not b.resource_name:
        return "Resource name should not be empty"
    if b.resource_type == ResourceType.CLUSTER and b.resource_name != CLUSTER_NAME:
        return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    if ":" not in b.principal:
        return (
            f"Could not parse principal from `{b.principal}` (no colon is present separating the principal type "
            "from the principal name)"
        )
    return None


def parse_enum(kind: type[E], value: int) -> E:
    """An id off the wire as its enum; an id we do not know is UNKNOWN (0), which validation refuses."""
    try:
        return kind(value)
    except ValueError:
        return kind(0)


@dataclass(frozen=True, slots=True)
class AclRules:
    """The authorizer's settings: ``super.users`` and ``allow.everyone.if.no.acl.found``."""

    super_users: frozenset[str] = frozenset()
    allow_everyone_if_no_acl_found: bool = False


def authorize(
    bindings: Iterable[AclBinding],
    rules: AclRules,
    principal: str,
    host: str,
    operation: Operation,
    resource_type: ResourceType,
    name: str,
) -> bool:
    """Whether ``principal`` connecting from ``host`` may perform ``operation`` on the resource."""
    if principal in rules.super_users:
        return True
    granting = {operation, Operation.ALL} | _IMPLIED_BY.get(operation, frozenset())
    any_binding = False
    allowed = False
    for b in bindings:
        if not b.applies_to(resource_type, name):
            continue
        any_binding = True
        if not b.names_client(principal, host):
            continue
        if b.permission == Permission.DENY and b.operation in (operation, Operation.ALL):
            return False
        if b.permission == Permission.ALLOW and b.operation in granting:
            allowed = True
    return allowed or (not any_binding and rules.allow_everyone_if_no_acl_found)


def authorize_any_of_type(
    bindings: Iterable[AclBinding],
    rules: AclRules,
    principal: str,
    host: str,
    operation: Operation,
    resource_type: ResourceType,
) -> bool:
    """Whether the principal may perform ``operation`` on at least one resource of the type (Kafka's
    ``authorizeByResourceType``, with which WRITE on some topic grants IDEMPOTENT_WRITE, KIP-679): some ALLOW
    for it that a DENY of the same or a wider pattern does not cancel. With no binding of the type at all, the
    answer is ``allow.everyone.if.no.acl.found``."""
    if principal in rules.super_users:
        return True
    of_type = [b for b in bindings if b.resource_type == resource_type]
    mine = [b for b in of_type if b.names_client(principal, host) and b.operation in (operation, Operation.ALL)]
    denies = [b for b in mine if b.permission == Permission.DENY]
    for allow in (b for b in mine if b.permission == Permission.ALLOW):
        if not any(_covers(d, allow) for d in denies):
            return True
    return not of_type and rules.allow_everyone_if_no_acl_found


def _covers(deny: AclBinding, allow: AclBinding) -> bool:
    """Whether every resource ``allow``'s pattern names is also named by ``deny``'s."""
    if deny.pattern_type == PatternType.LITERAL:
        return deny.resource_name == WILDCARD or (
            allow.pattern_type == PatternType.LITERAL and deny.resource_name == allow.resource_name
        )
    return allow.resource_name.startswith(deny.resource_name)
