"""Static membership (``group.instance.id``) in the classic protocol: who keeps an instance id.

A JoinGroup without a member id but with a known instance id comes from a process that claims to be that
static member. Two cases look alike on the wire: the member's process was restarted (a bounce: the old
process is gone and the new one must take its place, its assignment and, when nothing changed, no rebalance),
or an operator started a second process with an instance id that is in use. Kafka's coordinator cannot tell
them apart and always lets the newcomer in, fencing the running process; for a while both consume the same
partitions.

We tell them apart by liveness. A live member talks to the coordinator at least once per heartbeat interval,
so the coordinator waits until the old member id has been silent for about one and a half of its observed
heartbeat intervals (``group.classic.static.member.liveness.ms`` while no interval has been observed yet,
and never longer than its session timeout). If the old member id heartbeats, joins or syncs in the meantime,
its process is alive and the newcomer is the duplicate: it gets FENCED_INSTANCE_ID and never receives a
partition. If it stays silent, the newcomer takes over exactly as in Kafka. A bounce waits at most that
window; setting the property to 0 restores Kafka's immediate takeover.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from groupstream.coordinator.classic_group import ClassicGroup, ClassicMember, GroupState
from groupstream.coordinator.context import Op
from groupstream.coordinator.join_request import JoinRequest
from groupstream.coordinator.records import group_metadata_record
from groupstream.coordinator.responses import join_error, join_response, sync_response
from groupstream.coordinator.timers import heartbeat_key, takeover_key
from groupstream.protocol.consumer_protocol import CONSUMER_PROTOCOL_TYPE, decode_subscription
from groupstream.protocol.error_codes import ErrorCode
from groupstream.protocol.errors import PeerProtocolError
from groupstream.protocol.group_records import GroupMetadataValue

__all__ = ["StaticMembership", "silence_deadline"]

E = ErrorCode
RebalanceStep = Callable[[Op, ClassicGroup], None]

_MARGIN_MS = 500
"""Added to one and a half observed heartbeat intervals: network and scheduling jitter."""


def _same_subscription(protocol_type: str | None, old: bytes, new: bytes) -> bool:
    """Whether two members' metadata for the group's protocol ask for the same thing. A consumer's
    subscription also carries its owned partitions and their generation (KIP-429, KIP-792), and Java's
    sticky assignors put the generation in the user data: a process restarted after its predecessor rejoined
    in a later generation sends other bytes for the same subscription. So, for the consumer protocol, only
    the topics and the rack count; other protocols are compared byte for byte."""
    if old == new:
        return True
    if protocol_type != CONSUMER_PROTOCOL_TYPE:
        return False
    try:
        before, after = decode_subscription(old), decode_subscription(new)
    except PeerProtocolError:
        return False
    return set(before.topics) == set(after.topics) and before.rack_id == after.rack_id


def silence_deadline(member: ClassicMember, now_ms: int, default_window_ms: int) -> int | None:
    """When the process behind ``member`` counts as gone if it stays silent, or None when it already does
    (or the check is off)."""
    if default_window_ms <= 0 or member.last_seen_ms is None:
        return None
    gap = member.heartbeat_gap_ms
    window = default_window_ms if gap is None else gap * 3 // 2 + _MARGIN_MS
    deadline = member.last_seen_ms + min(window, member.session_timeout_ms)
    return deadline if deadline > now_ms else None


class StaticMembership:
    def __init__(self, prepare_rebalance: RebalanceStep, maybe_complete_join_phase: RebalanceStep) -> None:
        self._prepare_rebalance = prepare_rebalance
        self._maybe_complete_join_phase = maybe_complete_join_phase

    # --- a newcomer with a known instance id ------------------------------------------------------------

    def defer_takeover(self, op: Op, group: ClassicGroup, p: JoinRequest, existing_id: str) -> bool:
        """Park the newcomer while the current member may still be alive; False when it can take over now."""
        assert p.instance_id is not None
        key = (group.group_id, p.instance_id)
        earlier = op.ctx.pending_takeovers.pop(key, None)
        if earlier is not None:
            # A newer claim replaces an older one still waiting; the older one may retry.
            op.respond(earlier.parked.token, join_error(earlier.version, E.REBALANCE_IN_PROGRESS))
        deadline = silence_deadline(
            group.members[existing_id], op.now_ms, op.ctx.config.static_member_liveness_ms
        )
        if deadline is None:
            op.cancel(takeover_key(*key))
            return False
        op.ctx.pending_takeovers[key] = p
        op.schedule(takeover_key(*key), deadline - op.now_ms)
        return True

    def member_alive(self, op: Op, group: ClassicGroup, member_id: str, heartbeat: bool) -> None:
        """A valid request from ``member_id``: its process is alive, so a newcomer waiting to take its
        instance id is the duplicate."""
        member = group.members[member_id]
        member.seen(op.now_ms, heartbeat)
        if member.group_instance_id is None:
            return
        key = (group.group_id, member.group_instance_id)
        newcomer = op.ctx.pending_takeovers.pop(key, None)
        if newcomer is not None:
            op.cancel(takeover_key(*key))
            op.respond(newcomer.parked.token, join_error(newcomer.version, E.FENCED_INSTANCE_ID))

    # --- the takeover ------------------------------------------------------------------------------------

    def replace(self, op: Op, group: ClassicGroup, p: JoinRequest, old_id: str, new_id: str) -> None:
        """The old member id's process is gone: the new one takes its place."""
        old = group.members[old_id]
        leader_before = group.leader_id
        self._fence(op, old)
        op.cancel(heartbeat_key(group.group_id, old_id))
        if group.state is GroupState.STABLE and self._replacement_keeps_assignment(group, old, p):
            self._replace_without_rebalance(op, group, old, p, new_id, leader_before)
            return
        member = group.replace_member_id(old_id, new_id)
        member.protocols = p.protocols
        member.rebalance_timeout_ms = p.rebalance_timeout_ms
        member.session_timeout_ms = p.session_timeout_ms
        member.awaiting_join = p.parked
        member.seen(op.now_ms, heartbeat=False)
        op.schedule(heartbeat_key(group.group_id, new_id), member.session_timeout_ms)
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            # In CompletingRebalance the leader may already be assigning to the old id: start over.
            self._prepare_rebalance(op, group)
        else:
            self._maybe_complete_join_phase(op, group)

    def _replace_without_rebalance(
        self,
        op: Op,
        group: ClassicGroup,
        old: ClassicMember,
        p: JoinRequest,
        new_id: str,
        leader_before: str | None,
    ) -> None:
        old.protocols = p.protocols  # session only: the chosen protocol's metadata is unchanged
        was_leader = group.is_leader(old.member_id)
        value = self._view_with_replacement(group, old, new_id, p)
        op.write(group_metadata_record(group.group_id, value))
        op.schedule(heartbeat_key(group.group_id, new_id), p.session_timeout_ms)
        if p.version >= 9:
            # The leader is told it leads but must not compute a new assignment (KIP-814).
            members = (
                [(m.member_id, m.group_instance_id, m.subscription) for m in value.members]
                if was_leader
                else []
            )
            leader, skip_assignment = value.leader or "", was_leader
        else:
            # Older clients are told the old id leads, so a returning leader acts as a follower and simply
            # syncs to get its assignment back instead of reassigning the whole group.
            members, leader, skip_assignment = [], leader_before or "", False
        op.respond(
            p.parked.token,
            join_response(
                p.version,
                member_id=new_id,
                generation=group.generation,
                protocol_type=group.protocol_type,
                protocol_name=group.protocol_name,
                leader=leader,
                members=members,
                skip_assignment=skip_assignment,
            ),
        )

    @staticmethod
    def _replacement_keeps_assignment(group: ClassicGroup, old: ClassicMember, p: JoinRequest) -> bool:
        """No rebalance when the group would choose the same protocol and the member subscribes to the same
        topics with it. (Kafka checks only the protocol; the subscription check also rebalances a static
        member that comes back with another subscription, which its old assignment may not cover.)"""
        name = group.protocol_name
        if name is None or group.select_protocol({old.member_id: p.protocols}) != name:
            return False
        new_metadata = next((x.metadata for x in p.protocols if x.name == name), None)
        old_metadata = old.metadata(name)
        if new_metadata is None or old_metadata is None:
            return False
        return _same_subscription(group.protocol_type, old_metadata, new_metadata)

    @staticmethod
    def _view_with_replacement(
        group: ClassicGroup, old: ClassicMember, new_id: str, p: JoinRequest
    ) -> GroupMetadataValue:
        view = group.durable_view()
        members = tuple(
            m
            if m.member_id != old.member_id
            else replace(
                m,
                member_id=new_id,
                session_timeout=p.session_timeout_ms,
                rebalance_timeout=p.rebalance_timeout_ms,
            )
            for m in view.members
        )
        leader = new_id if group.is_leader(old.member_id) else view.leader
        return GroupMetadataValue(
            view.protocol_type, view.generation, view.protocol, leader, view.current_state_timestamp, members
        )

    @staticmethod
    def _fence(op: Op, member: ClassicMember) -> None:
        """Answer whatever the replaced member id still has parked: that process is now the duplicate."""
        if member.awaiting_join is not None:
            v = member.awaiting_join.version
            op.respond(member.awaiting_join.token, join_error(v, E.FENCED_INSTANCE_ID, member.member_id))
            member.awaiting_join = None
        if member.awaiting_sync is not None:
            op.respond(
                member.awaiting_sync.token, sync_response(member.awaiting_sync.version, E.FENCED_INSTANCE_ID)
            )
            member.awaiting_sync = None
