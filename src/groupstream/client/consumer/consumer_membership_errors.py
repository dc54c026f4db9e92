"""Typed errors a KIP-848 member cannot recover from, surfaced by ``fatal_error()`` on the application's next
call. Each keeps Kafka's error code (they are `KafkaError`s), so callers can branch on the type or on the code;
the message says what to change, because none of these goes away by retrying."""

from __future__ import annotations

from groupstream.client.errors import ClientError, KafkaError
from groupstream.protocol.error_codes import ErrorCode

__all__ = [
    "FencedInstanceIdError",
    "GroupAuthorizationError",
    "GroupMaxSizeReachedError",
    "GroupMembershipError",
    "InvalidHeartbeatError",
    "MaxPollIntervalExceededError",
    "UnreleasedInstanceIdError",
    "UnsupportedAssignorError",
    "fatal_membership_error",
]


class GroupMembershipError(KafkaError):
    """The coordinator refused this member for good; the member stopped heartbeating (state FATAL)."""

    def __init__(self, code: int, message: str | None = None, *, group_id: str) -> None:
        super().__init__(code, message, resource=f"group '{group_id}'")
        self.group_id = group_id


class FencedInstanceIdError(GroupMembershipError):
    """Another consumer took over this ``group.instance.id``: two processes share one static identity."""


class UnreleasedInstanceIdError(GroupMembershipError):
    """The ``group.instance.id`` is still held by a member the coordinator has not released yet."""


class GroupAuthorizationError(GroupMembershipError):
    """The principal may not use this group."""


class GroupMaxSizeReachedError(GroupMembershipError):
    """The group already has ``group.consumer.max.size`` members."""


class UnsupportedAssignorError(GroupMembershipError):
    """``group.remote.assignor`` names an assignor the broker does not have."""


class InvalidHeartbeatError(GroupMembershipError):
    """The coordinator found the heartbeat malformed (INVALID_REQUEST, an invalid regular expression, or a
    broker without the ``consumer`` protocol): a bug or a configuration the broker does not accept."""


class MaxPollIntervalExceededError(ClientError):
    """Not fatal: the member left the group because the application did not poll in time, and rejoins on the
    next poll. Commits of the partitions it had fail until then; this says why instead of a bare
    "commit failed"."""

    def __init__(self, group_id: str, max_poll_interval_ms: int) -> None:
        super().__init__(
            f"group '{group_id}': the member left the group because poll() was not called within "
            f"max.poll.interval.ms ({max_poll_interval_ms} ms); its partitions went to other members and it "
            "rejoins on the next poll(). Spend less time per batch (lower max.poll.records) or raise "
            "max.poll.interval.ms."
        )
        self.group_id = group_id
        self.max_poll_interval_ms = max_poll_interval_ms


_TYPES: dict[int, type[GroupMembershipError]] = {
    ErrorCode.FENCED_INSTANCE_ID: FencedInstanceIdError,
    ErrorCode.UNRELEASED_INSTANCE_ID: UnreleasedInstanceIdError,
    ErrorCode.GROUP_AUTHORIZATION_FAILED: GroupAuthorizationError,
    ErrorCode.GROUP_MAX_SIZE_REACHED: GroupMaxSizeReachedError,
    ErrorCode.UNSUPPORTED_ASSIGNOR: UnsupportedAssignorError,
    ErrorCode.INVALID_REQUEST: InvalidHeartbeatError,
    ErrorCode.INVALID_REGULAR_EXPRESSION: InvalidHeartbeatError,
    ErrorCode.UNSUPPORTED_VERSION: InvalidHeartbeatError,
}

_ADVICE: dict[int, str] = {
    ErrorCode.FENCED_INSTANCE_ID: "another consumer uses the same group.instance.id",
    ErrorCode.UNRELEASED_INSTANCE_ID: "the group.instance.id is still held by another member; retry later",
    ErrorCode.UNSUPPORTED_VERSION: (
        "the broker does not support the consumer group protocol; set group.protocol=classic"
    ),
}


def fatal_membership_error(code: int, message: str | None, group_id: str) -> GroupMembershipError:
    """The typed error for a heartbeat error code the member cannot recover from."""
    advice = _ADVICE.get(code)
    text = message or None
    if advice is not None:
        text = f"{text}: {advice}" if text else advice
    return _TYPES.get(code, GroupMembershipError)(code, text, group_id=group_id)
