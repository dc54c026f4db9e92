"""``groupstream region member|controller``: the consistent region of seed 000 as processes.

``region member`` runs one group consumer operator (event thread and process thread, see
`groupstream.region.member`) on our consumer: it joins ``--group`` for ``--topic``, writes every record it
processes to the region's Parquet table ``--output`` through a sink that publishes per complete checkpoint,
keeps its checkpoints in ``--checkpoints``, and follows the region controller's commands on the control plane
(a compacted topic on the same brokers). ``region controller`` runs the controller: drain/checkpoint cycles
every ``--period-ms`` and resets after failures. Every member prints what happens to it as JSON lines (its
resets, the offsets it seeks to, its checkpoints), which is the operators' log the tests read.

SIGTERM or Ctrl-C stops a member cleanly: it deregisters from the region (the controller stops waiting for
it) and leaves the group.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

from groupstream.cli.common import positive_int

__all__ = ["add_parser"]


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("region", help="run consistent-region members and their controller (seed 000)")
    rsub = p.add_subparsers(dest="region_command", required=True, metavar="{member,controller}")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--bootstrap-server", default="127.0.0.1:9092", metavar="HOST:PORT")
    common.add_argument("--region", required=True, help="the region's name (letters, digits, _ . -)")
    common.add_argument("--group", required=True, help="the consumer group the region's members share")
    common.add_argument("--reset-timeout-ms", type=positive_int, default=30_000)
    m = rsub.add_parser("member", parents=[common], help="run one group consumer operator of the region")
    m.add_argument("--topic", action="append", required=True, help="a topic to consume (repeatable)")
    m.add_argument("--member", required=True, help="this operator's name in the region")
    m.add_argument("--output", type=Path, required=True,
                   help="the region's output table (a directory); with --output-topic, where the member records "
                        "its prepared transactions (one directory all members share)")  # fmt: skip
    m.add_argument("--output-topic", metavar="TOPIC",
                   help="write the output to this Kafka topic in transactions committed per complete checkpoint "
                        "(exactly once for read_committed readers) instead of a Parquet table")  # fmt: skip
    m.add_argument("--format", choices=("parquet", "delta"), default="parquet",
                   help="the output table's format: Parquet files (exactly once for readers that follow the "
                        "region's ledger) or a Delta table, whose log every reader follows (default parquet)")  # fmt: skip
    m.add_argument("--checkpoints", type=Path, required=True,
                   help="where operator checkpoints are kept: one directory all members of the region share")  # fmt: skip
    m.add_argument("--start-position", default="beginning",
                   help="beginning, end, committed, or a timestamp in ms (default beginning)")  # fmt: skip
    m.add_argument("--max-poll-records", type=positive_int, default=500)
    m.add_argument("--index", type=int, default=0, help="the region index (every member must give the same)")
    m.set_defaults(func=run_member, command_name="region member")
    c = rsub.add_parser("controller", parents=[common], help="run the region's controller")
    c.add_argument("--period-ms", type=positive_int, default=5_000, help="checkpoint period (default 5000)")
    c.set_defaults(func=run_controller, command_name="region controller")


def _say(**fields: Any) -> None:
    print(json.dumps(fields, sort_keys=True, default=str), flush=True)


class _Log(list[str]):
    """The member's event list, printed as it grows."""

    def __init__(self, member: str) -> None:
        super().__init__()
        self.member = member

    def append(self, event: str) -> None:
        super().append(event)
        _say(member=self.member, event=event)


def _stop_on_signals(stop: threading.Event) -> None:
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())


def run_member(args: argparse.Namespace) -> int:
    from groupstream.region.checkpoint_store import DirectoryCheckpointStore
    from groupstream.region.consumer_adapter import ConsumerAdapter
    from groupstream.region.control_plane import ControlPlane
    from groupstream.region.control_records import MemberRegistration
    from groupstream.region.file_sink import CheckpointedParquetSink
    from groupstream.region.kafka_output import KafkaCheckpointedSink
    from groupstream.region.member import MemberConfig, RegionMember

    stop = threading.Event()
    _stop_on_signals(stop)
    config = MemberConfig(member_id=args.member, group=args.group, topics=tuple(args.topic),
                          region_index=args.index, start_position=args.start_position,
                          max_poll_records=args.max_poll_records, reset_timeout_ms=args.reset_timeout_ms)  # fmt: skip
    consumer = ConsumerAdapter({"bootstrap.servers": args.bootstrap_server, "group.id": args.group,
                                "client.id": f"region-{args.member}", "max.poll.records": args.max_poll_records,
                                "session.timeout.ms": 10_000, "heartbeat.interval.ms": 1_000})  # fmt: skip
    plane = ControlPlane(args.bootstrap_server, args.region).start()
    sink: CheckpointedParquetSink | KafkaCheckpointedSink
    if args.output_topic:
        sink = KafkaCheckpointedSink({"bootstrap.servers": args.bootstrap_server}, args.output_topic, args.output,
                                     args.member, prefix=f"groupstream-region-{args.region}")  # fmt: skip
    else:
        sink = CheckpointedParquetSink(args.output, args.member, delta=args.format == "delta")
    member = RegionMember(config, consumer, plane, DirectoryCheckpointStore(args.checkpoints), sink, _identity)
    member.events = _Log(args.member)
    try:
        member.start()
        _say(member=args.member, event="started")
        member.run(until=stop.is_set)
    except RuntimeError as e:  # the operator must restart (seed 000): its supervisor starts it again
        _say(member=args.member, event="restart", reason=str(e))
        return 3
    finally:
        member.stop()
        if isinstance(sink, KafkaCheckpointedSink):
            sink.close()  # the open interval's transaction is aborted: its records are read again after a restart
        plane.publish(MemberRegistration(plane.region, args.group, args.member, None))  # deregister
        consumer.close()
        plane.close()
        _say(member=args.member, event="stopped")
    return 0


def _identity(record: Any) -> dict[str, Any]:
    return {"topic": record.topic, "partition": record.partition, "offset": record.offset, "key": record.key,
            "value": record.value}  # fmt: skip


def run_controller(args: argparse.Namespace) -> int:
    from groupstream.region.control_plane import ControlPlane
    from groupstream.region.controller_runtime import ControllerRuntime

    stop = threading.Event()
    _stop_on_signals(stop)
    with ControlPlane(args.bootstrap_server, args.region) as plane:
        runtime = ControllerRuntime(plane, args.group, period_ms=args.period_ms, reset_timeout_ms=args.reset_timeout_ms)
        _say(controller=args.region, event="started")
        while not stop.is_set():
            for command in runtime.step(0.5):
                _say(controller=args.region, event="command", kind=command.kind, seq=command.seq,
                     checkpoint=command.checkpoint_id, attempt=command.attempt, at_ms=time.time_ns() // 1_000_000)  # fmt: skip
    sys.stdout.flush()
    return 0
