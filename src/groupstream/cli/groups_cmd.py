"""``groupstream groups list|describe|reset-offsets|delete|delete-offsets``: consumer groups as
``kafka-consumer-groups.sh`` shows and changes them, so what operators know from Kafka works here unchanged.

``describe`` prints Kafka's columns (GROUP, TOPIC, PARTITION, CURRENT-OFFSET, LOG-END-OFFSET, LAG,
CONSUMER-ID, HOST, CLIENT-ID), with ``--members`` and ``--state`` views; for a KIP-848 ``consumer`` group these
add what Kafka 4's tool shows (ConsumerGroupDescribe): the group epoch and target assignment epoch, and per
member its epoch, current and target assignment, and whether it is stable or still reconciling. ``list``
shows each group's type (classic or consumer) and filters by it (``--type``). ``reset-offsets`` computes new
positions (earliest, latest, a datetime, an offset, a shift) and only writes them with ``--execute``, and,
like Kafka, only while the group has no members: a live member would overwrite the reset with its next
commit, so resetting under it would be a lie.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime

from rich.table import Table

from groupstream.cli.common import add_bootstrap, open_admin, stderr, stdout
from groupstream.cli.errors import UserError
from groupstream.cli.tables import add_format, show
from groupstream.client.admin import (
    Admin,
    ConsumerGroupDescription,
    GroupDescription,
    parse_group_state,
    parse_group_type,
)
from groupstream.client.errors import KafkaError, UnsupportedVersionError
from groupstream.protocol.consumer_protocol import CONSUMER_PROTOCOL_TYPE
from groupstream.protocol.error_codes import ErrorCode

TopicPart = tuple[str, int]


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("groups", help="list, describe, reset the offsets of and delete consumer groups")
    gsub = p.add_subparsers(dest="groups_command", required=True,
                            metavar="{list,describe,reset-offsets,delete,delete-offsets}")  # fmt: skip

    ls = gsub.add_parser("list", help="list consumer groups")
    ls.add_argument("--state", action="append", type=_state, default=None, metavar="STATE",
                    help="only groups in this state (Empty, Stable, PreparingRebalance, CompletingRebalance, "
                         "Dead; consumer groups also Assigning, Reconciling; repeatable, any case)")  # fmt: skip
    ls.add_argument("--type", action="append", type=_group_type, default=None, metavar="TYPE",
                    help="only groups of this type (classic, consumer; repeatable)")  # fmt: skip
    ls.set_defaults(func=list_, command_name="groups list")

    d = gsub.add_parser("describe", help="committed offsets, lag and owners per partition (or members, state)")
    _group_args(d, several=True)
    view = d.add_mutually_exclusive_group()
    view.add_argument("--members", action="store_true", help="one row per member instead of per partition")
    view.add_argument("--state", action="store_true", help="the group's coordinator, strategy, state, size")
    d.add_argument("--verbose", action="store_true",
                   help="with --members: instance ids and assignments (and, for consumer groups, epochs, target "
                        "assignments and member states); with --state: the epochs")  # fmt: skip
    d.set_defaults(func=describe, command_name="groups describe")

    r = gsub.add_parser("reset-offsets", help="move a group's committed offsets (only while it has no members)")
    _group_args(r, several=False)
    which = r.add_mutually_exclusive_group(required=True)
    which.add_argument("--topic", action="append", type=_topic_spec, metavar="TOPIC[:P,...]",
                       help="a topic, or some of its partitions (T:0,1 or T:0-3); repeatable")  # fmt: skip
    which.add_argument("--all-topics", action="store_true", help="every partition the group has an offset for")
    to = r.add_mutually_exclusive_group(required=True)
    to.add_argument("--to-earliest", action="store_true", help="the log start")
    to.add_argument("--to-latest", action="store_true", help="the log end")
    to.add_argument("--to-datetime", type=_datetime_ms, metavar="ISO",
                    help="the first offset at or after this time, e.g. 2026-01-31T12:00:00 (local) or with Z")
    to.add_argument("--to-offset", type=int, metavar="N", help="this offset (kept within the log's range)")
    to.add_argument("--shift-by", type=int, metavar="N", help="the committed offset plus N (may be negative)")
    mode = r.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true", help="show the new offsets only (the default)")
    mode.add_argument("--execute", action="store_true", help="commit the new offsets")
    r.set_defaults(func=reset_offsets, command_name="groups reset-offsets")

    rm = gsub.add_parser("delete", help="delete groups and their offsets (only groups without members)")
    _group_args(rm, several=True)
    rm.set_defaults(func=delete, command_name="groups delete")

    do = gsub.add_parser("delete-offsets", help="delete a group's offsets of some topics")
    _group_args(do, several=False)
    do.add_argument("--topic", action="append", type=_topic_spec, required=True, metavar="TOPIC[:P,...]")
    do.set_defaults(func=delete_offsets, command_name="groups delete-offsets")

    for sp in (ls, d, r, rm, do):
        add_bootstrap(sp)
        add_format(sp)


# --- argument types --------------------------------------------------------------------------------------


def _group_args(p: argparse.ArgumentParser, several: bool) -> None:
    """The group(s) as a positional argument or, as Kafka's tools spell it, ``--group G`` (repeatable where
    several are taken); `_named_groups` merges both into ``args.groups`` / ``args.group``."""
    p.add_argument("positional_groups", nargs="*", metavar="group")
    p.add_argument("--group", action="append", dest="option_groups", default=[], metavar="GROUP",
                   help="the group (Kafka's spelling; the same as naming it)" + ("; repeatable" if several else ""))  # fmt: skip
    p.set_defaults(several_groups=several)


def _named_groups(args: argparse.Namespace) -> None:
    named = [*args.positional_groups, *args.option_groups]
    if not named:
        raise UserError("name a group (as an argument or with --group)")
    if args.several_groups:
        args.groups = named
    elif len(named) > 1:
        raise UserError(f"one group at a time, got {len(named)}: {', '.join(named)}")
    else:
        args.group = named[0]


def _state(text: str) -> str:
    try:
        return parse_group_state(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _group_type(text: str) -> str:
    try:
        return parse_group_type(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _topic_spec(text: str) -> tuple[str, tuple[int, ...] | None]:
    """``T`` (every partition) or ``T:0,2,5-7``."""
    topic, sep, parts = text.partition(":")
    if not topic:
        raise argparse.ArgumentTypeError(f"expected TOPIC or TOPIC:P[,P...], got {text!r}")
    if not sep:
        return topic, None
    out: set[int] = set()
    for item in parts.split(","):
        lo, dash, hi = item.strip().partition("-")
        try:
            first, last = int(lo), int(hi if dash else lo)
        except ValueError:
            raise argparse.ArgumentTypeError(f"bad partition {item!r} in {text!r}") from None
        if first < 0 or last < first:
            raise argparse.ArgumentTypeError(f"bad partition range {item!r} in {text!r}")
        out.update(range(first, last + 1))
    return topic, tuple(sorted(out))


def _datetime_ms(text: str) -> int:
    """An ISO-8601 date-time to epoch ms; without a zone it is local time, as Kafka's tool reads it."""
    try:
        dt = datetime.fromisoformat(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an ISO date-time like 2026-01-31T12:00:00, got {text!r}") from None
    return int(dt.timestamp() * 1000)


# --- list ----------------------------------------------------------------------------------------------


def list_(args: argparse.Namespace) -> int:
    with open_admin(args) as admin:
        groups = admin.list_groups(args.state, args.type)
        missing = [g.group_id for g in groups if g.state is None]
        states = {gid: d.state for gid, d in admin.describe_groups(missing).items()} if missing else {}
    what = [f"in state {', '.join(args.state)}"] if args.state else []
    what += [f"of type {', '.join(args.type)}"] if args.type else []
    table = Table(title=f"{len(groups)} group{'s' if len(groups) != 1 else ''}"
                        f"{''.join(' ' + w for w in what)} on {args.bootstrap_server}")  # fmt: skip
    for col in ("GROUP", "TYPE", "PROTOCOL-TYPE", "STATE"):
        table.add_column(col)
    for g in groups:
        # a broker before ListGroups v5 reports no type: it has classic groups only
        table.add_row(g.group_id, g.group_type or "classic", g.protocol_type or "-",
                      g.state or states.get(g.group_id, "-"))  # fmt: skip
    show(table, args)
    return 0


# --- describe ------------------------------------------------------------------------------------------

_REBALANCING = ("PreparingRebalance", "CompletingRebalance", "Assigning", "Reconciling")


def describe(args: argparse.Namespace) -> int:
    _named_groups(args)
    with open_admin(args) as admin:
        descs = admin.describe_groups(args.groups)
        offsets = {g: admin.list_group_offsets(g) for g in args.groups}
        consumer = _consumer_groups(admin, descs.values())
        missing = [g for g in args.groups if not descs[g].exists and not offsets[g] and g not in consumer]
        if missing:
            raise UserError(f"consumer group {missing[0]!r} does not exist")
        if args.state:
            _state_view([descs[g] for g in args.groups], consumer, args)
        elif args.members:
            _members_view([descs[g] for g in args.groups], consumer, args)
        else:
            for g in args.groups:
                _offsets_view(admin, consumer.get(g) or descs[g], {tp: om.offset for tp, om in offsets[g].items()},
                              args)  # fmt: skip
    return 0


def _consumer_groups(admin: Admin, descs: Iterable[GroupDescription]) -> dict[str, ConsumerGroupDescription]:
    """The KIP-848 groups among ``descs``, as ConsumerGroupDescribe shows them. Our broker's DescribeGroups
    names both kinds' protocol type ``consumer``; Kafka 4's answers GROUP_ID_NOT_FOUND for a consumer group
    (the description then reads Dead), so those are asked too. ConsumerGroupDescribe answers
    GROUP_ID_NOT_FOUND for a classic group or none, and a broker without it (before KIP-848) has only classic
    groups. A group epoch below 0 is no consumer group either (Tansu 0.6 answers every group id so, without
    an error)."""
    candidates = [d.group_id for d in descs if not d.exists or d.protocol_type == CONSUMER_PROTOCOL_TYPE]
    if not candidates or not admin.connection.supports("ConsumerGroupDescribe"):
        return {}
    try:
        results = admin.describe_consumer_groups_or_errors(candidates)
    except UnsupportedVersionError:
        return {}
    out: dict[str, ConsumerGroupDescription] = {}
    for group, result in results.items():
        if isinstance(result, ConsumerGroupDescription):
            if result.group_epoch >= 0:
                out[group] = result
        elif result.code != ErrorCode.GROUP_ID_NOT_FOUND:
            raise result
    return out


def _notes(group_id: str, state: str, members: int) -> None:
    if state in _REBALANCING:
        stdout.print(f"Warning: consumer group {group_id!r} is rebalancing.")
    if not members:
        stdout.print(f"Consumer group {group_id!r} has no active members.")


def _offsets_view(
    admin: Admin,
    desc: GroupDescription | ConsumerGroupDescription,
    committed: Mapping[TopicPart, int],
    args: argparse.Namespace,
) -> None:
    _notes(desc.group_id, desc.state, len(desc.members))
    owners = desc.owners()
    partitions = sorted(set(owners) | set(committed))
    ends = admin.log_end_offsets(partitions)
    table = Table()
    for col in ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST",
                "CLIENT-ID"):  # fmt: skip
        table.add_column(col, justify="right" if col in ("PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG")
                         else "left")  # fmt: skip
    for tp in partitions:
        cur, end, m = committed.get(tp), ends.get(tp), owners.get(tp)
        lag = str(max(end - cur, 0)) if cur is not None and end is not None else "-"
        table.add_row(
            desc.group_id, tp[0], str(tp[1]),
            _or_dash(cur), _or_dash(end), lag,
            m.member_id if m else "-", m.client_host if m else "-", m.client_id if m else "-",
        )  # fmt: skip
    # members with nothing assigned still show, as Kafka shows them
    owning = {m.member_id for m in owners.values()}
    for m in desc.members:
        if m.member_id not in owning:
            table.add_row(desc.group_id, "-", "-", "-", "-", "-", m.member_id, m.client_host, m.client_id)
    show(table, args)


