"""The coordinator runtime with a scripted shard: placement, durable writes, loading, unload/reload, timers,
request split and merge, failed writes, and `__consumer_offsets` as an internal compacted topic."""

from __future__ import annotations

import struct
import threading
from pathlib import Path
from typing import Any

import pytest
from coordinator_kit import (
    LoopBroker,
    N,
    ScriptedShard,
    commit,
    committed,
    fetch,
    fetch_groups,
    produce_to,
    scripted,
    wait_until,
)

from groupstream.broker.config import BrokerConfig, ConfigError
from groupstream.broker.coordinator_runtime import ShardStatus
from groupstream.broker.group_routing import java_string_hashcode, partition_for
from groupstream.broker.offsets_topic import OFFSETS_TOPIC
from groupstream.protocol.error_codes import ErrorCode
from groupstream.protocol.group_records import OffsetCommitKey, decode_record
from groupstream.protocol.messages import by_name
from groupstream.protocol.records import BatchBuilder, iter_record_batches


def groups_on_distinct_partitions(n: int) -> list[str]:
    seen: dict[int, str] = {}
    i = 0
    while len(seen) < n:
        g = f"group-{i}"
        seen.setdefault(partition_for(g, N), g)
        i += 1
    return list(seen.values())


def offsets_log_records(lb: LoopBroker, partition: int) -> list[Any]:
    plog = lb.broker.catalog.log(OFFSETS_TOPIC, partition)
    data = lb.call(lambda: plog.read(plog.log_start_offset, 1 << 24).records)
    return [decode_record(r.key, r.value) for b in iter_record_batches(data) for r in b]


@pytest.fixture(autouse=True)
def _reset_instances() -> None:
    ScriptedShard.instances.clear()


# -- placement --------------------------------------------------------------------------------------------


def test_java_string_hashcode_and_kafka_abs() -> None:
    assert java_string_hashcode("hello") == 99162322
    assert java_string_hashcode("") == 0
    assert java_string_hashcode("\U0001f600") == 0xD83D * 31 + 0xDE00  # UTF-16 code units, not code points
    assert java_string_hashcode("polygenelubricants") == -(2**31)
    assert partition_for("polygenelubricants", 50) == 0  # Utils.abs(MIN_VALUE) is 0, not negative
    assert partition_for("hello", 50) == 99162322 % 50
    assert partition_for("console-consumer-1", 50) == abs(java_string_hashcode("console-consumer-1")) % 50


def test_group_properties_are_validated_and_passed_on(tmp_path: Path) -> None:
    config = BrokerConfig(data_dir=tmp_path)
    config.apply({"offsets.topic.num.partitions": "7", "group.initial.rebalance.delay.ms": "0",
                  "offsets.retention.minutes": "2", "group.max.size": "9"})
    assert config.offsets_topic_num_partitions == 7
    group = config.group_coordinator_config()
    assert (group.initial_rebalance_delay_ms, group.offsets_retention_ms, group.max_size) == (0, 120_000, 9)
    with pytest.raises(ConfigError, match=r"group\.max\.size"):
        config.apply({"group.max.size": "many"})
    with pytest.raises(ConfigError, match=r"offsets\.topic\.num\.partitions"):
        config.apply({"offsets.topic.num.partitions": "0"})


# -- writes, reads, restart -------------------------------------------------------------------------------


def test_commits_are_durable_records_that_decode_with_group_records(tmp_path: Path) -> None:
    with LoopBroker(tmp_path, scripted()).start() as lb:
        conn = lb.connect()
        resp = commit(conn, "g1", "orders", {0: 42, 3: 7})
        assert [p.error_code for t in resp.topics for p in t.partitions] == [0, 0]
        p = partition_for("g1", N)
        plog = lb.broker.catalog.log(OFFSETS_TOPIC, p)
        # the answer left only once the append was on disk
        assert lb.call(lambda: plog.flushed_offset) >= lb.call(lambda: plog.log_end_offset) == 2
        records = offsets_log_records(lb, p)
        assert [(r.key, r.value.offset, r.value.metadata) for r in records] == [
            (OffsetCommitKey("g1", "orders", 0), 42, "m"),
            (OffsetCommitKey("g1", "orders", 3), 7, "m"),
        ]
        assert committed(fetch(conn, "g1", "orders", [0, 3])) == {0: 42, 3: 7}
        # the records were replayed into the shard when written
        shard = lb.runtime.shard(p)
        assert [r.key for r in shard.replayed] == [r.key for r in records]


