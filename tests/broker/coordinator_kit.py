"""Test helpers for the coordinator runtime: a broker on a background loop, and a small scripted shard.

The scripted shard follows the shard contract (handlers return records/responses/timers, ``replay`` is the
only mutation) with just enough behaviour to exercise the runtime: commits become real `__consumer_offsets`
records, fetches read replayed state, some heartbeats park until a timer or an unload answers them.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

from groupstream.broker.config import BrokerConfig
from groupstream.broker.node import Broker
from groupstream.client.net.sync_client import BrokerChannel
from groupstream.coordinator.request import ShardRequest
from groupstream.coordinator.result import CoordinatorRecord, CoordinatorResult, RequestToken, ScheduleTimer
from groupstream.protocol.group_records import OFFSET_COMMIT_KEY_TYPE, OffsetCommitKey, OffsetCommitValue
from groupstream.protocol.messages import APIS, by_name
from support.waiting import wait_until as wait_until  # re-exported: the broker tests' name for it

T = TypeVar("T")

N = 5  # offsets.topic.num.partitions of a LoopBroker unless a test sets it

OFFSET_COMMIT, OFFSET_FETCH, HEARTBEAT, DESCRIBE_GROUPS, LIST_GROUPS, DELETE_GROUPS = 8, 9, 12, 15, 16, 42


class LoopBroker:
    """Our broker on a background event loop; ``call`` runs a function on the loop and returns its result."""

    def __init__(self, data_dir: Path, shard_factory: Any = None, **props: str) -> None:
        self.data_dir = data_dir
        self.shard_factory = shard_factory
        self.props = {"offsets.topic.num.partitions": str(N), **props}
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="test-broker", daemon=True)
        self.thread.start()
        config = BrokerConfig(data_dir=data_dir, host="127.0.0.1", port=0)
        config.apply(self.props)
        self.broker = Broker(config, shard_factory)
        self._conns: list[BrokerChannel] = []

    def start(self, before_start: Callable[[Broker], None] | None = None) -> LoopBroker:
        async def go() -> None:
            if before_start is not None:
                before_start(self.broker)
            await self.broker.start()

        self.run(go())
        return self

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 30) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def call(self, fn: Callable[..., T], *args: Any) -> T:
        async def go() -> T:
            return fn(*args)

        return self.run(go())

    @property
    def runtime(self) -> Any:
        return self.broker.coordinator

    @property
    def port(self) -> int:
        return self.broker.config.port

    def connect(self, client_id: str = "test-client") -> BrokerChannel:
        conn = BrokerChannel("127.0.0.1", self.port, client_id=client_id, request_timeout_ms=30_000)
        self._conns.append(conn)
        return conn

    def stop(self) -> None:
        for conn in self._conns:
            conn.close()
        self.run(self.broker.stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()

    def __enter__(self) -> LoopBroker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def commit_record(group: str, topic: str, partition: int, offset: int, now: int, metadata: str = "") -> CoordinatorRecord:
    return CoordinatorRecord(
        OFFSET_COMMIT_KEY_TYPE,
        OffsetCommitKey(group, topic, partition),
        3,
        OffsetCommitValue(offset, metadata=metadata, commit_timestamp=now),
    )


class ScriptedShard:
    """Groups are just their committed offsets. Heartbeats to groups named ``park*`` wait for an unload; to
    ``timer*`` wait for a timer 100 ms later, which answers them and commits offset ``now`` for the group."""

    instances: list[ScriptedShard] = []

    def __init__(self, partition: int, replay_delay_s: float = 0.0) -> None:
        self.partition = partition
        self.replay_delay_s = replay_delay_s
        self.offsets: dict[tuple[str, str, int], tuple[int, str]] = {}
        self.replayed: list[CoordinatorRecord] = []
        self.parked: dict[str, RequestToken] = {}
        self.loaded = False
        self.unloaded = False
        ScriptedShard.instances.append(self)

    # -- the contract ----------------------------------------------------------------------------------

    def replay(self, record: CoordinatorRecord) -> None:
        if self.replay_delay_s:
            time.sleep(self.replay_delay_s)  # a slow shard, so loading takes long enough to be seen
        self.replayed.append(record)
        key = record.key
        if isinstance(key, OffsetCommitKey):
            k = (key.group, key.topic, key.partition)
            if record.value is None:
                self.offsets.pop(k, None)
            else:
                self.offsets[k] = (record.value.offset, record.value.metadata)

    def on_loaded(self, now_ms: int) -> CoordinatorResult | None:
        self.loaded = True
        return None

    def unload(self) -> list[RequestToken]:
        self.unloaded = True
        tokens = list(self.parked.values())
        self.parked.clear()
        return tokens

    def on_topics_deleted(self, topics: Any, now_ms: int) -> CoordinatorResult:
        return CoordinatorResult()

    def on_timer(self, key: str, now_ms: int, metadata: Any) -> CoordinatorResult:
        group = key.removeprefix("t:")
        token = self.parked.pop(group)
        R = APIS[HEARTBEAT].Response
        return CoordinatorResult(records=[commit_record(group, "timer", 0, now_ms, now_ms)],
                                 responses=[(token, R(error_code=0))])

    def handle(self, request: ShardRequest, now_ms: int, metadata: Any) -> CoordinatorResult:
        api = APIS[request.api_key]
        R = api.Response
        body = request.body
        token = request.token
        if request.api_key == OFFSET_COMMIT:
            records = [
                commit_record(body.group_id, t.name, p.partition_index, p.committed_offset, now_ms,
                              p.committed_metadata or "")
                for t in body.topics for p in t.partitions
            ]
            T_ = R.OffsetCommitResponseTopic
            P_ = T_.OffsetCommitResponsePartition
            resp = R(topics=[T_(name=t.name, partitions=[P_(partition_index=p.partition_index, error_code=0)
                                                         for p in t.partitions]) for t in body.topics])
            return CoordinatorResult(records=records, responses=[(token, resp)])
        if request.api_key == OFFSET_FETCH:
            return CoordinatorResult(responses=[(token, self._fetch(R, request.version, body))])
        if request.api_key == HEARTBEAT:
            if body.group_id.startswith("park"):
                self.parked[body.group_id] = token
                return CoordinatorResult()
            if body.group_id.startswith("timer"):
                self.parked[body.group_id] = token
                return CoordinatorResult(timers=[ScheduleTimer("t:" + body.group_id, now_ms + 100)])
            return CoordinatorResult(responses=[(token, R(error_code=0))])
        if request.api_key == DESCRIBE_GROUPS:
            groups = [R.DescribedGroup(error_code=0, group_id=g, group_state=self._state(g), protocol_type="",
                                       protocol_data=str(self.partition), members=[]) for g in body.groups]
            return CoordinatorResult(responses=[(token, R(groups=groups))])
        if request.api_key == DELETE_GROUPS:
            records = [
                CoordinatorRecord(OFFSET_COMMIT_KEY_TYPE, OffsetCommitKey(*k), -1, None)
                for k in sorted(self.offsets) if k[0] in body.groups_names
            ]
            results = [R.DeletableGroupResult(group_id=g, error_code=0) for g in body.groups_names]
            return CoordinatorResult(records=records, responses=[(token, R(results=results))])
        if request.api_key == LIST_GROUPS:
            names = sorted({k[0] for k in self.offsets})
            groups = [R.ListedGroup(group_id=g, protocol_type="consumer", group_state="Empty") for g in names]
            return CoordinatorResult(responses=[(token, R(error_code=0, groups=groups))])
        raise AssertionError(f"scripted shard got api {request.api_key}")

    # -- helpers ---------------------------------------------------------------------------------------

    def _state(self, group: str) -> str:
        return "Empty" if any(k[0] == group for k in self.offsets) else "Dead"

    def _partitions(self, R: Any, group: str, topics: Any) -> list[Any]:
        T_ = R.OffsetFetchResponseTopic
        P_ = T_.OffsetFetchResponsePartition
        wanted: dict[str, list[int]] = {}
        for (g, t, p) in sorted(self.offsets):
            if g == group:
                wanted.setdefault(t, []).append(p)
        if topics is not None:
            wanted = {t.name: list(t.partition_indexes) for t in topics}
        out = []
        for t, parts in wanted.items():
            plist = []
            for p in parts:
                off, meta = self.offsets.get((group, t, p), (-1, ""))
                plist.append(P_(partition_index=p, committed_offset=off, metadata=meta, error_code=0))
            out.append(T_(name=t, partitions=plist))
        return out

    def _fetch(self, R: Any, version: int, body: Any) -> Any:
        if version < 8:
            return R(topics=self._partitions(R, body.group_id, body.topics), error_code=0)
        G = R.OffsetFetchResponseGroup
        groups = []
        for g in body.groups:
            topics = []
            for t in self._partitions(R, g.group_id, g.topics):
                topics.append(G.OffsetFetchResponseTopics(
                    name=t.name,
                    partitions=[G.OffsetFetchResponseTopics.OffsetFetchResponsePartitions(
                        partition_index=p.partition_index, committed_offset=p.committed_offset,
                        metadata=p.metadata, error_code=0) for p in t.partitions]))
            groups.append(G(group_id=g.group_id, topics=topics, error_code=0))
        return R(groups=groups)


def scripted(replay_delay_s: float = 0.0) -> Callable[[int], ScriptedShard]:
    return lambda partition: ScriptedShard(partition, replay_delay_s)


# -- requests, as a client would send them ------------------------------------------------------------


def commit(conn: Any, group: str, topic: str, offsets: dict[int, int], version: int = 8, metadata: str = "m") -> Any:
    Req = by_name("OffsetCommit").Request
    T = Req.OffsetCommitRequestTopic
    P = T.OffsetCommitRequestPartition
    parts = [P(partition_index=p, committed_offset=o, committed_metadata=metadata) for p, o in offsets.items()]
    body = Req(group_id=group, generation_id_or_member_epoch=-1, member_id="", topics=[T(name=topic, partitions=parts)])
    return conn.request("OffsetCommit", body, version=version)


def fetch(conn: Any, group: str, topic: str, partitions: list[int], version: int = 7) -> Any:
    Req = by_name("OffsetFetch").Request
    T = Req.OffsetFetchRequestTopic
    return conn.request(
        "OffsetFetch", Req(group_id=group, topics=[T(name=topic, partition_indexes=partitions)]), version=version
    )


def fetch_groups(conn: Any, groups: list[str]) -> Any:
    Req = by_name("OffsetFetch").Request
    G = Req.OffsetFetchRequestGroup
    return conn.request("OffsetFetch", Req(groups=[G(group_id=g, topics=None) for g in groups]), version=8)


def produce_to(conn: Any, topic: str, records: bytes) -> Any:
    Req = by_name("Produce").Request
    T = Req.TopicProduceData
    P = T.PartitionProduceData
    body = Req(acks=-1, timeout_ms=1000, topic_data=[T(name=topic, partition_data=[P(index=0, records=records)])])
    return conn.request("Produce", body, version=9)


def committed(resp: Any) -> dict[int, int]:
    return {p.partition_index: p.committed_offset for t in resp.topics for p in t.partitions}
