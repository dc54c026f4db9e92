"""``groupstream transactions list|describe``: transactional ids as ``kafka-transactions.sh`` shows them
(issue 17). ``list`` asks every broker for the ids it coordinates (columns TRANSACTIONALID, COORDINATOR,
PRODUCERID, TRANSACTIONSTATE, with ``--state``, ``--producer-id``, ``--duration-filter`` (ms) and
``--transactional-id-pattern`` filters); ``describe`` asks the id's coordinator (COORDINATORID,
TRANSACTIONALID, PRODUCERID, PRODUCEREPOCH, TRANSACTIONSTATE, TRANSACTIONTIMEOUTMS, CURRENTTRANSACTIONSTARTTIMEMS,
TRANSACTIONDURATIONMS, TOPICPARTITIONS). Tables on a terminal, plain when piped, ``--format json``.

``describe-producers --topic T --partition P [--broker-id N]`` shows a partition's active producers (PRODUCERID,
PRODUCEREPOCH, LATESTCOORDINATOREPOCH, LASTSEQUENCE, LASTTIMESTAMP, CURRENTTRANSACTIONSTARTOFFSET: ``None`` when
no transaction is open), which is how one finds the transaction holding a partition's last stable offset back.
``find-hanging (--broker-id N | --topic T [--partition P]) [--max-transaction-timeout MIN]`` lists open
transactions no coordinator will finish (TOPIC, PARTITION, PRODUCERID, PRODUCEREPOCH, COORDINATOREPOCH,
STARTOFFSET, LASTTIMESTAMP, DURATION(MIN)); ``abort --topic T --partition P --start-offset N`` (or
``--producer-id/--producer-epoch/--coordinator-epoch``) writes such a transaction's ABORT marker at the
partition's leader. A transaction its coordinator still knows is better left to it: the coordinator aborts it
when ``transaction.timeout.ms`` runs out, or when a new producer with the same transactional.id initialises."""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from rich.table import Table

from groupstream.cli.common import add_bootstrap, non_negative_int, open_admin
from groupstream.cli.errors import UserError
from groupstream.cli.tables import add_format, show
from groupstream.client.admin import Admin
from groupstream.client.admin.transactions import TRANSACTION_STATES, AbortTransactionSpec, ProducerState
from groupstream.client.errors import KafkaError
from groupstream.protocol.error_codes import ErrorCode


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "transactions",
        help="transactional ids, partitions' producers and hanging transactions (as kafka-transactions.sh)",
    )
    tsub = p.add_subparsers(
        dest="transactions_command",
        required=True,
        metavar="{list,describe,describe-producers,find-hanging,abort}",
    )
    ls = tsub.add_parser("list", help="transactional ids every broker coordinates")
    ls.add_argument("--state", action="append", type=_state, default=None, metavar="STATE",
                    help=f"only ids in this state ({', '.join(TRANSACTION_STATES)}; repeatable, any case)")  # fmt: skip
    ls.add_argument("--producer-id", action="append", type=int, default=None, metavar="ID",
                    help="only ids of this producer id (repeatable)")  # fmt: skip
    ls.add_argument("--duration-filter", type=int, default=None, metavar="MS",
                    help="only transactions open longer than this many milliseconds")  # fmt: skip
    ls.add_argument("--transactional-id-pattern", default=None, metavar="REGEX",
                    help="only ids matching this regular expression")  # fmt: skip
    ls.set_defaults(func=list_, command_name="transactions list")
    d = tsub.add_parser("describe", help="state, producer, timeout and partitions of a transactional id")
    d.add_argument("--transactional-id", required=True, action="append", metavar="ID",
                   help="the transactional id (repeatable)")  # fmt: skip
    d.set_defaults(func=describe, command_name="transactions describe")
    dp = tsub.add_parser("describe-producers", help="the active producers of a partition")
    dp.add_argument("--topic", required=True, help="topic name")
    dp.add_argument("--partition", required=True, type=non_negative_int, help="partition number")
    dp.add_argument("--broker-id", type=non_negative_int, default=None, metavar="ID",
                    help="ask this replica instead of the partition's leader")  # fmt: skip
    dp.set_defaults(func=describe_producers, command_name="transactions describe-producers")
    fh = tsub.add_parser("find-hanging", help="open transactions no transaction coordinator will finish")
    fh.add_argument("--broker-id", type=non_negative_int, default=None, metavar="ID",
                    help="search the partitions this broker holds a replica of")  # fmt: skip
    fh.add_argument("--topic", default=None, help="search this topic only")
    fh.add_argument(
        "--partition", type=non_negative_int, default=None, help="search this partition of --topic"
    )
    fh.add_argument("--max-transaction-timeout", type=non_negative_int, default=15, metavar="MIN",
                    help="the longest transaction timeout in minutes (default 15): transactions whose producer "
                         "wrote last longer ago are candidates")  # fmt: skip
    fh.set_defaults(func=find_hanging, command_name="transactions find-hanging")
    ab = tsub.add_parser("abort", help="write the ABORT marker of a hanging transaction on a partition")
    ab.add_argument("--topic", required=True, help="topic name")
    ab.add_argument("--partition", required=True, type=non_negative_int, help="partition number")
    ab.add_argument("--start-offset", type=non_negative_int, default=None, metavar="OFFSET",
                    help="start offset of the transaction to abort (as describe-producers shows it)")  # fmt: skip
    ab.add_argument("--producer-id", type=non_negative_int, default=None, metavar="ID",
                    help="without --start-offset: the transaction's producer id")  # fmt: skip
    ab.add_argument("--producer-epoch", type=non_negative_int, default=None, metavar="EPOCH",
                    help="with --producer-id: its producer epoch")  # fmt: skip
    ab.add_argument("--coordinator-epoch", type=int, default=None, metavar="EPOCH",
                    help="with --producer-id: its coordinator epoch (below 0 means 0)")  # fmt: skip
    ab.set_defaults(func=abort, command_name="transactions abort")
    for sp in (ls, d, dp, fh):
        add_bootstrap(sp)
        add_format(sp)
    add_bootstrap(ab)


