"""The broker's log cleaner on `__consumer_offsets`: commits of the same partitions compact down to the newest,
by the periodic task and on demand, and a restarted coordinator loads the compacted log."""

from __future__ import annotations

from pathlib import Path

from coordinator_kit import LoopBroker, N, commit, committed, fetch, scripted, wait_until

from groupstream.broker.coordinator_runtime import ShardStatus
from groupstream.broker.group_routing import partition_for
from groupstream.broker.offsets_topic import OFFSETS_TOPIC
from groupstream.storage.compaction import cleanable_range


def test_compaction_of_consumer_offsets_keeps_the_latest_commit_across_a_restart(tmp_path: Path) -> None:
    props = {"offsets.topic.segment.bytes": "2048", "log.cleaner.enable": "false"}
    group = "compacted"
    p = partition_for(group, N)
    with LoopBroker(tmp_path, scripted(), **props).start() as lb:
        conn = lb.connect()
        for i in range(200):
            commit(conn, group, "t", {0: i, 1: 1000 + i})
        plog = lb.broker.catalog.log(OFFSETS_TOPIC, p)
        before = lb.call(lambda: plog.size_bytes)
        stats = lb.run(lb.broker.cleaner.clean_once(force=True))
        assert stats[f"{OFFSETS_TOPIC}-{p}"].records_removed > 300
        assert lb.call(lambda: plog.size_bytes) < before / 3
        assert committed(fetch(conn, group, "t", [0, 1])) == {0: 199, 1: 1199}
    with LoopBroker(tmp_path, scripted(), **props).start() as lb:
        wait_until(lambda: lb.runtime.status(p) is ShardStatus.ACTIVE, what="loaded")
        conn = lb.connect()
        assert committed(fetch(conn, group, "t", [0, 1])) == {0: 199, 1: 1199}
        assert len(lb.runtime.shard(p).replayed) < 100


def test_the_periodic_cleaner_compacts_consumer_offsets(tmp_path: Path) -> None:
    props = {"offsets.topic.segment.bytes": "2048", "log.cleaner.backoff.ms": "50"}
    group = "auto-compacted"
    with LoopBroker(tmp_path, scripted(), **props).start() as lb:
        conn = lb.connect()
        plog = lb.broker.catalog.log(OFFSETS_TOPIC, partition_for(group, N))
        for i in range(100):
            commit(conn, group, "t", {0: i})
        assert lb.call(lambda: plog.log_end_offset) == 100  # 100 commits, about 30 to a 2 KiB segment
        def compacted() -> bool:
            rng = cleanable_range(plog, lb.broker.now_ms())
            return rng.dirty_bytes == 0 and sum(seg.size for seg in plog.segments[:-1]) < 1024

        wait_until(lambda: lb.call(compacted), what="the cleaner to compact every sealed segment")
        assert committed(fetch(conn, group, "t", [0])) == {0: 99}
