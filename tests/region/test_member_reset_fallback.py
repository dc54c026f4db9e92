"""A member that joined after the checkpoint the region resets to resumes its partitions at that checkpoint's cut
even when the merge cannot complete, from the other members' files in the shared checkpoint store.

Member a owns t-0, processes offsets 0..2 and takes checkpoint 1 (its output up to offset 3 is published), then is
killed. Member d joins, gets t-0 and the region resets to checkpoint 1: nobody contributes t-0 to the merge (a is
gone, d has no checkpoint 1), so the merge times out. d used to seek t-0 to its initial offset 0, replaying the
three published records, and committed 0 as the cut; a's file says t-0 resumes at 3.

Both members run on the real control plane of our broker with a fake one-partition consumer, with each checkpoint
store backend (a directory both reach; the control-plane topic)."""

from __future__ import annotations

import threading
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest
from test_member_leave import TP, OnePartitionConsumer

from groupstream.assignment.types import TopicPartition
from groupstream.region.checkpoint_store import (
    CheckpointStore,
    DirectoryCheckpointStore,
    TopicCheckpointStore,
)
from groupstream.region.control_plane import ControlPlane
from groupstream.region.control_records import Command, RegionState
from groupstream.region.file_sink import CheckpointedParquetSink
from groupstream.region.member import MemberConfig, RegionMember
from support.brokers import BrokerProcess
from support.waiting import wait_until

pytestmark = pytest.mark.broker_ours


class SeekRecordingConsumer(OnePartitionConsumer):
    def __init__(self, records: list[SimpleNamespace]) -> None:
        super().__init__(records)
        self.seeks: list[tuple[TopicPartition, int]] = []

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self.seeks.append((tp, offset))


@pytest.mark.parametrize("backend", ["directory", "topic"])
def test_a_member_that_joined_after_the_checkpoint_resumes_a_killed_members_partition_at_the_cut(
    groupstream_broker: BrokerProcess, tmp_path: Path, backend: str
) -> None:
    region = f"fb{uuid.uuid4().hex[:6]}"
    bs = groupstream_broker.bootstrap

    def store_for(plane: ControlPlane) -> CheckpointStore:
        return DirectoryCheckpointStore(tmp_path / "ck") if backend == "directory" else TopicCheckpointStore(plane)

    def start(name: str, consumer: OnePartitionConsumer, plane: ControlPlane) -> tuple[RegionMember, threading.Thread]:
        m = RegionMember(MemberConfig(name, "g", ("t",), reset_timeout_ms=2_000), consumer, plane, store_for(plane),
                         CheckpointedParquetSink(tmp_path / "out", name), lambda r: {"offset": r.offset})  # fmt: skip
        m.start()
        runner = threading.Thread(target=m.run, daemon=True)
        runner.start()
        return m, runner

    with ControlPlane(bs, region) as controller, ControlPlane(bs, region) as plane_a, \
            ControlPlane(bs, region) as plane_d:  # fmt: skip

        def command(seq: int, kind: str, member: str, checkpoint_id: int | None = None, attempt: int = 0) -> None:
            controller.publish(Command(region, seq, kind, checkpoint_id, attempt))
            if kind != "resume":
                wait_until(lambda: controller.read(lambda v: v.answered(seq).get(member)), 15,
                           f"{member}'s answer to the {kind}")  # fmt: skip

        records = [SimpleNamespace(topic="t", partition=0, offset=i, key=None, value=b"v%d" % i) for i in range(3)]
        a, a_runner = start("a", OnePartitionConsumer(records), plane_a)
        try:
            wait_until(lambda: a.core.offsets.snapshot() == {TP: 3}, 10, "a to process its records")
            command(1, "drain", "a", 1)
            command(2, "checkpoint", "a", 1)
            controller.publish(RegionState(region, 1, 1, 0))
            command(3, "resume", "a")
            published = tmp_path / "out" / "part-000000000001-a.parquet"
            wait_until(published.exists, 10, "a to publish checkpoint 1's output (t-0 up to offset 3)")
        finally:
            a.stop()  # killed: it never contributes to a merge again
            a_runner.join(10)

        consumer_d = SeekRecordingConsumer([])
        d, d_runner = start("d", consumer_d, plane_d)
        try:
            wait_until(lambda: consumer_d.seeks == [(TP, 0)], 10, "d's first assignment")
            command(4, "reset", "d", 1, attempt=1)
            ack = controller.read(lambda v: v.answered(4)["d"])
            assert ack.error is None, d.events
            assert any("incomplete" in e for e in d.events), "the merge was meant to time out"
            assert consumer_d.seeks == [(TP, 0), (TP, 3)], d.events
            assert consumer_d.committed_offsets == {TP: 3}, d.events
        finally:
            d.stop()
            d_runner.join(10)