def _state(text: str) -> str:
    for s in TRANSACTION_STATES:
        if s.lower() == text.strip().lower():
            return s
    raise argparse.ArgumentTypeError(f"unknown state {text!r}: choose from {', '.join(TRANSACTION_STATES)}")


def list_(args: argparse.Namespace) -> int:
    with open_admin(args) as admin:
        listed = admin.list_transactions(
            args.state, args.producer_id, duration_ms=args.duration_filter,
            transactional_id_pattern=args.transactional_id_pattern,
        )  # fmt: skip
    n = len(listed)
    table = Table(title=f"{n} transactional id{'s' if n != 1 else ''} on {args.bootstrap_server}")
    for col in ("TRANSACTIONALID", "COORDINATOR", "PRODUCERID", "TRANSACTIONSTATE"):
        table.add_column(col)
    for t in listed:
        table.add_row(t.transactional_id, str(t.coordinator_id), str(t.producer_id), t.state)
    show(table, args)
    return 0


def describe(args: argparse.Namespace) -> int:
    now = int(time.time() * 1000)
    with open_admin(args) as admin:
        try:
            described = admin.describe_transactions(args.transactional_id)
        except KafkaError as e:
            if e.code == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND:
                raise UserError(f"{e.resource or 'the transactional id'} does not exist") from None
            raise
    table = Table(title=f"transactions on {args.bootstrap_server}")
    for col in ("COORDINATORID", "TRANSACTIONALID", "PRODUCERID", "PRODUCEREPOCH", "TRANSACTIONSTATE",
                "TRANSACTIONTIMEOUTMS", "CURRENTTRANSACTIONSTARTTIMEMS", "TRANSACTIONDURATIONMS",
                "TOPICPARTITIONS"):  # fmt: skip
        table.add_column(col)
    for tid in args.transactional_id:
        t = described[tid]
        start = t.start_time_ms
        table.add_row(
            str(t.coordinator_id), t.transactional_id, str(t.producer_id), str(t.producer_epoch), t.state,
            str(t.timeout_ms), "-" if start is None else str(start), "-" if start is None else str(max(0, now - start)),
            ",".join(f"{topic}-{p}" for topic, p in t.partitions) or "-",
        )  # fmt: skip
    show(table, args)
    return 0


def _unknown_partition(e: KafkaError, topic: str, partition: int) -> UserError | None:
    if e.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
        return UserError(f"topic {topic!r} has no partition {partition} (or does not exist)")
    if e.code == ErrorCode.NOT_LEADER_OR_FOLLOWER:
        return UserError(f"the broker asked holds no replica of {topic}[{partition}]")
    return None


def _producers_of(
    args: argparse.Namespace, admin: Admin, broker_id: int | None = None
) -> list[ProducerState]:
    tp = (args.topic, args.partition)
    try:
        return admin.describe_producers([tp], broker_id=broker_id)[tp]
    except KafkaError as e:
        raise (_unknown_partition(e, *tp) or e) from None