def _members_view(
    descs: list[GroupDescription], consumer: Mapping[str, ConsumerGroupDescription], args: argparse.Namespace
) -> None:
    """Kafka's member rows. With --verbose a consumer group's members get Kafka 4's columns (CURRENT-EPOCH,
    CURRENT-ASSIGNMENT, TARGET-EPOCH, TARGET-ASSIGNMENT) and their state, in a table of their own."""
    if not args.verbose:
        _members_table([consumer.get(d.group_id, d) for d in descs], args)
        return
    classic = [d for d in descs if d.group_id not in consumer]
    if classic:
        _members_table(classic, args)
    kip848 = [consumer[d.group_id] for d in descs if d.group_id in consumer]
    if kip848:
        _consumer_members_table(kip848, args)


def _members_table(descs: Sequence[GroupDescription | ConsumerGroupDescription], args: argparse.Namespace) -> None:
    verbose = args.verbose
    table = Table()
    cols = ["GROUP", "CONSUMER-ID"] + (["GROUP-INSTANCE-ID"] if verbose else []) + ["HOST", "CLIENT-ID",
                                                                                   "#PARTITIONS"]
    cols += ["ASSIGNMENT"] if verbose else []
    for col in cols:
        table.add_column(col, justify="right" if col == "#PARTITIONS" else "left")
    for desc in descs:
        _notes(desc.group_id, desc.state, len(desc.members))
        if isinstance(desc, ConsumerGroupDescription):
            for cm in desc.members:
                table.add_row(desc.group_id, cm.member_id, cm.client_host, cm.client_id, str(len(cm.assignment)))  # fmt: skip
            continue
        for m in sorted(desc.members, key=lambda m: m.member_id):
            row = [desc.group_id, m.member_id]
            row += [m.group_instance_id or "-"] if verbose else []
            row += [m.client_host, m.client_id, str(len(m.assigned_partitions))]
            if verbose:
                by_topic: dict[str, list[int]] = {}
                for t, p in m.assigned_partitions:
                    by_topic.setdefault(t, []).append(p)
                row.append(", ".join(f"{t}({','.join(map(str, ps))})" for t, ps in by_topic.items()) or "-")
            table.add_row(*row)
    show(table, args)


