"""What a coordinator handler returns: records to write, responses to send once they are durable, timers.

The shape follows Kafka's group coordinator: a handler never touches durable state; the runtime appends the
records to the shard's `__consumer_offsets` partition, then calls ``shard.replay`` for each (the only code that
changes durable state), then sends the responses. Responses may answer the request being handled or requests
parked earlier (a JoinGroup answered when the rebalance completes); each is addressed by the opaque token the
runtime gave that request. Timers are data: the runtime schedules them on its clock and calls
``shard.on_timer(key, now_ms, metadata)`` when one fires. A result's records are replayed before the shard is
called again (see ``groupstream.coordinator.shard``).
"""

from __future__ import annotations

from collections.abc import Iterable, MutableMapping
from dataclasses import dataclass, field
from typing import Any

from groupstream.protocol.group_records import CoordinatorRecord

__all__ = [
    "CancelTimer",
    "CoordinatorRecord",
    "CoordinatorResult",
    "RequestToken",
    "ScheduleTimer",
    "TimerOp",
    "apply_timer_ops",
]

RequestToken = int
"""Opaque id the runtime gives each request so that a response can be sent later."""


@dataclass(frozen=True, slots=True)
class ScheduleTimer:
    """Run ``on_timer(key)`` at ``deadline_ms``; scheduling a key again replaces the earlier deadline."""

    key: str
    deadline_ms: int


@dataclass(frozen=True, slots=True)
class CancelTimer:
    key: str


TimerOp = ScheduleTimer | CancelTimer


def apply_timer_ops(deadlines: MutableMapping[str, int], ops: Iterable[TimerOp]) -> None:
    """What a manual clock (the tests' and the benchmarks' drivers) does with a result's timers: a ScheduleTimer
    sets or moves its key's deadline, a CancelTimer drops it."""
    for op in ops:
        if isinstance(op, ScheduleTimer):
            deadlines[op.key] = op.deadline_ms
        else:
            deadlines.pop(op.key, None)


@dataclass(slots=True)
class CoordinatorResult:
    records: list[CoordinatorRecord] = field(default_factory=list)
    responses: list[tuple[RequestToken, Any]] = field(default_factory=list)
    timers: list[TimerOp] = field(default_factory=list)

    def extend(self, other: CoordinatorResult) -> CoordinatorResult:
        self.records.extend(other.records)
        self.responses.extend(other.responses)
        self.timers.extend(other.timers)
        return self