def describe_producers(args: argparse.Namespace) -> int:
    with open_admin(args) as admin:
        producers = _producers_of(args, admin, args.broker_id)
    table = Table(title=f"producers of {args.topic}[{args.partition}] on {args.bootstrap_server}")
    for col in ("PRODUCERID", "PRODUCEREPOCH", "LATESTCOORDINATOREPOCH", "LASTSEQUENCE", "LASTTIMESTAMP",
                "CURRENTTRANSACTIONSTARTOFFSET"):  # fmt: skip
        table.add_column(col)
    for p in producers:
        table.add_row(
            str(p.producer_id), str(p.producer_epoch), str(p.coordinator_epoch), str(p.last_sequence),
            str(p.last_timestamp), "None" if p.txn_start_offset is None else str(p.txn_start_offset),
        )  # fmt: skip
    show(table, args)
    return 0


def find_hanging(args: argparse.Namespace) -> int:
    if args.topic is None and args.broker_id is None:
        raise UserError("find-hanging needs --topic or --broker-id to limit the search")
    if args.partition is not None and args.topic is None:
        raise UserError("--partition needs --topic")
    now = int(time.time() * 1000)
    with open_admin(args) as admin:
        if args.topic is not None and args.topic not in admin.list_topics(include_internal=True):
            raise UserError(f"topic {args.topic!r} does not exist")
        try:
            hanging = admin.find_hanging_transactions(
                topic=args.topic, partition=args.partition, broker_id=args.broker_id,
                max_transaction_timeout_ms=args.max_transaction_timeout * 60_000, now_ms=now,
            )  # fmt: skip
        except KafkaError as e:
            if args.topic is not None and args.partition is not None:
                raise (_unknown_partition(e, args.topic, args.partition) or e) from None
            raise
    n = len(hanging)
    table = Table(title=f"{n} hanging transaction{'s' if n != 1 else ''} on {args.bootstrap_server}")
    for col in ("TOPIC", "PARTITION", "PRODUCERID", "PRODUCEREPOCH", "COORDINATOREPOCH", "STARTOFFSET",
                "LASTTIMESTAMP", "DURATION(MIN)"):  # fmt: skip
        table.add_column(col)
    for h in hanging:
        p = h.producer
        table.add_row(
            h.topic, str(h.partition), str(p.producer_id), str(p.producer_epoch), str(p.coordinator_epoch),
            str(p.txn_start_offset), str(p.last_timestamp), str(max(0, now - p.last_timestamp) // 60_000),
        )  # fmt: skip
    show(table, args)
    return 0


def abort(args: argparse.Namespace) -> int:
    tp = f"{args.topic}[{args.partition}]"
    if args.start_offset is None and args.producer_id is None:
        raise UserError("name the transaction to abort with --start-offset, or with --producer-id, "
                        "--producer-epoch and --coordinator-epoch")  # fmt: skip
    if args.start_offset is not None and args.producer_id is not None:
        raise UserError("give --start-offset or --producer-id, not both")
    with open_admin(args) as admin:
        if args.start_offset is None:
            for flag, value in (("--producer-epoch", args.producer_epoch),
                                ("--coordinator-epoch", args.coordinator_epoch)):  # fmt: skip
                if value is None:
                    raise UserError(f"--producer-id needs {flag}")
            spec = AbortTransactionSpec(args.topic, args.partition, args.producer_id, args.producer_epoch,
                                        max(0, args.coordinator_epoch))  # fmt: skip
        else:
            found = [p for p in _producers_of(args, admin) if p.txn_start_offset == args.start_offset]
            if not found:
                raise UserError(f"no open transaction starts at offset {args.start_offset} of {tp}")
            p = found[0]
            spec = AbortTransactionSpec(args.topic, args.partition, p.producer_id, p.producer_epoch,
                                        max(0, p.coordinator_epoch))  # fmt: skip
        try:
            admin.abort_transaction(spec)
        except KafkaError as e:
            raise (_unknown_partition(e, args.topic, args.partition) or _refused(e, spec) or e) from None
    print(f"aborted the transaction of producer {spec.producer_id} (epoch {spec.producer_epoch}) on {tp}",
          flush=True)  # fmt: skip
    return 0


def _refused(e: KafkaError, spec: AbortTransactionSpec) -> UserError | None:
    why: dict[int, Callable[[], str]] = {
        ErrorCode.INVALID_PRODUCER_EPOCH: lambda: f"producer epoch {spec.producer_epoch} is not the producer's",
        ErrorCode.TRANSACTION_COORDINATOR_FENCED:
            lambda: f"coordinator epoch {spec.coordinator_epoch} is older than the partition's last marker",
        ErrorCode.CLUSTER_AUTHORIZATION_FAILED: lambda: "aborting needs ClusterAction on the cluster",
    }  # fmt: skip
    return UserError(f"the leader refused the abort: {why[e.code]()}") if e.code in why else None