def test_a_restart_replays_every_shard(tmp_path: Path) -> None:
    groups = groups_on_distinct_partitions(N)
    with LoopBroker(tmp_path, scripted()).start() as lb:
        conn = lb.connect()
        for i, g in enumerate(groups):
            for rnd in range(3):
                commit(conn, g, "t", {0: 100 * i + rnd})
    with LoopBroker(tmp_path, scripted()).start() as lb:
        wait_until(lambda: all(lb.runtime.status(p) is ShardStatus.ACTIVE for p in range(N)), what="loaded")
        conn = lb.connect()
        for i, g in enumerate(groups):
            assert committed(fetch(conn, g, "t", [0])) == {0: 100 * i + 2}
            shard = lb.runtime.shard(partition_for(g, N))
            assert shard.loaded and len(shard.replayed) == 3


def test_a_damaged_range_in_the_offsets_topic_costs_only_its_own_records(tmp_path: Path) -> None:
    """A corrupted batch in an older segment of a shard's partition: the shard still loads (a refusal would
    lose every group in it), skipping only the unreadable offsets, and says so at WARNING."""
    group = "damaged-1"
    p = partition_for(group, N)
    with LoopBroker(tmp_path, scripted(), **{"offsets.topic.segment.bytes": "4096"}).start() as lb:
        conn = lb.connect()
        for rnd in range(120):
            commit(conn, group, "t", {rnd % 4: rnd})
    pdir = tmp_path / f"__consumer_offsets-{p}"
    segments = sorted(pdir.glob("*.log"))
    assert len(segments) >= 3, "the commits did not span three segments"
    victim = segments[1]
    data = bytearray(victim.read_bytes())
    first_len = struct.unpack_from(">i", data, 8)[0]
    second = 12 + first_len  # damage the length field of the segment's second batch
    struct.pack_into(">i", data, second + 8, 0x7FFF0000)
    victim.write_bytes(bytes(data))
    with LoopBroker(tmp_path, scripted(), **{"offsets.topic.segment.bytes": "4096"}).start() as lb:
        wait_until(lambda: lb.runtime.status(p) is ShardStatus.ACTIVE, what="the damaged shard to load")
        replayed = len(lb.runtime.shard(p).replayed)
        assert 100 <= replayed < 120, f"{replayed} of 120 commit records replayed"
        conn = lb.connect()
        assert committed(fetch(conn, group, "t", [0, 1, 2, 3])) == {0: 116, 1: 117, 2: 118, 3: 119}