def _consumer_members_table(groups: list[ConsumerGroupDescription], args: argparse.Namespace) -> None:
    """Kafka 4's member columns, and ours, MEMBER-STATE. UPGRADED, as Kafka 4.4's tool prints it, only for a
    group in the middle of an online migration (classic and ``consumer`` members both): ``true`` for a member
    speaking the ``consumer`` protocol, ``false`` for a classic one, ``-`` when the broker does not tell
    (ConsumerGroupDescribe before v1)."""
    table = Table()
    types = {m.member_type for cg in groups for m in cg.members}
    mixed = {"classic", "consumer"} <= types
    cols = ["GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "CURRENT-EPOCH",
            "CURRENT-ASSIGNMENT", "TARGET-EPOCH", "TARGET-ASSIGNMENT", "MEMBER-STATE"]  # fmt: skip
    if mixed:
        cols.append("UPGRADED")
    numeric = ("#PARTITIONS", "CURRENT-EPOCH", "TARGET-EPOCH")
    for col in cols:
        table.add_column(col, justify="right" if col in numeric else "left")
    for cg in groups:
        _notes(cg.group_id, cg.state, len(cg.members))
        for m in cg.members:
            row = [
                cg.group_id, m.member_id, m.instance_id or "-", m.client_host, m.client_id,
                str(len(m.assignment)), str(m.member_epoch), _assignment_text(m.assignment),
                str(cg.assignment_epoch), _assignment_text(m.target_assignment), m.state,
            ]  # fmt: skip
            if mixed:
                row.append({"consumer": "true", "classic": "false"}.get(m.member_type or "", "-"))
            table.add_row(*row)
    show(table, args)


