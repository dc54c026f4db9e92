"""The control plane on a real topic of our broker: what one member publishes the others read, merges
complete across members, a restarted member rebuilds the same view from the log, and the checkpoint stores."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from groupstream.assignment.types import TopicPartition
from groupstream.region.checkpoint_store import DirectoryCheckpointStore, TopicCheckpointStore
from groupstream.region.control_plane import ControlPlane
from groupstream.region.control_records import InitialOffsets, MemberRegistration, MergeContribution
from groupstream.region.merge import MergeKey
from support.brokers import BrokerProcess

pytestmark = pytest.mark.broker_ours

P = [TopicPartition("t", i) for i in range(3)]


def test_members_see_each_other_and_merges_complete_across_them(groupstream_broker: BrokerProcess) -> None:
    bs = groupstream_broker.bootstrap
    with ControlPlane(bs, "r1") as a, ControlPlane(bs, "r1") as b:
        a.publish(MemberRegistration("r1", "g", "a", 0))
        b.publish(MemberRegistration("r1", "g", "b", 0))
        assert a.wait_for(lambda v: v.members("g") if len(v.members("g")) == 2 else None, 10) == {"a": 0, "b": 0}
        a.publish(InitialOffsets("r1", "g", "a", {P[0]: 1}))
        b.publish(InitialOffsets("r1", "g", "b", {P[0]: 2}))
        assert b.read(lambda v: v.initial_offsets("g")) == {P[0]: 1}  # a was first in the log
        key = MergeKey(5, 1)
        a.publish(MergeContribution("r1", 5, 1, "a", frozenset(P), {P[0]: 10, P[1]: 11}))
        assert b.wait_for(lambda v: v.merges.merged(key), 0.3) is None  # incomplete: b waits out its timeout
        b.publish(MergeContribution("r1", 5, 1, "b", frozenset(P), {P[2]: 12}))
        expected = {P[0]: 10, P[1]: 11, P[2]: 12}
        assert a.wait_for(lambda v: v.merges.merged(key), 10) == expected
    with ControlPlane(bs, "r1") as again:  # a member that restarts folds the same log into the same view
        assert again.wait_for(lambda v: v.merges.merged(MergeKey(5, 1)), 10) == expected
        assert again.read(lambda v: (v.members("g"), v.initial_offsets("g"))) == ({"a": 0, "b": 0}, {P[0]: 1})
    with ControlPlane(bs, "another") as other:
        assert other.read(lambda v: v.members("g")) == {}


def test_topic_checkpoint_store(groupstream_broker: BrokerProcess) -> None:
    with ControlPlane(groupstream_broker.bootstrap, "r2") as plane:
        store = TopicCheckpointStore(plane)
        store.save(1, "a", "one")
        store.save(2, "a", "two")
        store.save(1, "b", "uno")
        assert (store.load(1, "a"), store.load(2, "a"), store.load(2, "b")) == ("one", "two", None)
        assert (store.load_all(1), store.load_all(2), store.load_all(3)) == ({"a": "one", "b": "uno"}, {"a": "two"}, {})
        store.retire(1)
        assert (store.load(1, "a"), store.load(2, "a")) == (None, "two")
        assert store.load_all(1) == {}
    with ControlPlane(groupstream_broker.bootstrap, "r2") as plane:
        plane.wait_for(lambda v: v.checkpoints or None, 10)
        assert plane.read(lambda v: dict(v.checkpoints)) == {(2, "a"): "two"}
        assert TopicCheckpointStore(plane).load_all(2) == {"a": "two"}  # another member reads a's file


def test_directory_checkpoint_store(tmp_path: Path) -> None:
    store = DirectoryCheckpointStore(tmp_path / "ck")
    assert store.load(1, "a") is None and store.checkpoint_ids() == []
    store.save(1, "a", "one")
    store.save(1, "b", "uno")
    store.save(2, "a", "two")
    store.save(2, "a", "two, again")
    assert (store.load(1, "b"), store.load(2, "a")) == ("uno", "two, again")
    assert not any(p.name.endswith(".tmp") for p in (tmp_path / "ck").rglob("*"))
    store.retire(1)
    assert store.checkpoint_ids() == [2] and store.load(1, "a") is None


def test_the_directory_checkpoint_store_lists_whole_files_of_every_member(tmp_path: Path) -> None:
    """A reset reads every member's file of a checkpoint: not a save under way, nor a directory where a file must
    go (a failed save), nor another checkpoint's files."""
    store = DirectoryCheckpointStore(tmp_path / "ck")
    assert store.load_all(1) == {}
    store.save(1, "a", "from a")
    store.save(1, "b", "from b")
    store.save(2, "a", "later")
    d = tmp_path / "ck" / f"{1:012d}"
    (d / ".c.json.tmp").write_text("half")
    (d / "e.json").mkdir()
    assert store.load_all(1) == {"a": "from a", "b": "from b"}
    store.retire(1)
    assert store.load_all(1) == {} and store.load_all(2) == {"a": "later"}


def test_directory_checkpoint_store_retires_while_another_member_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every member retires the same checkpoints in the shared directory: one another member removed after this
    one listed the directory is simply gone, and so is one holding a directory (the region test makes one where
    a member's checkpoint file must go, to fail a checkpoint). Either made the retiring member crash."""
    store = DirectoryCheckpointStore(tmp_path / "ck")
    for cid in (1, 2, 3):
        store.save(cid, "a", f"checkpoint {cid}")
    (tmp_path / "ck" / f"{2:012d}" / "c.json").mkdir()
    listed = Path.iterdir

    def listed_then_removed_by_another_member(self: Path) -> Iterator[Path]:
        entries = list(listed(self))
        if self == store.root:
            shutil.rmtree(self / f"{1:012d}")
        return iter(entries)

    monkeypatch.setattr(Path, "iterdir", listed_then_removed_by_another_member)
    store.retire(2)
    monkeypatch.undo()
    assert store.checkpoint_ids() == [3] and store.load(3, "a") == "checkpoint 3"
