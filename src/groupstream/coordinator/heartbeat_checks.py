"""ConsumerGroupHeartbeat's checks of a request before the coordinator acts on it: the request's own fields
(Kafka's checks, in Kafka's order, with Kafka's messages) and the member epoch it states against the member's.
Each refusal is a `HeartbeatRefused` carrying the error code the answer gets."""

from __future__ import annotations

import re
from typing import Any

from groupstream.assignment.registry import SERVER_ASSIGNORS
from groupstream.coordinator.consumer_group import ConsumerMember, PartitionSet, from_topic_partitions
from groupstream.protocol.error_codes import ErrorCode
from groupstream.protocol.messages.consumer_group_heartbeat import LEAVE_EPOCH, STATIC_LEAVE_EPOCH

E = ErrorCode
_CLIENT_GENERATED_MEMBER_ID_FROM = 1  # KIP-1082: from v1 the client names itself


class HeartbeatRefused(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def validate(body: Any, version: int) -> None:
    """Kafka's checks, in Kafka's order, with Kafka's messages."""
    epoch = int(body.member_epoch)
    if (version >= _CLIENT_GENERATED_MEMBER_ID_FROM or epoch > 0 or epoch == LEAVE_EPOCH) and not body.member_id:
        raise HeartbeatRefused(E.INVALID_REQUEST, "MemberId can't be empty.")
    if not body.group_id:
        raise HeartbeatRefused(E.INVALID_REQUEST, "GroupId can't be empty.")
    if body.instance_id == "":
        raise HeartbeatRefused(E.INVALID_REQUEST, "InstanceId can't be empty.")
    if body.rack_id == "":
        raise HeartbeatRefused(E.INVALID_REQUEST, "RackId can't be empty.")
    regex = getattr(body, "subscribed_topic_regex", None)
    if epoch == 0:
        if body.rebalance_timeout_ms == -1:
            raise HeartbeatRefused(E.INVALID_REQUEST, "RebalanceTimeoutMs must be provided in first request.")
        if body.topic_partitions is None or len(body.topic_partitions) > 0:
            raise HeartbeatRefused(E.INVALID_REQUEST, "TopicPartitions must be empty when (re-)joining.")
        if body.subscribed_topic_names is None and regex is None:
            raise HeartbeatRefused(
                E.INVALID_REQUEST,
                "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.",
            )
    elif epoch == STATIC_LEAVE_EPOCH:
        if body.instance_id is None:
            raise HeartbeatRefused(E.INVALID_REQUEST, "InstanceId can't be null.")
    elif epoch < STATIC_LEAVE_EPOCH:
        raise HeartbeatRefused(E.INVALID_REQUEST, "MemberEpoch is invalid.")
    if body.server_assignor is not None and body.server_assignor not in SERVER_ASSIGNORS:
        raise HeartbeatRefused(
            E.UNSUPPORTED_ASSIGNOR,
            f"ServerAssignor {body.server_assignor} is not supported. "
            f"Supported assignors: {', '.join(SERVER_ASSIGNORS)}.",
        )
    if regex:
        try:
            re.compile(regex)
        except re.error as e:
            raise HeartbeatRefused(
                E.INVALID_REGULAR_EXPRESSION, f"SubscribedTopicRegex `{regex}` is not a valid regular expression: {e}."
            ) from None


def owned_partitions(body: Any) -> PartitionSet | None:
    """The partitions a heartbeat says its member owns; None when it does not say (an unchanged assignment)."""
    return None if body.topic_partitions is None else from_topic_partitions(body.topic_partitions)


def check_epoch(member: ConsumerMember, received: int, owned: PartitionSet | None) -> None:
    a = member.assignment
    if received > a.epoch:
        raise HeartbeatRefused(
            E.FENCED_MEMBER_EPOCH,
            f"The consumer group member has a greater member epoch ({received}) than the one known by the group "
            f"coordinator ({a.epoch}). The member must abandon all its partitions and rejoin.",
        )
    if received < a.epoch and (received != a.previous_epoch or owned is None or not owned <= a.assigned):
        # The previous epoch with a subset of the assignment is accepted: the answer that bumped it was lost.
        raise HeartbeatRefused(
            E.FENCED_MEMBER_EPOCH,
            f"The consumer group member has a smaller member epoch ({received}) than the one known by the group "
            f"coordinator ({a.epoch}). The member must abandon all its partitions and rejoin.",
        )