def _assignment_text(partitions: Iterable[TopicPart]) -> str:
    """Kafka 4's form: ``topic:0,1;other:3``, topics sorted; ``-`` when empty."""
    by_topic: dict[str, list[int]] = {}
    for t, p in partitions:
        by_topic.setdefault(t, []).append(p)
    return ";".join(f"{t}:{','.join(map(str, sorted(ps)))}" for t, ps in sorted(by_topic.items())) or "-"


def _state_view(
    descs: list[GroupDescription], consumer: Mapping[str, ConsumerGroupDescription], args: argparse.Namespace
) -> None:
    """Kafka's state row; with --verbose, or when a consumer group is among them, Kafka 4's GROUP-EPOCH and
    TARGET-ASSIGNMENT-EPOCH too (``-`` for classic groups, which have generations instead)."""
    epochs = args.verbose or bool(consumer)
    table = Table()
    cols = ["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE"]
    cols += ["GROUP-EPOCH", "TARGET-ASSIGNMENT-EPOCH"] if epochs else []
    for col in [*cols, "#MEMBERS"]:
        table.add_column(col, justify="left" if col in cols[:4] else "right")
    for desc in descs:
        cg = consumer.get(desc.group_id)
        if cg is None:
            coordinator = f"{desc.coordinator} ({desc.coordinator_id})"
            row = [desc.group_id, coordinator, desc.protocol or "-", desc.state]
            row += ["-", "-"] if epochs else []
            row.append(str(len(desc.members)))
        else:
            row = [cg.group_id, f"{cg.coordinator} ({cg.coordinator_id})", cg.assignor_name or "-", cg.state,
                   str(cg.group_epoch), str(cg.assignment_epoch), str(len(cg.members))]  # fmt: skip
        table.add_row(*row)
    show(table, args)


