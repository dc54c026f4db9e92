"""``groupstream topics create|list|describe|delete|add-partitions``: topic administration with rich tables."""

from __future__ import annotations

import argparse

from rich.table import Table

from groupstream.cli.common import add_bootstrap, open_admin, parse_key_values, positive_int, stdout
from groupstream.cli.errors import UserError
from groupstream.cli.tables import add_format, show
from groupstream.client.admin import NewTopic
from groupstream.client.errors import KafkaError
from groupstream.protocol.error_codes import ErrorCode


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("topics", help="create, list, describe, delete topics and add partitions")
    tsub = p.add_subparsers(dest="topics_command", required=True, metavar="{create,list,describe,delete,add-partitions}")

    c = tsub.add_parser("create", help="create a topic")
    c.add_argument("topic")
    c.add_argument("--partitions", type=positive_int, default=None, help="partition count (default: the broker's)")
    c.add_argument("--replication-factor", type=positive_int, default=None,
                   help="replication factor (default: the broker's)")
    c.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                   help="topic config by its Kafka name, e.g. retention.ms=60000 (repeatable)")
    c.add_argument("--if-not-exists", action="store_true", help="succeed if the topic already exists")
    c.add_argument("--validate-only", action="store_true", help="check the request without creating the topic")
    c.set_defaults(func=create, command_name="topics create")

    ls = tsub.add_parser("list", help="list topics")
    ls.add_argument("--internal", action="store_true", help="include internal topics (__consumer_offsets)")
    ls.set_defaults(func=list_, command_name="topics list")

    d = tsub.add_parser("describe", help="partitions, leaders, topic id and configs of topics")
    d.add_argument("topics", nargs="+", metavar="topic")
    d.add_argument("--all-configs", action="store_true", help="show every config, not just the overrides")
    d.set_defaults(func=describe, command_name="topics describe")

    rm = tsub.add_parser("delete", help="delete topics")
    rm.add_argument("topics", nargs="+", metavar="topic")
    rm.add_argument("--if-exists", action="store_true", help="succeed if a topic does not exist")
    rm.set_defaults(func=delete, command_name="topics delete")

    ap = tsub.add_parser("add-partitions", help="grow a topic to a larger partition count")
    ap.add_argument("topic")
    ap.add_argument("--partitions", type=positive_int, required=True, help="the new total partition count")
    ap.set_defaults(func=add_partitions, command_name="topics add-partitions")

    for sp in (c, ls, d, rm, ap):
        add_bootstrap(sp)
        add_format(sp)


def create(args: argparse.Namespace) -> int:
    configs = parse_key_values(args.config, "--config")
    spec = NewTopic(
        args.topic,
        num_partitions=args.partitions or -1,
        replication_factor=args.replication_factor or -1,
        config=configs,
    )
    with open_admin(args) as admin:
        try:
            created = admin.create_topics([spec], validate_only=args.validate_only)[args.topic]
        except KafkaError as e:
            if e.code == ErrorCode.TOPIC_ALREADY_EXISTS and args.if_not_exists:
                stdout.print(f"topic {args.topic!r} already exists")
                return 0
            raise
    verb = "would create" if args.validate_only else "created"
    parts = f"{created.num_partitions} partition{'s' if created.num_partitions != 1 else ''}"
    extra = f", configs {', '.join(f'{k}={v}' for k, v in sorted(configs.items()))}" if configs else ""
    stdout.print(f"{verb} topic {args.topic!r} with {parts}{extra}")
    return 0


def list_(args: argparse.Namespace) -> int:
    with open_admin(args) as admin:
        topics = admin.list_topics(include_internal=args.internal)
    table = Table(title=f"{len(topics)} topic{'s' if len(topics) != 1 else ''} on {args.bootstrap_server}")
    table.add_column("topic")
    table.add_column("partitions", justify="right")
    table.add_column("topic id")
    for t in topics.values():
        table.add_row(t.name, str(t.partition_count), str(t.topic_id) if t.topic_id else "-")
    show(table, args)
    return 0


def describe(args: argparse.Namespace) -> int:
    with open_admin(args) as admin:
        descs = admin.describe_topics(args.topics)
        configs = {name: admin.describe_configs(name) for name in args.topics}
        ends = admin.list_offsets({(name, p.partition): "latest" for name, d in descs.items() for p in d.partitions})
        starts = admin.list_offsets(
            {(name, p.partition): "earliest" for name, d in descs.items() for p in d.partitions}
        )
    for name, desc in descs.items():
        table = Table(title=f"topic {name}  (id {desc.topic_id or '-'}, {desc.partition_count} partitions)")
        for col in ("partition", "leader", "replicas", "isr", "start offset", "end offset"):
            table.add_column(col, justify="right" if col != "replicas" and col != "isr" else "left")
        for p in desc.partitions:
            table.add_row(
                str(p.partition),
                str(p.leader),
                ",".join(map(str, p.replicas)),
                ",".join(map(str, p.isr)),
                str(starts[(name, p.partition)].offset),
                str(ends[(name, p.partition)].offset),
            )
        show(table, args)
        shown = [c for c in configs[name].values() if args.all_configs or not c.is_default]
        if shown:
            ct = Table(title=f"configs of {name}" + ("" if args.all_configs else " (overrides)"))
            ct.add_column("name")
            ct.add_column("value")
            ct.add_column("source")
            for c in shown:
                ct.add_row(c.name, "(sensitive)" if c.is_sensitive else str(c.value), c.source)
            show(ct, args)
        elif not args.all_configs:
            stdout.print(f"configs of {name}: all defaults (--all-configs shows them)")
    return 0


def delete(args: argparse.Namespace) -> int:
    with open_admin(args) as admin:
        names = list(args.topics)
        if args.if_exists:
            existing = admin.list_topics(include_internal=True)
            names = [n for n in names if n in existing]
        if names:
            admin.delete_topics(names)
    for n in args.topics:
        stdout.print(f"deleted topic {n!r}" if n in names else f"topic {n!r} does not exist")
    return 0


def add_partitions(args: argparse.Namespace) -> int:
    with open_admin(args) as admin:
        before = admin.describe_topics([args.topic])[args.topic].partition_count
        if args.partitions <= before:
            raise UserError(f"topic {args.topic!r} already has {before} partitions; --partitions must be larger")
        admin.create_partitions(args.topic, args.partitions)
    stdout.print(f"topic {args.topic!r} now has {args.partitions} partitions (was {before})")
    return 0
