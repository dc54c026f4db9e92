"""Writing and reading back a few records in tests through our own Producer and Consumer (the one client stack;
issue 14 removed the one-request-at-a-time helpers that tests used before)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from groupstream.client.consumer.consumer import Consumer
from groupstream.client.consumer.records import ConsumerRecord
from groupstream.client.producer import Producer, RecordMetadata
from support.waiting import wait_until


@dataclass(frozen=True)
class Out:
    """One record to produce; ``partition`` None lets the producer's partitioner choose."""

    value: bytes | None
    key: bytes | None = None
    partition: int | None = None
    timestamp_ms: int | None = None
    headers: tuple[tuple[str, bytes | None], ...] = ()


def produce_records(
    bootstrap: str,
    topic: str,
    records: Iterable[Out | bytes],
    *,
    partition: int | None = None,
    config: Mapping[str, Any] | None = None,
    timeout_s: float = 60.0,
) -> list[RecordMetadata]:
    """Produce ``records`` (an `Out`, or a bare value) and wait for every acknowledgement; their metadata in
    order. ``partition`` applies to records that name none. Raises the first delivery error."""
    outs = [r if isinstance(r, Out) else Out(r) for r in records]
    with Producer({"bootstrap.servers": bootstrap, **(config or {})}) as producer:
        handles = [
            producer.produce(topic, o.value, o.key, partition=o.partition if o.partition is not None else partition,
                             timestamp=o.timestamp_ms, headers=list(o.headers) or None)
            for o in outs
        ]  # fmt: skip
        producer.flush(timeout_s)
        return [h.result(timeout_s) for h in handles]


def read_records(
    bootstrap: str, topic: str, partition: int, start: int = 0, end: int | None = None, *, timeout_s: float = 30.0
) -> list[ConsumerRecord]:
    """The records of one partition from ``start`` up to ``end`` (default: its end offset now), read by an
    assigned Consumer; fails when they do not all arrive within ``timeout_s``."""
    tp = (topic, partition)
    out: list[ConsumerRecord] = []
    config = {"bootstrap.servers": bootstrap, "enable.auto.commit": False, "auto.offset.reset": "none"}
    with Consumer(config) as consumer:
        consumer.assign([tp], offsets={tp: start})
        if end is None:
            end = next(iter(consumer.end_offsets([tp], timeout_s).values()))

        def caught_up() -> bool:
            out.extend(r for r in consumer.poll(0.2) if r.offset < end)
            return consumer.position(tp) >= end

        if start < end:  # each poll waits for records itself: no pause between looks
            wait_until(caught_up, timeout_s, f"{topic}[{partition}] read from {start} to {end}", interval_s=0)
    return out
