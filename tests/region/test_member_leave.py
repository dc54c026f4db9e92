"""A member asked to leave (SIGTERM) in the middle of a checkpoint cycle stays until the controller resolves the
cycle: its drain committed offsets beyond its published output, and the output it prepared for the checkpoint
is published by the resume (or discarded by a reset). Leaving at once, that output would never be published
while the region resumes its partitions after it: records lost.

The member runs on the real control plane of our broker; the consumer is a fake with one partition."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pyarrow.parquet as pq
import pytest

from groupstream.assignment.types import TopicPartition
from groupstream.region.checkpoint_store import DirectoryCheckpointStore
from groupstream.region.control_plane import ControlPlane
from groupstream.region.control_records import Command, RegionState
from groupstream.region.file_sink import CheckpointedParquetSink
from groupstream.region.member import MemberConfig, RegionMember
from support.brokers import BrokerProcess
from support.waiting import wait_until

pytestmark = pytest.mark.broker_ours

TP = TopicPartition("t", 0)


class OnePartitionConsumer:
    """Assigns ``t-0`` in the first poll, then returns ``records`` once; commits are kept in memory."""

    def __init__(self, records: list[Any]) -> None:
        self._records = records
        self._on_assigned: Callable[[frozenset[TopicPartition]], None] | None = None
        self._assigned = False
        self._idle = threading.Event()  # never set: an empty poll blocks for its timeout, as a real one does
        self.committed_offsets: dict[TopicPartition, int] = {}

    def subscribe(self, topics: list[str], on_revoked: Callable[[frozenset[TopicPartition]], None],
                  on_assigned: Callable[[frozenset[TopicPartition]], None]) -> None:  # fmt: skip
        self._on_assigned = on_assigned

    def poll(self, timeout_s: float) -> list[Any]:
        if not self._assigned and self._on_assigned is not None:
            self._assigned = True
            self._on_assigned(frozenset({TP}))
            return []
        out, self._records = self._records, []
        if not out:
            self._idle.wait(timeout_s)
        return out

    def serve(self) -> None:
        pass

    def seek(self, tp: TopicPartition, offset: int) -> None:
        pass

    def commit_sync(self, offsets: Mapping[TopicPartition, int]) -> None:
        self.committed_offsets.update(offsets)

    def committed(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        wanted = set(partitions)
        return {tp: o for tp, o in self.committed_offsets.items() if tp in wanted}

    def partitions_of(self, topics: Iterable[str]) -> frozenset[TopicPartition]:
        return frozenset({TP})

    def start_offsets(self, partitions: Iterable[TopicPartition], position: str) -> dict[TopicPartition, int]:
        return dict.fromkeys(partitions, 0)

    def close(self) -> None:
        pass


def test_a_member_asked_to_leave_after_its_checkpoint_publishes_it_before_going(
    groupstream_broker: BrokerProcess, tmp_path: Path
) -> None:
    region = f"leave{uuid.uuid4().hex[:6]}"
    records = [
        SimpleNamespace(topic="t", partition=0, offset=i, key=None, value=b"v%d" % i) for i in range(3)
    ]
    with ControlPlane(groupstream_broker.bootstrap, region) as controller, \
            ControlPlane(groupstream_broker.bootstrap, region) as plane:  # fmt: skip
        sink = CheckpointedParquetSink(tmp_path / "out", "a")
        member = RegionMember(MemberConfig("a", "g", ("t",), reset_timeout_ms=60_000), OnePartitionConsumer(records),
                              plane, DirectoryCheckpointStore(tmp_path / "ck"), sink,
                              lambda r: {"offset": r.offset})  # fmt: skip
        member.start()
        leave = threading.Event()
        runner = threading.Thread(target=member.run, kwargs={"until": leave.is_set}, daemon=True)
        runner.start()
        try:
            wait_until(lambda: member.core.offsets.snapshot() == {TP: 3}, 10, "the records to be processed")

            def command(seq: int, kind: str, checkpoint_id: int | None = None) -> None:
                controller.publish(Command(region, seq, kind, checkpoint_id))
                if kind != "resume":
                    wait_until(
                        lambda: controller.read(lambda v: v.answered(seq).get("a")), 10, f"the {kind} ack"
                    )

            command(1, "drain", 1)
            command(2, "checkpoint", 1)
            assert sink.has_prepared()
            leave.set()  # SIGTERM: the checkpoint is taken, the controller's resume has not come yet
            wait_until(
                lambda: "leaving after the cycle under way (DRAINED)" in member.events,
                10,
                "the member to wait",
            )
            assert runner.is_alive()
            assert list((tmp_path / "out").glob("part-*.parquet")) == []
            controller.publish(RegionState(region, 1, 1, 0))  # the controller: checkpoint 1 is complete
            command(3, "resume")
            runner.join(10)
            assert not runner.is_alive(), member.events
            files = list((tmp_path / "out").glob("part-*.parquet"))
            assert [f.name for f in files] == ["part-000000000001-a.parquet"]
            assert pq.read_table(files[0]).column("offset").to_pylist() == [0, 1, 2]
            assert not sink.has_prepared()
        finally:
            member.stop()
            runner.join(10)