def _or_dash(v: int | None) -> str:
    return "-" if v is None else str(v)


# --- reset-offsets -------------------------------------------------------------------------------------


def reset_offsets(args: argparse.Namespace) -> int:
    _named_groups(args)
    with open_admin(args) as admin:
        desc = admin.describe_groups([args.group])[args.group]
        cg = _consumer_groups(admin, [desc]).get(args.group)  # Kafka 4 describes it only this way
        state, members = (cg.state, len(cg.members)) if cg is not None else (desc.state, len(desc.members))
        if members:
            raise UserError(
                f"assignments can only be reset if the group {args.group!r} is inactive, but the current state is "
                f"{state} ({members} member{'s' if members != 1 else ''}): stop its consumers first"
            )
        committed = {tp: om.offset for tp, om in admin.list_group_offsets(args.group).items()}
        partitions = _partitions(admin, args, committed)
        new = _new_offsets(admin, args, partitions, committed)
        if args.execute:
            admin.alter_group_offsets(args.group, new)
    table = Table(title=None if args.execute else "dry run: nothing was changed (add --execute to apply)")
    for col in ("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"):
        table.add_column(col, justify="right" if col in ("PARTITION", "NEW-OFFSET") else "left")
    for (t, p), o in sorted(new.items()):
        table.add_row(args.group, t, str(p), str(o))
    show(table, args)
    if args.execute:
        stdout.print(f"reset {len(new)} offset{'s' if len(new) != 1 else ''} of group {args.group!r}")
    elif not args.dry_run:
        stderr.print("no action was taken: --execute applies the offsets above")
    return 0


