"""``groupstream acls add|list|remove``: ACLs through the Admin's CreateAcls, DescribeAcls and DeleteAcls, with
``kafka-acls.sh``'s options and its meaning of them, so a command copied from Kafka's documentation does here
what it does there:

- resources: ``--topic``, ``--group``, ``--transactional-id`` (each repeatable, ``*`` for all of the type) and
  ``--cluster``, named by ``--resource-pattern-type`` (``literal``, the default, or ``prefixed``; listing and
  removing also take ``any``, every pattern type with that exact name, and ``match``, every binding that
  applies to a resource of that name);
- entries: ``--allow-principal``/``--deny-principal`` (``User:NAME``, repeatable), ``--allow-host``/
  ``--deny-host`` (default ``*`` once a principal is given), ``--operation`` (repeatable, default ``All``;
  ``Read``, ``IdempotentWrite``, ``describe_configs`` and the like all parse);
- ``--producer`` (WRITE, DESCRIBE, CREATE on the topics; WRITE, DESCRIBE on transactional ids;
  IDEMPOTENT_WRITE on the cluster with ``--idempotent``) and ``--consumer`` (READ, DESCRIBE on the topics, READ
  on the groups) instead of ``--operation``;
- ``remove`` with no principal removes every ACL of the resources, and asks first unless ``--force`` (on a
  terminal; elsewhere it needs ``--force``, since nobody could answer).

What is printed differs from ``kafka-acls.sh`` on purpose: one table of bindings, like the other commands
(boxed on a terminal, Kafka-style columns when piped, ``--format json``). `plan` turns the arguments into the
bindings and filters to send and does no I/O, so every rule above is tested without a broker.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from rich.table import Table

from groupstream.cli.common import add_bootstrap, open_admin, stderr
from groupstream.cli.errors import UserError
from groupstream.cli.tables import add_format, show
from groupstream.security.acl import (
    CLUSTER_NAME,
    WILDCARD,
    AclBinding,
    AclFilter,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)

PATTERN_TYPES = ("literal", "prefixed", "any", "match")

# Kafka's AclEntry.supportedOperations, plus ALL everywhere.
SUPPORTED: dict[ResourceType, frozenset[Operation]] = {
    ResourceType.TOPIC: frozenset({Operation.READ, Operation.WRITE, Operation.CREATE, Operation.DESCRIBE,
                                   Operation.DELETE, Operation.ALTER, Operation.DESCRIBE_CONFIGS,
                                   Operation.ALTER_CONFIGS}),
    ResourceType.GROUP: frozenset({Operation.READ, Operation.DESCRIBE, Operation.DELETE}),
    ResourceType.CLUSTER: frozenset({Operation.CREATE, Operation.CLUSTER_ACTION, Operation.DESCRIBE_CONFIGS,
                                     Operation.ALTER_CONFIGS, Operation.IDEMPOTENT_WRITE, Operation.ALTER,
                                     Operation.DESCRIBE}),
    ResourceType.TRANSACTIONAL_ID: frozenset({Operation.DESCRIBE, Operation.WRITE, Operation.TWO_PHASE_COMMIT}),
}  # fmt: skip
_OPERATION_NAMES = {
    op.name.replace("_", ""): op for op in Operation if op not in (Operation.UNKNOWN, Operation.ANY)
}


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("acls", help="add, list and remove ACLs (kafka-acls.sh's options)")
    actions = p.add_subparsers(dest="acls_command", required=True, metavar="{add,list,remove}")
    add = actions.add_parser(
        "add", help="add ACLs for the given principals, hosts and operations on resources"
    )
    ls = actions.add_parser(
        "list", help="list ACLs (all, or those of resources, a pattern match or principals)"
    )
    rm = actions.add_parser("remove", help="remove ACLs (all of a resource's when no principal is given)")
    for sp in (add, ls, rm):
        _resources(sp, listing=sp is not add)
        add_bootstrap(sp)
        add_format(sp)
    for sp in (add, rm):
        _entries(sp)
    ls.add_argument("--principal", action="append", default=[], metavar="TYPE:NAME",
                    help="list only this principal's ACLs (repeatable)")  # fmt: skip
    rm.add_argument("--force", action="store_true", help="remove without asking")
    add.set_defaults(func=run_add, command_name="acls add")
    ls.set_defaults(func=run_list, command_name="acls list")
    rm.set_defaults(func=run_remove, command_name="acls remove")


def _resources(p: argparse.ArgumentParser, listing: bool) -> None:
    p.add_argument("--topic", action="append", default=[], help="a topic ('*': every topic; repeatable)")
    p.add_argument(
        "--group", action="append", default=[], help="a consumer group ('*': every group; repeatable)"
    )
    p.add_argument("--transactional-id", action="append", default=[], metavar="ID",
                   help="a transactional id ('*': every one; repeatable)")  # fmt: skip
    p.add_argument("--cluster", action="store_true", help="the cluster")
    choices = PATTERN_TYPES if listing else PATTERN_TYPES[:2]
    p.add_argument("--resource-pattern-type", type=str.lower, choices=choices, default="literal",
                   help="how the resource names are meant: literal (the default) or prefixed"
                        + ("; any (every pattern type, this exact name) or match (every ACL that applies to a "
                           "resource of this name)" if listing else ""))  # fmt: skip


def _entries(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--allow-principal",
        action="append",
        default=[],
        metavar="TYPE:NAME",
        help="principal to allow, e.g. User:alice ('User:*': everyone; repeatable)",
    )
    p.add_argument(
        "--deny-principal",
        action="append",
        default=[],
        metavar="TYPE:NAME",
        help="principal to deny (a DENY wins over any ALLOW; repeatable)",
    )
    p.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="HOST",
        help="host the allowed principals connect from (default '*'; repeatable)",
    )
    p.add_argument(
        "--deny-host",
        action="append",
        default=[],
        metavar="HOST",
        help="host the denied principals connect from (default '*'; repeatable)",
    )
    p.add_argument(
        "--operation",
        action="append",
        default=[],
        metavar="OP",
        help="Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, "
        "AlterConfigs, IdempotentWrite, TwoPhaseCommit or All (the default; repeatable)",
    )
    p.add_argument(
        "--producer",
        action="store_true",
        help="the producer's ACLs: WRITE, DESCRIBE, CREATE on the topics, WRITE, DESCRIBE on the "
        "transactional ids",
    )
    p.add_argument(
        "--idempotent", action="store_true", help="with --producer: IDEMPOTENT_WRITE on the cluster"
    )
    p.add_argument("--consumer", action="store_true",
                   help="the consumer's ACLs: READ, DESCRIBE on the topics, READ on the groups (needs --group)")  # fmt: skip


# --- planning: arguments to bindings and filters (pure) ------------------------------------------------


@dataclass(frozen=True)
class Entry:
    """An access control entry: who, from where, what, allowed or denied."""

    principal: str
    host: str
    operation: Operation
    permission: Permission


def parse_operation(text: str) -> Operation:
    op = _OPERATION_NAMES.get(text.strip().replace("_", "").replace("-", "").upper())
    if op is None:
        names = ", ".join(
            sorted({"".join(w.capitalize() for w in o.name.split("_")) for o in _OPERATION_NAMES.values()})
        )
        raise UserError(f"--operation {text!r} is not an operation; use one of {names}")
    return op


def parse_principal(text: str) -> str:
    principal = text.strip()
    kind, sep, name = principal.partition(":")
    if not sep or not kind or not name:
        raise UserError(f"principal {text!r} must be TYPE:NAME, e.g. User:alice (User:* for everyone)")
    return principal


def resource_filters(args: argparse.Namespace) -> list[tuple[ResourceType, str, PatternType]]:
    """The resources named on the command line, each with the pattern type it is meant with."""
    pattern = PatternType[args.resource_pattern_type.upper()]
    out = [(ResourceType.TOPIC, t.strip(), pattern) for t in args.topic]
    out += [(ResourceType.GROUP, g.strip(), pattern) for g in args.group]
    out += [(ResourceType.TRANSACTIONAL_ID, t.strip(), pattern) for t in args.transactional_id]
    if args.cluster or getattr(args, "idempotent", False):
        out.append((ResourceType.CLUSTER, CLUSTER_NAME, PatternType.LITERAL))
    for kind, name, _ in out:
        if not name:
            raise UserError(f"an empty {kind.name.lower().replace('_', ' ')} name")
    return list(dict.fromkeys(out))


def entries(args: argparse.Namespace, operations: Iterable[Operation]) -> list[Entry]:
    ops = list(dict.fromkeys(operations))
    out: list[Entry] = []
    for principals, hosts, permission in (
        (args.allow_principal, args.allow_host, Permission.ALLOW),
        (args.deny_principal, args.deny_host, Permission.DENY),
    ):
        for principal in dict.fromkeys(parse_principal(p) for p in principals):
            for host in dict.fromkeys(h.strip() for h in hosts or [WILDCARD]):
                out.extend(Entry(principal, host, op, permission) for op in ops)
    return out


def plan(
    args: argparse.Namespace, need_resource: bool = True
) -> dict[tuple[ResourceType, str, PatternType], list[Entry]]:
    """Each resource (pattern) with the entries to add or remove on it, as ``kafka-acls.sh`` derives them."""
    resources = resource_filters(args)
    if not resources and need_resource:
        raise UserError("name at least one resource: --topic, --group, --transactional-id or --cluster")
    out: dict[tuple[ResourceType, str, PatternType], list[Entry]] = {}
    if args.producer or args.consumer:
        if args.operation:
            raise UserError(
                "--operation cannot be combined with --producer or --consumer (they choose the operations)"
            )
        if args.consumer and not args.group:
            raise UserError("--consumer needs --group (a consumer reads in a group)")
        for r in resources:
            kind = r[0]
            ops: list[Operation] = []
            if args.producer and kind == ResourceType.TOPIC:
                ops += [Operation.WRITE, Operation.DESCRIBE, Operation.CREATE]
            if args.producer and kind == ResourceType.TRANSACTIONAL_ID:
                ops += [Operation.WRITE, Operation.DESCRIBE]
            if args.producer and kind == ResourceType.CLUSTER and args.idempotent:
                ops += [Operation.IDEMPOTENT_WRITE]
            if args.consumer and kind == ResourceType.TOPIC:
                ops += [Operation.READ, Operation.DESCRIBE]
            if args.consumer and kind == ResourceType.GROUP:
                ops += [Operation.READ]
            if ops:
                out[r] = entries(args, ops)
    else:
        if args.idempotent:
            raise UserError("--idempotent goes with --producer")
        ops = [parse_operation(o) for o in args.operation] or [Operation.ALL]
        for r in resources:
            unsupported = [o for o in ops if o != Operation.ALL and o not in SUPPORTED[r[0]]]
            if unsupported:
                allowed = ", ".join(sorted(o.name for o in SUPPORTED[r[0]] | {Operation.ALL}))
                raise UserError(f"{r[0].name} ACLs take only the operations {allowed}, not "
                                f"{', '.join(o.name for o in unsupported)}")  # fmt: skip
            out[r] = entries(args, ops)
    return out


def bindings_to_add(args: argparse.Namespace) -> list[AclBinding]:
    planned = plan(args)
    if not any(planned.values()):
        raise UserError("name who: --allow-principal or --deny-principal")
    return [
        AclBinding(kind, name, pattern, e.principal, e.host, e.operation, e.permission)
        for (kind, name, pattern), es in planned.items()
        for e in es
    ]


def filters_to_remove(args: argparse.Namespace) -> list[AclFilter]:
    """One filter per entry on each resource; a resource without entries: one filter for all its ACLs."""
    out: list[AclFilter] = []
    for (kind, name, pattern), es in plan(args).items():
        if not es:
            out.append(AclFilter(kind, name, pattern, None, None, Operation.ANY, Permission.ANY))
        out += [AclFilter(kind, name, pattern, e.principal, e.host, e.operation, e.permission) for e in es]
    return out


def list_filters(args: argparse.Namespace) -> list[AclFilter]:
    resources = resource_filters(args)
    if not resources:
        return [AclFilter(ResourceType.ANY, None, PatternType.ANY, None, None, Operation.ANY, Permission.ANY)]
    return [AclFilter(k, n, p, None, None, Operation.ANY, Permission.ANY) for k, n, p in resources]


# --- the commands ---------------------------------------------------------------------------------------


def acl_table(title: str, bindings: Sequence[AclBinding]) -> Table:
    table = Table(title=title)
    for column in ("resource type", "resource", "pattern", "principal", "host", "operation", "permission"):
        table.add_column(column)
    for b in bindings:
        table.add_row(b.resource_type.name, b.resource_name, b.pattern_type.name, b.principal, b.host,
                      b.operation.name, b.permission.name)  # fmt: skip
    return table


def _count(n: int) -> str:
    return f"{n} ACL{'s' if n != 1 else ''}"


def run_add(args: argparse.Namespace) -> int:
    wanted = list(dict.fromkeys(bindings_to_add(args)))
    with open_admin(args) as admin:
        existing: set[AclBinding] = set()
        for kind, name, pattern in {(b.resource_type, b.resource_name, b.pattern_type) for b in wanted}:
            existing.update(
                admin.describe_acls(AclFilter(kind, name, pattern, None, None, Operation.ANY, Permission.ANY))
            )
        new = [b for b in wanted if b not in existing]
        if new:
            admin.create_acls(new)
    for b in wanted:
        if b in existing:
            stderr.print(f"already there: {b.permission.name} {b.principal} {b.operation.name} on "
                         f"{b.resource_type.name} {b.resource_name!r} ({b.pattern_type.name}) from {b.host}",
                         markup=False, highlight=False)  # fmt: skip
    show(acl_table(f"added {_count(len(new))}", sorted(new)), args)
    return 0


def run_list(args: argparse.Namespace) -> int:
    principals = {parse_principal(p) for p in args.principal}
    found: set[AclBinding] = set()
    with open_admin(args) as admin:
        for f in list_filters(args):
            found.update(admin.describe_acls(f))
    shown = sorted(b for b in found if not principals or b.principal in principals)
    show(acl_table(_count(len(shown)), shown), args)
    return 0


def run_remove(args: argparse.Namespace) -> int:
    filters = filters_to_remove(args)
    if not args.force:
        if not sys.stdin.isatty():
            raise UserError("remove asks for confirmation, and nobody can answer here: pass --force")
        what = "every ACL of " if all(f.principal is None for f in filters) else "ACLs of "
        names = ", ".join(sorted({f"{f.resource_type.name} {f.resource_name!r}" for f in filters}))
        answer = input(f"remove {what}{names}? (y/n) ").strip().lower()
        if answer != "y":
            stderr.print("nothing removed")
            return 1
    with open_admin(args) as admin:
        removed = sorted({b for deleted in admin.delete_acls(filters) for b in deleted})
    show(acl_table(f"removed {_count(len(removed))}", removed), args)
    return 0
