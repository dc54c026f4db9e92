"""``groupstream transactions list|describe``: transactional ids as ``kafka-transactions.sh`` shows them
(issue 17). ``list`` asks every broker for the ids it coordinates (columns TRANSACTIONALID, COORDINATOR,
PRODUCERID, TRANSACTIONSTATE, with ``--state``, ``--producer-id``, ``--duration-filter`` (ms) and
``--transactional-id-pattern`` filters); ``describe`` asks the id's coordinator (COORDINATORID,
TRANSACTIONALID, PRODUCERID, PRODUCEREPOCH, TRANSACTIONSTATE, TRANSACTIONTIMEOUTMS, CURRENTTRANSACTIONSTARTTIMEMS,
TRANSACTIONDURATIONMS, TOPICPARTITIONS). Tables on a terminal, plain when piped, ``--format json``.

``abort`` (Kafka's tool writes the abort marker itself with WriteTxnMarkers) is not offered yet: a hanging
transaction is aborted by its coordinator when ``transaction.timeout.ms`` runs out, or by a new producer with
the same transactional.id calling ``init_transactions``."""

from __future__ import annotations

import argparse
import time

from rich.table import Table

from groupstream.cli.common import add_bootstrap, open_admin
from groupstream.cli.errors import UserError
from groupstream.cli.tables import add_format, show
from groupstream.client.admin.transactions import TRANSACTION_STATES
from groupstream.client.errors import KafkaError
from groupstream.protocol.error_codes import ErrorCode


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("transactions", help="list and describe transactional ids (as kafka-transactions.sh)")
    tsub = p.add_subparsers(dest="transactions_command", required=True, metavar="{list,describe}")
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
    for sp in (ls, d):
        add_bootstrap(sp)
        add_format(sp)


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
