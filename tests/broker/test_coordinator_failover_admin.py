"""Coordinator failover from outside the broker (ElectLeaders on an `__consumer_offsets` partition, through
``groupstream leader-election``) with a live confluent-kafka consumer riding it out, and committed offsets
dropped when their topic is deleted."""

from __future__ import annotations

from pathlib import Path

import pytest
from coordinator_kit import LoopBroker, wait_until
from test_coordinator_groups import (
    PROPS,
    TOPIC,
    committed_by,
    committed_total,
    consume_and_commit,
    consume_until,
    consumer,
    make_topic_with_records,
    offsets_records,
    produce,
)

from groupstream.broker.coordinator_runtime import ShardStatus
from groupstream.broker.offsets_topic import OFFSETS_TOPIC
from groupstream.cli.main import main
from groupstream.client.admin import Admin
from groupstream.protocol.group_records import OffsetCommitKey

pytestmark = pytest.mark.compat


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_leader_election_moves_the_coordinator_and_a_live_group_rides_it_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lb = LoopBroker(tmp_path / "data", None, **PROPS).start()
    try:
        bs = f"127.0.0.1:{lb.port}"
        make_topic_with_records(bs, 100)
        c = consumer(bs, "failover")
        seen: set[tuple[int, int]] = set()
        consume_until(c, seen, 100)
        c.commit(asynchronous=False)
        p = lb.runtime.partition_for("failover")
        before = lb.runtime.shard(p)

        code, out, err = cli(capsys, "leader-election", "--bootstrap-server", bs, "--group", "failover")
        assert code == 0, err

        assert f"Successfully completed leader election (PREFERRED) for partitions {OFFSETS_TOPIC}-{p}" in out
        assert lb.runtime.status(p) is ShardStatus.ACTIVE
        assert lb.runtime.shard(p) is not before  # a fresh shard, loaded from the log
        assert sum(committed_by(lb, "failover").values()) == 100
        produce(bs, 40, first=100)
        consume_and_commit(c, seen, 140)  # the consumer finds its coordinator again; its commits land
        assert len(seen) == 140
        c.close()
        wait_until(lambda: sum(committed_total(bs, "failover").values()) == 140, what="the commits after failover")
    finally:
        lb.stop()


def test_leader_election_of_data_partitions_is_not_needed_and_bad_targets_are_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lb = LoopBroker(tmp_path / "data", None, **PROPS).start()
    try:
        bs = f"127.0.0.1:{lb.port}"
        make_topic_with_records(bs, 1)
        code, out, err = cli(capsys, "leader-election", "--bootstrap-server", bs, "--topic", TOPIC, "--partition", "0")
        assert code == 0, err
        assert f"Valid replica already elected for partitions {TOPIC}-0" in out

        code, out, err = cli(capsys, "leader-election", "--bootstrap-server", bs, "--topic", TOPIC, "--partition", "99")
        assert code == 1, err
        assert f"Error completing leader election (PREFERRED) for partition: {TOPIC}-99" in out
        assert "does not exist" in out

        code, out, err = cli(capsys, "leader-election", "--bootstrap-server", bs, "--topic", TOPIC)
        assert code == 2 and "--topic needs --partition" in err
    finally:
        lb.stop()


def test_deleting_a_topic_tombstones_its_committed_offsets(tmp_path: Path) -> None:
    lb = LoopBroker(tmp_path / "data", None, **PROPS).start()
    try:
        bs = f"127.0.0.1:{lb.port}"
        with Admin({"bootstrap.servers": bs}) as admin:
            admin.create_topics(["doomed", "kept"])
            admin.alter_group_offsets("g", {("doomed", 0): 5, ("kept", 0): 7})
            admin.alter_group_offsets("other", {("doomed", 0): 3})
            admin.delete_topics(["doomed"])
            assert admin.list_group_offsets("g") and set(admin.list_group_offsets("g")) == {("kept", 0)}
            assert admin.list_group_offsets("other") == {}
        tombstoned = {
            (r.key.group, r.key.topic, r.key.partition)
            for part in {lb.runtime.partition_for("g"), lb.runtime.partition_for("other")}
            for r in offsets_records(lb, part)
            if isinstance(r.key, OffsetCommitKey) and r.value is None
        }
        assert tombstoned == {("g", "doomed", 0), ("other", "doomed", 0)}
    finally:
        lb.stop()
    # the tombstones are what a restart replays: the offsets stay gone, and a topic made again starts clean
    lb = LoopBroker(tmp_path / "data", None, **PROPS).start()
    try:
        with Admin({"bootstrap.servers": f"127.0.0.1:{lb.port}"}) as admin:
            admin.create_topics(["doomed"])
            assert set(admin.list_group_offsets("g")) == {("kept", 0)}
            assert admin.list_group_offsets("other") == {}
    finally:
        lb.stop()

