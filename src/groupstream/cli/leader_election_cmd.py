"""``groupstream leader-election``: Kafka's ``kafka-leader-election.sh``, plus ``--group`` to name a group's
coordinator partition instead of working it out.

On our one-node broker every data partition is already led by its preferred replica; electing an
``__consumer_offsets`` partition moves that group coordinator (its shard is unloaded and loaded again), so
its members see NOT_COORDINATOR, find the coordinator again and carry on: a coordinator failover on demand.
Against a Kafka cluster the command does what Kafka's does.
"""

from __future__ import annotations

import argparse

from groupstream.broker.group_routing import partition_for
from groupstream.broker.offsets_topic import OFFSETS_TOPIC
from groupstream.cli.common import add_bootstrap, non_negative_int, open_admin, stdout
from groupstream.cli.errors import UserError
from groupstream.protocol.error_codes import ErrorCode


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("leader-election", help="elect partition leaders; on our broker, move a group coordinator")
    add_bootstrap(p)
    p.add_argument("--election-type", choices=("preferred", "unclean"), default="preferred", type=str.lower,
                   help="preferred (default) or unclean")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--topic", help="the topic whose partition to elect (with --partition)")
    which.add_argument("--group", help="the __consumer_offsets partition coordinating this group")
    p.add_argument("--partition", type=non_negative_int, help="the partition number (with --topic)")
    p.set_defaults(func=run, command_name="leader-election")


def run(args: argparse.Namespace) -> int:
    if args.topic is not None and args.partition is None:
        raise UserError("--topic needs --partition")
    if args.group is not None and args.partition is not None:
        raise UserError("--partition goes with --topic, not with --group")
    with open_admin(args) as admin:
        if args.group is not None:
            offsets = admin.describe_topics([OFFSETS_TOPIC]).get(OFFSETS_TOPIC)
            if offsets is None or not offsets.partitions:
                raise UserError(f"the broker has no {OFFSETS_TOPIC} topic yet")
            target = (OFFSETS_TOPIC, partition_for(args.group, len(offsets.partitions)))
        else:
            target = (args.topic, args.partition)
        results = admin.elect_leaders([target], args.election_type)
    kind = args.election_type.upper()
    failed = 0
    for (topic, partition), error in sorted(results.items()):
        name = f"{topic}-{partition}"
        if error is None:
            stdout.print(f"Successfully completed leader election ({kind}) for partitions {name}")
        elif error.code == ErrorCode.ELECTION_NOT_NEEDED:
            stdout.print(f"Valid replica already elected for partitions {name}")
        else:
            failed += 1
            stdout.print(f"Error completing leader election ({kind}) for partition: {name}: {error}")
    return 1 if failed else 0