def test_requests_get_load_in_progress_while_loading_never_a_partial_answer(tmp_path: Path) -> None:
    group = "big-group"
    with LoopBroker(tmp_path, scripted()).start() as lb:
        conn = lb.connect()
        for batch in range(40):
            commit(conn, group, "t", {p: batch for p in range(10)})
    # a slow shard and one batch per load step: loading takes ~0.4 s and yields between batches
    with LoopBroker(tmp_path, scripted(replay_delay_s=0.001)) as lb:
        lb.start(before_start=lambda b: setattr(b.coordinator, "load_chunk_bytes", 1))
        p = partition_for(group, N)
        conn = lb.connect()
        seen_loading = seen_answer = False
        while not seen_answer:
            find = conn.request("FindCoordinator", {"key": group, "key_type": 0}, version=3)
            resp = fetch(conn, group, "t", list(range(10)))
            if resp.error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
                seen_loading = True
                assert not resp.topics
                continue
            assert resp.error_code == 0
            assert committed(resp) == dict.fromkeys(range(10), 39)  # complete, never stale or partial
            seen_answer = True
            assert find.error_code in (ErrorCode.NONE, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
        assert seen_loading
        assert lb.runtime.status(p) is ShardStatus.ACTIVE
        assert conn.request("FindCoordinator", {"key": group, "key_type": 0}, version=3).error_code == 0


def test_unload_answers_parked_requests_and_refuses_until_reload(tmp_path: Path) -> None:
    with LoopBroker(tmp_path, scripted()).start() as lb:
        conn = lb.connect()
        commit(conn, "park-1", "t", {0: 5})
        p = partition_for("park-1", N)
        parked: list[Any] = []
        waiter = threading.Thread(
            target=lambda: parked.append(
                lb.connect("parked").request("Heartbeat", {"group_id": "park-1", "generation_id": 1, "member_id": "m"})
            )
        )
        waiter.start()
        wait_until(lambda: lb.call(lb.runtime.pending_requests, p) == 1, what="the heartbeat to park")
        first_shard = lb.runtime.shard(p)
        lb.call(lb.runtime.unload, p)
        waiter.join(10)
        assert parked[0].error_code == ErrorCode.NOT_COORDINATOR
        assert first_shard.unloaded
        assert lb.runtime.status(p) is ShardStatus.UNLOADED
        # while unloaded: groups of this shard are refused, FindCoordinator says not available
        assert commit(conn, "park-1", "t", {0: 6}).topics[0].partitions[0].error_code == ErrorCode.NOT_COORDINATOR
        assert fetch(conn, "park-1", "t", [0]).error_code == ErrorCode.NOT_COORDINATOR
        find = conn.request("FindCoordinator", {"key": "park-1", "key_type": 0}, version=3)
        assert (find.error_code, find.node_id) == (ErrorCode.COORDINATOR_NOT_AVAILABLE, -1)
        # other shards are unaffected
        other = next(g for g in groups_on_distinct_partitions(N) if partition_for(g, N) != p)
        assert commit(conn, other, "t", {0: 1}).topics[0].partitions[0].error_code == 0
        # reload: a new shard replays the log, and clients find the coordinator again
        lb.run(_reload(lb, p))
        assert lb.runtime.shard(p) is not first_shard
        assert conn.request("FindCoordinator", {"key": "park-1", "key_type": 0}, version=3).error_code == 0
        assert committed(fetch(conn, "park-1", "t", [0])) == {0: 5}


async def _reload(lb: LoopBroker, partition: int) -> None:
    await lb.runtime.reload(partition)


def test_timers_fire_on_the_loop_and_their_results_are_written(tmp_path: Path) -> None:
    with LoopBroker(tmp_path, scripted()).start() as lb:
        conn = lb.connect()
        p = partition_for("timer-1", N)
        resp = conn.request("Heartbeat", {"group_id": "timer-1", "generation_id": 1, "member_id": "m"})
        assert resp.error_code == 0  # answered by the timer, ~100 ms later
        records = offsets_log_records(lb, p)
        assert [r.key for r in records] == [OffsetCommitKey("timer-1", "timer", 0)]
        assert lb.call(lb.runtime.timer_keys, p) == {}


def test_timers_die_with_their_shard(tmp_path: Path) -> None:
    with LoopBroker(tmp_path, scripted()).start() as lb:
        p = partition_for("timer-2", N)
        out: list[Any] = []
        t = threading.Thread(target=lambda: out.append(
            lb.connect("t").request("Heartbeat", {"group_id": "timer-2", "generation_id": 1, "member_id": "m"})))
        t.start()
        wait_until(lambda: lb.call(lb.runtime.timer_keys, p) != {}, what="the timer")
        lb.call(lb.runtime.unload, p)
        t.join(10)
        assert out[0].error_code == ErrorCode.NOT_COORDINATOR
        assert lb.call(lb.runtime.timer_keys, p) == {}
        assert offsets_log_records(lb, p) == []


# -- several groups in one request ----------------------------------------------------------------------


def test_multi_group_requests_are_split_by_shard_and_merged_in_request_order(tmp_path: Path) -> None:
    groups = groups_on_distinct_partitions(N)
    with LoopBroker(tmp_path, scripted()).start() as lb:
        conn = lb.connect()
        for i, g in enumerate(groups):
            commit(conn, g, "t", {0: i})
        wanted = [groups[3], groups[0], groups[4], groups[1]]
        described = conn.request("DescribeGroups", {"groups": wanted}, version=5)
        assert [d.group_id for d in described.groups] == wanted
        assert [int(d.protocol_data) for d in described.groups] == [partition_for(g, N) for g in wanted]
        fetched = fetch_groups(conn, wanted)
        assert [g.group_id for g in fetched.groups] == wanted
        assert [g.topics[0].partitions[0].committed_offset for g in fetched.groups] == [3, 0, 4, 1]
        listed = conn.request("ListGroups", {}, version=4)
        assert listed.error_code == 0 and sorted(g.group_id for g in listed.groups) == sorted(groups)
        # one shard unloaded: only its groups carry the error; ListGroups leaves its groups out
        gone = partition_for(groups[0], N)
        lb.call(lb.runtime.unload, gone)
        described = conn.request("DescribeGroups", {"groups": wanted}, version=5)
        assert [d.error_code for d in described.groups] == [0, ErrorCode.NOT_COORDINATOR, 0, 0]
        deleted = conn.request("DeleteGroups", {"groups_names": wanted}, version=2)
        assert [(r.group_id, r.error_code) for r in deleted.results] == [
            (wanted[0], 0), (wanted[1], ErrorCode.NOT_COORDINATOR), (wanted[2], 0), (wanted[3], 0)]
        listed = conn.request("ListGroups", {}, version=4)  # deleted groups are gone, the unloaded shard is skipped
        assert listed.error_code == 0 and [g.group_id for g in listed.groups] == [groups[2]]


def test_find_coordinator_batched_keys_and_key_types(tmp_path: Path) -> None:
    with LoopBroker(tmp_path, scripted()).start() as lb:
        conn = lb.connect()
        groups = groups_on_distinct_partitions(2)
        lb.call(lb.runtime.unload, partition_for(groups[1], N))
        resp = conn.request("FindCoordinator", {"key_type": 0, "coordinator_keys": groups}, version=4)
        assert [(c.key, c.error_code, c.node_id, c.port) for c in resp.coordinators] == [
            (groups[0], 0, lb.broker.config.node_id, lb.port),
            (groups[1], ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, -1),
        ]
        # transactions: the first lookup creates __transaction_state (COORDINATOR_NOT_AVAILABLE, as Kafka
        # answers meanwhile), then the id's shard loads and this node coordinates it
        txn = conn.request("FindCoordinator", {"key": "tx-1", "key_type": 1}, version=3)
        assert txn.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
        wait_until(lambda: conn.request("FindCoordinator", {"key": "tx-1", "key_type": 1}, version=3).error_code == 0,
                   10, "the transaction coordinator to load")  # fmt: skip
        v0 = conn.request("FindCoordinator", {"key": groups[0]}, version=0)
        assert (v0.error_code, v0.node_id, v0.port) == (0, lb.broker.config.node_id, lb.port)


# -- failures ---------------------------------------------------------------------------------------------


def test_a_failed_append_answers_with_an_error_and_reloads_the_shard(tmp_path: Path) -> None:
    with LoopBroker(tmp_path, scripted()).start() as lb:
        conn = lb.connect()
        commit(conn, "park-big", "t", {0: 1})
        p = partition_for("park-big", N)
        first = lb.runtime.shard(p)
        parked: list[Any] = []
        t = threading.Thread(target=lambda: parked.append(
            lb.connect("p").request("Heartbeat", {"group_id": "park-big", "generation_id": 1, "member_id": "m"})))
        t.start()
        wait_until(lambda: lb.call(lb.runtime.pending_requests, p) == 1, what="the heartbeat to park")
        # 2 MB of metadata exceeds max.message.bytes of __consumer_offsets: the append is refused
        resp = commit(conn, "park-big", "t", dict.fromkeys(range(100), 2), metadata="x" * 20_000)
        assert {p.error_code for p in resp.topics[0].partitions} == {ErrorCode.UNKNOWN_SERVER_ERROR}
        t.join(10)
        assert parked[0].error_code == ErrorCode.NOT_COORDINATOR  # the shard was reloaded from its log
        wait_until(lambda: lb.runtime.status(p) is ShardStatus.ACTIVE, what="the reload")
        assert lb.runtime.shard(p) is not first
        assert committed(fetch(conn, "park-big", "t", [0])) == {0: 1}


# -- the internal topic -----------------------------------------------------------------------------------


def test_consumer_offsets_is_internal_and_compacted(tmp_path: Path) -> None:
    with LoopBroker(tmp_path, scripted()).start() as lb:
        conn = lb.connect()
        meta = conn.request("Metadata", {"topics": None}, version=9)
        internal = {t.name: t.is_internal for t in meta.topics}
        assert internal[OFFSETS_TOPIC] is True and len(next(t for t in meta.topics if t.name == OFFSETS_TOPIC).partitions) == N
        assert lb.broker.catalog.topic_config(OFFSETS_TOPIC).to_properties()["cleanup.policy"] == "compact"
        b = BatchBuilder()
        b.append(0, b"k", b"v")
        resp = produce_to(conn, OFFSETS_TOPIC, b.build())
        assert resp.responses[0].partition_responses[0].error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
        deleted = conn.request("DeleteTopics", {"topic_names": [OFFSETS_TOPIC], "timeout_ms": 1000}, version=5)
        assert deleted.responses[0].error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
        CP = by_name("CreatePartitions").Request
        grown = conn.request("CreatePartitions", CP(topics=[CP.CreatePartitionsTopic(name=OFFSETS_TOPIC, count=N + 1)],
                                                    timeout_ms=1000), version=2)
        assert grown.results[0].error_code == ErrorCode.INVALID_TOPIC_EXCEPTION


def test_existing_partition_count_wins_over_the_property(tmp_path: Path) -> None:
    with LoopBroker(tmp_path, scripted()).start():
        pass
    with LoopBroker(tmp_path, scripted(), **{"offsets.topic.num.partitions": "9"}).start() as lb:
        assert lb.runtime.num_partitions == N
