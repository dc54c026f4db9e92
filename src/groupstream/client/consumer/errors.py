"""Errors the consumer raises to the application, each saying what happened and what to do."""

from __future__ import annotations

from groupstream.client.errors import ClientError, KafkaError
from groupstream.protocol.error_codes import ErrorCode

__all__ = [
    "CommitFailedError",
    "ConsumerClosedError",
    "NoOffsetForPartitionError",
    "OffsetOutOfRangeError",
    "PartitionNotAssignedError",
]


class ConsumerClosedError(ClientError):
    """The consumer was closed (or its network thread stopped)."""


class PartitionNotAssignedError(ClientError, ValueError):
    """A call named partitions this consumer does not own."""


class CommitFailedError(KafkaError):
    """The group moved on, so these offsets cannot be committed: committing them could overwrite what the
    partitions' new owners committed. The records behind them will be consumed again by whoever owns the
    partitions now."""

    @classmethod
    def from_code(cls, code: int, group_id: str) -> CommitFailedError:
        why = {
            ErrorCode.REBALANCE_IN_PROGRESS: "the group is rebalancing; commit again once it completes (poll)",
            ErrorCode.ILLEGAL_GENERATION: "the group rebalanced since this member's last assignment",
            ErrorCode.UNKNOWN_MEMBER_ID: (
                "the coordinator no longer knows this member: it was removed, most often because poll() was not "
                "called within max.poll.interval.ms or heartbeats stopped for session.timeout.ms; it rejoins on "
                "the next poll()"
            ),
            ErrorCode.STALE_MEMBER_EPOCH: "the member's epoch is stale: it is catching up with a new assignment",
            ErrorCode.FENCED_MEMBER_EPOCH: "the member was fenced (its epoch is behind the group's); it rejoins",
            ErrorCode.FENCED_INSTANCE_ID: "another process took over this group.instance.id",
        }.get(ErrorCode(code))
        return cls(code, f"commit refused: {why}" if why else None, resource=f"group '{group_id}'")


class NoOffsetForPartitionError(KafkaError):
    """``auto.offset.reset=none`` and a partition has no committed offset (or its position went out of
    range): the consumer will not guess where to start."""

    def __init__(self, partitions: str, why: str) -> None:
        super().__init__(
            ErrorCode.OFFSET_OUT_OF_RANGE,
            f"{why} and auto.offset.reset is none: seek() to a position, or set auto.offset.reset to earliest or "
            "latest",
            resource=partitions,
        )


class OffsetOutOfRangeError(NoOffsetForPartitionError):
    """The position is outside the partition's log (deleted by retention, or never written)."""