def _partitions(admin: Admin, args: argparse.Namespace, committed: Mapping[TopicPart, int]) -> list[TopicPart]:
    if args.all_topics:
        if not committed:
            raise UserError(f"group {args.group!r} has no committed offsets: name the topics with --topic")
        return sorted(committed)
    out: set[TopicPart] = set()
    topics = admin.describe_topics(sorted({t for t, _ in args.topic}))
    for topic, parts in args.topic:
        count = topics[topic].partition_count
        if parts is None:
            out.update((topic, p) for p in range(count))
            continue
        bad = [p for p in parts if p >= count]
        if bad:
            raise UserError(f"topic {topic!r} has {count} partitions; there is no partition {bad[0]}")
        out.update((topic, p) for p in parts)
    return sorted(out)


def _new_offsets(
    admin: Admin, args: argparse.Namespace, partitions: list[TopicPart], committed: Mapping[TopicPart, int]
) -> dict[TopicPart, int]:
    starts = {tp: lo.offset for tp, lo in admin.list_offsets(dict.fromkeys(partitions, "earliest")).items()}
    ends = {tp: lo.offset for tp, lo in admin.list_offsets(dict.fromkeys(partitions, "latest")).items()}

    def clamp(tp: TopicPart, offset: int) -> int:
        return min(max(offset, starts[tp]), ends[tp])

    if args.to_earliest:
        return starts
    if args.to_latest:
        return ends
    if args.to_datetime is not None:
        found = admin.list_offsets(dict.fromkeys(partitions, args.to_datetime))
        # no record at or after the time: the log end, as Kafka's tool does
        return {tp: lo.offset if lo.offset >= 0 else ends[tp] for tp, lo in found.items()}
    if args.to_offset is not None:
        return {tp: clamp(tp, args.to_offset) for tp in partitions}
    no_offset = [tp for tp in partitions if tp not in committed]
    if no_offset:
        t, p = no_offset[0]
        raise UserError(f"cannot shift partition {t}[{p}]: group {args.group!r} has no committed offset there")
    return {tp: clamp(tp, committed[tp] + args.shift_by) for tp in partitions}


# --- delete --------------------------------------------------------------------------------------------


def delete(args: argparse.Namespace) -> int:
    _named_groups(args)
    failures: list[str] = []
    with open_admin(args) as admin:
        for group in args.groups:
            try:
                admin.delete_groups([group])
            except KafkaError as e:
                failures.append(_delete_failure(group, e))
                continue
            stdout.print(f"deleted consumer group {group!r}")
    if failures:
        raise UserError("; ".join(failures))
    return 0


def _delete_failure(group: str, e: KafkaError) -> str:
    if e.code == ErrorCode.GROUP_ID_NOT_FOUND:
        return f"consumer group {group!r} does not exist"
    if e.code == ErrorCode.NON_EMPTY_GROUP:
        return f"consumer group {group!r} is not empty: it still has members (stop its consumers first)"
    return f"cannot delete consumer group {group!r}: {e}"


def delete_offsets(args: argparse.Namespace) -> int:
    _named_groups(args)
    with open_admin(args) as admin:
        desc = admin.describe_groups([args.group])[args.group]
        committed = admin.list_group_offsets(args.group)
        if not desc.exists and not committed:
            raise UserError(f"consumer group {args.group!r} does not exist")
        rows: list[tuple[str, int, str]] = []
        for topic, parts in args.topic:
            if parts is None:
                parts = tuple(sorted(p for t, p in committed if t == topic))
                if not parts:
                    raise UserError(f"group {args.group!r} has no committed offsets for topic {topic!r}")
            try:
                admin.delete_group_offsets(args.group, topic, parts)
            except KafkaError as e:
                if e.code == ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC:
                    raise UserError(f"group {args.group!r} is still subscribed to topic {topic!r}: its offsets "
                                    "there cannot be deleted while it consumes it") from None  # fmt: skip
                raise
            rows += [(topic, p, "deleted") for p in parts]
    table = Table()
    for col in ("TOPIC", "PARTITION", "STATUS"):
        table.add_column(col, justify="right" if col == "PARTITION" else "left")
    for t, p, status in rows:
        table.add_row(t, str(p), status)
    show(table, args)
    return 0
