"""State a shard's handler modules share, and the per-call accumulator they write their effects into.

Handlers never send, sleep or append: they add responses, records and timer operations to an :class:`Op`,
which the shard returns as one `CoordinatorResult`. The shard remembers each timer deadline it asked for, so a
timer that fires after it was cancelled or moved (the runtime may race a cancel) is recognised and ignored.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from groupstream.coordinator.classic_group import ClassicGroup
from groupstream.coordinator.config import GroupCoordinatorConfig
from groupstream.coordinator.consumer_group import ConsumerGroup
from groupstream.coordinator.join_request import JoinRequest
from groupstream.coordinator.offsets import OffsetStore
from groupstream.coordinator.result import (
    CancelTimer,
    CoordinatorRecord,
    CoordinatorResult,
    RequestToken,
    ScheduleTimer,
)

__all__ = ["Op", "ShardContext"]


class ShardContext:
    def __init__(
        self, partition: int, config: GroupCoordinatorConfig, new_member_id: Callable[[str], str]
    ) -> None:
        self.partition = partition
        self.config = config
        self.new_member_id = new_member_id
        self.groups: dict[str, ClassicGroup] = {}
        self.consumer_groups: dict[str, ConsumerGroup] = {}
        """KIP-848 groups; a group id is in at most one of ``groups`` and ``consumer_groups``."""
        self.offsets = OffsetStore()
        self.deadlines: dict[str, int] = {}
        self.pending_takeovers: dict[tuple[str, str], JoinRequest] = {}
        """(group id, instance id) -> a newcomer's parked JoinGroup, waiting to learn whether the static
        member it would replace is still alive (session state; see ``static_membership``)."""

    def forget_if_phantom(self, group: ClassicGroup) -> None:
        """Drop a group that exists only because a first JoinGroup created it and then failed or left:
        nothing was written for it and nothing waits in it, so it would otherwise linger in ListGroups."""
        if (
            not group.in_log
            and not group.members
            and not group.pending_join_members
            and not self.offsets.has_offsets(group.group_id)
            and self.groups.get(group.group_id) is group
        ):
            del self.groups[group.group_id]


@dataclass(slots=True)
class Op:
    """One call into the shard: its clock reading and the effects it produces."""

    ctx: ShardContext
    now_ms: int
    result: CoordinatorResult = field(default_factory=CoordinatorResult)

    def respond(self, token: RequestToken, response: Any) -> None:
        self.result.responses.append((token, response))

    def write(self, record: CoordinatorRecord) -> None:
        self.result.records.append(record)

    def schedule(self, key: str, delay_ms: int) -> None:
        deadline = self.now_ms + max(delay_ms, 0)
        self.ctx.deadlines[key] = deadline
        self.result.timers.append(ScheduleTimer(key, deadline))

    def cancel(self, key: str) -> None:
        if self.ctx.deadlines.pop(key, None) is not None:
            self.result.timers.append(CancelTimer(key))
