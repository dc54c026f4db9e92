"""A member's reset commits the cut it reset to, so the group's committed offsets do not stay where a failed
cycle's drain left them (beyond the published output); a refused commit answers the reset with an error.

The member runs on the real control plane of our broker; the consumer is a fake with one partition whose
commits are kept in memory."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from test_member_leave import TP, OnePartitionConsumer

from groupstream.region.checkpoint_store import DirectoryCheckpointStore
from groupstream.region.control_plane import ControlPlane
from groupstream.region.control_records import Ack, Command, RegionState
from groupstream.region.file_sink import CheckpointedParquetSink
from groupstream.region.member import MemberConfig, RegionMember
from support.brokers import BrokerProcess
from support.waiting import wait_until

pytestmark = pytest.mark.broker_ours


class FeedableConsumer(OnePartitionConsumer):
    """More records can be fed; commits can be refused as a group refuses them while it rebalances."""

    def __init__(self) -> None:
        super().__init__([])
        self.refuse: str | None = None
        self._feed_lock = threading.Lock()

    def feed(self, offsets: range) -> None:
        with self._feed_lock:
            self._records = [*self._records,
                             *(SimpleNamespace(topic="t", partition=0, offset=i, key=None, value=b"v%d" % i)
                               for i in offsets)]  # fmt: skip

    def poll(self, timeout_s: float) -> list[Any]:
        with self._feed_lock:
            if self._records:
                out, self._records = self._records, []
                return out
        return super().poll(timeout_s)

    def commit_sync(self, offsets: Mapping[Any, int]) -> None:
        if self.refuse is not None:
            raise RuntimeError(self.refuse)
        super().commit_sync(offsets)


def test_a_reset_commits_the_cut_and_a_refused_commit_fails_the_reset(
    groupstream_broker: BrokerProcess, tmp_path: Path
) -> None:
    region = f"cut{uuid.uuid4().hex[:6]}"
    consumer = FeedableConsumer()
    with ControlPlane(groupstream_broker.bootstrap, region) as controller, \
            ControlPlane(groupstream_broker.bootstrap, region) as plane:  # fmt: skip
        member = RegionMember(MemberConfig("a", "g", ("t",), reset_timeout_ms=8_000), consumer, plane,
                              DirectoryCheckpointStore(tmp_path / "ck"), CheckpointedParquetSink(tmp_path / "out", "a"),
                              lambda r: {"offset": r.offset})  # fmt: skip
        member.start()
        runner = threading.Thread(target=member.run, daemon=True)
        runner.start()

        def command(seq: int, kind: str, checkpoint_id: int | None = None, attempt: int = 0) -> Ack | None:
            controller.publish(Command(region, seq, kind, checkpoint_id, attempt))
            if kind == "resume":
                return None
            wait_until(lambda: controller.read(lambda v: v.answered(seq).get("a")), 10, f"the {kind} ack")
            ack: Ack | None = controller.read(lambda v: v.answered(seq).get("a"))
            return ack

        try:
            consumer.feed(range(3))
            wait_until(lambda: member.core.offsets.snapshot() == {TP: 3}, 10, "the records to be processed")
            command(1, "drain", 1)
            command(2, "checkpoint", 1)
            controller.publish(RegionState(region, 1, 1, 0))
            command(3, "resume")
            consumer.feed(range(3, 6))
            wait_until(lambda: member.core.offsets.snapshot() == {TP: 6}, 10, "more records to be processed")
            command(4, "drain", 2)
            assert consumer.committed_offsets == {TP: 6}  # beyond checkpoint 1, whose output ends at 3
            # checkpoint 2 fails: the region resets to checkpoint 1
            ack = command(5, "reset", 1, attempt=1)
            assert ack is not None and ack.error is None, member.events
            assert consumer.committed_offsets == {TP: 3}, member.events
            assert "committed the cut {t-0: 3}" in member.events

            consumer.refuse = "CommitFailedError: the group is rebalancing"
            ack = command(6, "reset", 1, attempt=2)
            assert ack is not None and ack.error == (
                "the commit of the cut failed: RuntimeError: CommitFailedError: the group is rebalancing"
            )
            consumer.refuse = None
            ack = command(7, "reset", 1, attempt=3)  # the controller's next attempt
            assert ack is not None and ack.error is None
            assert consumer.committed_offsets == {TP: 3}
        finally:
            member.stop()
            runner.join(10)
