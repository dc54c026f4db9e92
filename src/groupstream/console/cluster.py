"""The console's pages for any Kafka cluster (``groupstream console --bootstrap-server``), read as a client
reads it: topics, groups and lag through the Admin API, and a group's history from its partition of
``__consumer_offsets``, which Kafka's coordinator writes in the same record formats ours does, so the
rebalance timeline works against Apache Kafka too (where a cluster refuses to let the client read that
topic, the page says so and shows the rest).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from dataclasses import replace
from typing import Any

from groupstream.client.admin import Admin
from groupstream.client.consumer.consumer import Consumer
from groupstream.console.history import group_history
from groupstream.console.lag_history import LagHistory
from groupstream.console.render import GroupRow, LagRow, MemberRow, TopicRow, front_page, group_page
from groupstream.protocol.errors import PeerProtocolError
from groupstream.protocol.group_records import CoordinatorRecord, decode_record

OFFSETS_TOPIC = "__consumer_offsets"
_HISTORY_READ_S = 10.0  # the most a page waits to read a group's history


class ClusterConsole:
    def __init__(self, config: Mapping[str, Any]) -> None:
        self.config = dict(config)
        self.admin = Admin(config)
        self.lag_history = LagHistory()
        self.end_history = LagHistory()  # each topic's end offsets summed: its rate

    def close(self) -> None:
        self.admin.close()

    def front(self) -> str:
        rows = self.sample()
        return front_page([replace(t, rate=self.end_history.rate(t.name)) for t in self._topics()], rows)

    def group(self, name: str) -> str | None:
        row = next((row for row in self.sample() if row.group_id == name), None)
        if row is None:
            return None
        epoch, members = self._members(name)
        history = group_history(self._records(name), name, self._topic_ids())
        return group_page(row, epoch, members, self._lag(name), history, self.lag_history.series(name))

    def sample(self) -> list[GroupRow]:
        """The groups now, their lags recorded for the charts."""
        rows = [row for row, _ in self._groups()]
        self.lag_history.record(int(time.time() * 1000), {r.group_id: r.lag or 0 for r in rows})
        self.lag_history.forget({r.group_id for r in rows})
        return rows

    def _topics(self) -> list[TopicRow]:
        topics = self._topic_rows()
        self.end_history.record(int(time.time() * 1000), {t.name: t.end_offsets for t in topics})
        self.end_history.forget({t.name for t in topics})
        return topics

    # --- views ----------------------------------------------------------------------------------------

    def _topic_rows(self) -> list[TopicRow]:
        topics = self.admin.list_topics()
        ends = self.admin.log_end_offsets((n, p.partition) for n, d in topics.items() for p in d.partitions)
        return [
            TopicRow(n, d.partition_count, sum(ends.get((n, p.partition), 0) for p in d.partitions), None)
            for n, d in sorted(topics.items())
        ]

    def _groups(self) -> Iterator[tuple[GroupRow, Any]]:
        for g in sorted(self.admin.list_groups(), key=lambda g: g.group_id):
            lag = self._lag(g.group_id)
            protocol = g.group_type or g.protocol_type or "-"
            members = self._member_count(g.group_id, protocol)
            yield GroupRow(g.group_id, protocol, g.state or "-", members, sum(r.lag for r in lag)), g

    def _member_count(self, group_id: str, protocol: str) -> int:
        if protocol == "consumer":
            return len(self.admin.describe_consumer_groups([group_id])[group_id].members)
        return len(self.admin.describe_groups([group_id])[group_id].members)

    def _lag(self, group_id: str) -> list[LagRow]:
        return [
            LagRow(t, p, lag.committed, lag.log_end)
            for (t, p), lag in sorted(self.admin.consumer_lag(group_id).items())
            if lag.log_end is not None
        ]

    def _members(self, group_id: str) -> tuple[str, list[MemberRow]]:
        described = self.admin.describe_consumer_groups_or_errors([group_id]).get(group_id)
        if described is not None and not isinstance(described, BaseException):
            rows = [MemberRow(m.member_id, m.client_id, m.client_host, _partitions(m.assignment))
                    for m in sorted(described.members, key=lambda m: m.client_id)]  # fmt: skip
            return f"group epoch {described.group_epoch}", rows
        desc = self.admin.describe_groups([group_id])[group_id]
        rows = [
            MemberRow(m.member_id, m.client_id, m.client_host,
                      _partitions(m.assignment.partitions if m.assignment is not None else ()))
            for m in sorted(desc.members, key=lambda m: m.client_id)
        ]  # fmt: skip
        return f"state {desc.state}", rows

    def _topic_ids(self) -> dict[Any, str]:
        return {d.topic_id: n for n, d in self.admin.list_topics().items() if d.topic_id is not None}

    def _records(self, group_id: str) -> Iterator[tuple[int, CoordinatorRecord]]:
        """The group's partition of ``__consumer_offsets`` from its start to its end now, as a client reads it."""
        from groupstream.broker.group_routing import partition_for

        internal = self.admin.describe_topics([OFFSETS_TOPIC]).get(OFFSETS_TOPIC)
        if internal is None or not internal.partition_count:
            return
        tp = (OFFSETS_TOPIC, partition_for(group_id, internal.partition_count))
        end = self.admin.log_end_offsets([tp]).get(tp, 0)
        if end <= 0:
            return
        consumer = Consumer({**self.config, "enable.auto.commit": "false",
                             "auto.offset.reset": "earliest", "client.id": "groupstream-console"})  # fmt: skip
        try:
            consumer.assign([tp])
            consumer.seek_to_beginning([tp])
            deadline = time.monotonic() + _HISTORY_READ_S
            position = 0
            while position < end and time.monotonic() < deadline:
                for rec in consumer.poll(0.5):
                    position = rec.offset + 1
                    if rec.key is None:
                        continue
                    try:
                        yield rec.timestamp, decode_record(rec.key, rec.value)
                    except PeerProtocolError:
                        continue
        finally:
            consumer.close()


def _partitions(held: Any) -> str:
    return ", ".join(f"{t}-{p}" for t, p in sorted(held)) or "nothing"
