"""The few consumer calls a region member needs (`member.RegionConsumer`), on our `groupstream.Consumer`, so a
region runs against our broker or any Kafka cluster."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from groupstream.assignment.types import TopicPartition
from groupstream.client.admin import Admin
from groupstream.client.consumer.consumer import Consumer

__all__ = ["ConsumerAdapter"]

Callback = Callable[[frozenset[TopicPartition]], None]


class _Listener:
    def __init__(self, on_revoked: Callback, on_assigned: Callback) -> None:
        self._revoked = on_revoked
        self._assigned = on_assigned

    def on_partitions_revoked(self, partitions: list[TopicPartition]) -> None:
        self._revoked(frozenset(partitions))

    def on_partitions_lost(self, partitions: list[TopicPartition]) -> None:
        self._revoked(frozenset(partitions))

    def on_partitions_assigned(self, partitions: list[TopicPartition]) -> None:
        self._assigned(frozenset(partitions))


class ConsumerAdapter:
    def __init__(self, config: Mapping[str, Any]) -> None:
        """``config``: consumer properties; auto commit is turned off (the member commits at drain)."""
        self.config = {**config, "enable.auto.commit": False}
        self.consumer = Consumer(self.config)
        self._admin = Admin({"bootstrap.servers": self.config["bootstrap.servers"]})

    def subscribe(self, topics: list[str], on_revoked: Callback, on_assigned: Callback) -> None:
        self.consumer.subscribe(topics, listener=_Listener(on_revoked, on_assigned))

    def poll(self, timeout_s: float) -> list[Any]:
        return self.consumer.poll(timeout_s).to_list()

    def serve(self) -> None:
        self.consumer.run_callbacks()

    def seek(self, tp: TopicPartition, offset: int) -> None:
        if tp in set(self.consumer.assignment()):
            self.consumer.seek(tp, offset)

    def commit_sync(self, offsets: Mapping[TopicPartition, int]) -> None:
        if offsets:
            self.consumer.commit({tp: int(o) for tp, o in offsets.items()})

    def committed(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        found = self.consumer.committed(list(partitions))
        return {tp: om.offset for tp, om in found.items() if om is not None}

    def partitions_of(self, topics: Iterable[str]) -> frozenset[TopicPartition]:
        described = self._admin.list_topics()
        return frozenset(
            TopicPartition(t, p)
            for t in topics
            if t in described
            for p in range(described[t].partition_count)
        )

    def start_offsets(self, partitions: Iterable[TopicPartition], position: str) -> dict[TopicPartition, int]:
        tps = sorted(partitions)
        if not tps:
            return {}
        if position == "end":
            return self.consumer.end_offsets(tps)
        beginning = self.consumer.beginning_offsets(tps)
        if position == "beginning":
            return beginning
        if position == "committed":
            return {**beginning, **self.committed(tps)}
        stamp = int(position)  # a timestamp in ms
        found = self.consumer.offsets_for_times(dict.fromkeys(tps, stamp))
        end = self.consumer.end_offsets(tps)
        return {tp: (hit[0] if hit is not None else end[tp]) for tp, hit in found.items()}

    def close(self) -> None:
        try:
            self.consumer.close()
        finally:
            self._admin.close()
