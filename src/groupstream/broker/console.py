"""The console's pages on the broker's HTTP port: its topics and groups as they are now (from the catalog and
the coordinator's shards), and each group's history (read back from its ``__consumer_offsets`` partition).

Runs on the event loop like every reader of the broker's state. A group page reads the group's coordinator
partition from its start: the console is for people, a page at a time, and the coordinator's records are
compacted, so the read stays bounded by the groups that share the partition.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from groupstream.broker.offsets_topic import is_internal
from groupstream.console.history import group_history
from groupstream.console.lag_history import SAMPLE_EVERY_S, LagHistory
from groupstream.console.render import GroupRow, LagRow, MemberRow, TopicRow, front_page, group_page
from groupstream.protocol.consumer_protocol import decode_assignment
from groupstream.protocol.errors import PeerProtocolError
from groupstream.protocol.group_records import CoordinatorRecord, coordinator_records
from groupstream.storage.errors import StorageError

if TYPE_CHECKING:
    from groupstream.broker.node import Broker

HTML = "text/html; charset=utf-8"
_READ_CHUNK = 1 << 20


class BrokerConsole:
    """The pages, and the lag history their charts draw (sampled every ``SAMPLE_EVERY_S`` and on each page)."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.lag_history = LagHistory()
        self.end_history = LagHistory()  # each topic's end offsets summed: its rate

    def routes(self) -> dict[str, Any]:
        return {"/": self.front, "/groups/": self.group}

    def front(self, _: str) -> tuple[str, bytes]:
        rows = self._sampled()
        topics = [replace(t, rate=self.end_history.rate(t.name)) for t in self._topics_sampled()]
        return HTML, front_page(topics, rows).encode()

    def group(self, name: str) -> tuple[str, bytes] | None:
        rows = self._sampled()
        found = next((row for row in rows if row.group_id == name), None)
        if found is None:
            return None
        broker = self.broker
        shard: Any = broker.coordinator.shard(broker.coordinator.partition_for(name))
        epoch, members = _members(broker, shard, name)
        history = group_history(_records(broker, name), name, _topic_names(broker))
        page = group_page(found, epoch, members, _lag(broker, shard, name), history, self.lag_history.series(name))
        return HTML, page.encode()

    async def sample_forever(self) -> None:
        while True:
            self._sampled()
            self._topics_sampled()
            await asyncio.sleep(SAMPLE_EVERY_S)  # the sampling period itself, not a wait for a condition

    def _topics_sampled(self) -> list[TopicRow]:
        topics = _topics(self.broker)
        self.end_history.record(self.broker.now_ms(), {t.name: t.end_offsets for t in topics})
        self.end_history.forget({t.name for t in topics})
        return topics

    def _sampled(self) -> list[GroupRow]:
        rows = [row for row, _ in _groups(self.broker)]
        self.lag_history.record(self.broker.now_ms(), {r.group_id: r.lag or 0 for r in rows})
        self.lag_history.forget({r.group_id for r in rows})
        return rows


def _topics(broker: Broker) -> list[TopicRow]:
    catalog = broker.catalog
    rows = []
    for t in sorted(catalog.topics(), key=lambda t: t.name):
        if is_internal(t.name):
            continue
        logs = [catalog.log(t.name, p) for p in range(t.partitions)]
        rows.append(TopicRow(t.name, t.partitions, sum(lg.log_end_offset for lg in logs),
                             sum(lg.size_bytes for lg in logs)))  # fmt: skip
    return rows


def _groups(broker: Broker) -> Iterator[tuple[GroupRow, Any]]:
    runtime = broker.coordinator
    for p in runtime.active_partitions():
        shard: Any = runtime.shard(p)
        if shard is None:
            continue
        for gid in sorted(set(shard.group_ids()) | set(shard.offset_groups())):
            consumer, classic = shard.consumer_group(gid), shard.group(gid)
            if consumer is not None:
                protocol, state, members = "consumer", consumer.state.value, len(consumer.members)
            elif classic is not None:
                protocol, state, members = "classic", classic.state.value, len(classic.members)
            else:
                protocol, state, members = "-", "no members (offsets only)", 0
            lag = sum(r.lag for r in _lag(broker, shard, gid))
            yield GroupRow(gid, protocol, state, members, lag), shard


def _lag(broker: Broker, shard: Any, group_id: str) -> list[LagRow]:
    catalog = broker.catalog
    rows = []
    for topic, partition, offset in shard.committed_offsets(group_id):
        info = catalog.get_topic(topic)
        if info is not None and partition < info.partitions:
            rows.append(LagRow(topic, partition, offset, catalog.log(topic, partition).log_end_offset))
    return rows


def _members(broker: Broker, shard: Any, group_id: str) -> tuple[str, list[MemberRow]]:
    consumer, classic = shard.consumer_group(group_id), shard.group(group_id)
    names = _topic_names(broker)
    if consumer is not None:
        rows = []
        for mid, m in sorted(consumer.members.items(), key=lambda kv: kv[1].metadata.client_id):
            held = sorted((names.get(t, str(t)), p) for t, p in m.assignment.assigned)
            rows.append(MemberRow(mid, m.metadata.client_id, m.metadata.client_host, _partitions(held)))
        return f"group epoch {consumer.epoch}", rows
    if classic is not None:
        rows = []
        for mid, m in sorted(classic.members.items(), key=lambda kv: kv[1].client_id):
            try:
                held = sorted(decode_assignment(m.assignment).partitions) if m.assignment else []
            except PeerProtocolError:
                held = []
            rows.append(MemberRow(mid, m.client_id, m.client_host, _partitions(held)))
        return f"generation {classic.generation}", rows
    return "no members", []


def _partitions(held: list[tuple[str, int]]) -> str:
    return ", ".join(f"{t}-{p}" for t, p in held) or "nothing"


def _topic_names(broker: Broker) -> dict[uuid.UUID, str]:
    return {t.topic_id: t.name for t in broker.catalog.topics()}


def _records(broker: Broker, group_id: str) -> Iterator[tuple[int, CoordinatorRecord]]:
    """The coordinator's records for the group's partition, in log order, with their timestamps."""
    runtime = broker.coordinator
    plog = broker.catalog.log(runtime.topic, runtime.partition_for(group_id))
    offset, end = plog.log_start_offset, plog.log_end_offset
    while offset < end:
        try:
            chunk = plog.read(offset, _READ_CHUNK, max_offset=end)
        except StorageError:
            return  # an unreadable stretch: the history shown stops there
        if not chunk.records:
            return
        for rec, record in coordinator_records(chunk.records):
            if not isinstance(record, PeerProtocolError):
                yield rec.timestamp, record
        offset = chunk.next_offset
