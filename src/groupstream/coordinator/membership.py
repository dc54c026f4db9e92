"""JoinGroup, SyncGroup, Heartbeat, LeaveGroup and the timers that drive classic rebalances.

The flow follows Kafka's classic coordinator. A join of a new member, a leave, a missed heartbeat, a member
rejoining with other metadata (or the leader rejoining, which is how a cooperative leader asks for its
follow-up rebalance) moves the group to PreparingRebalance. The join phase ends when every known member has
rejoined or the rebalance timeout fires (members that did not rejoin are dropped, static ones are kept); the
generation goes up, a protocol every member supports is chosen, each parked JoinGroup is answered (the leader's
with every member's metadata) and the group waits in CompletingRebalance for the leader's SyncGroup. The
leader's assignment is written as a GroupMetadata record and handed to each member; replaying that record is
what makes the group Stable. An empty group's first rebalance waits ``group.initial.rebalance.delay.ms``,
again each time another member arrives, up to the rebalance timeout.

Members' metadata and assignments are opaque bytes here: the cooperative protocol's owned partitions and any
user data pass through untouched.

Unlike Kafka, a parked request is never silently dropped: when a member is removed its parked JoinGroup and
SyncGroup are answered (UNKNOWN_MEMBER_ID), and a request superseded by a newer one from the same member is
answered REBALANCE_IN_PROGRESS, so the runtime never holds a request nobody will answer.
"""

from __future__ import annotations

from typing import Any

from groupstream.coordinator.classic_group import (
    ClassicGroup,
    ClassicMember,
    GroupState,
    InitialDelay,
    Parked,
)
from groupstream.coordinator.context import Op
from groupstream.coordinator.join_request import JoinRequest, join_request
from groupstream.coordinator.records import group_metadata_record
from groupstream.coordinator.request import ShardRequest, body_as
from groupstream.coordinator.responses import (
    HEARTBEAT,
    JOIN_GROUP,
    LEAVE_GROUP,
    SYNC_GROUP,
    JoinMember,
    heartbeat_response,
    join_error,
    join_response,
    sync_response,
)
from groupstream.coordinator.static_membership import StaticMembership
from groupstream.coordinator.timers import heartbeat_key, join_key, sync_key
from groupstream.protocol.error_codes import ErrorCode
from groupstream.protocol.group_records import GroupMetadataValue

__all__ = ["ClassicMembership"]

_S = GroupState
E = ErrorCode


class ClassicMembership:
    def __init__(self) -> None:
        self._static = StaticMembership(self._prepare_rebalance, self._maybe_complete_join_phase)

    # --- JoinGroup -----------------------------------------------------------------------------------------

    def join(self, op: Op, req: ShardRequest) -> None:
        p = join_request(req)
        group_id = body_as(JOIN_GROUP, req).group_id
        cfg = op.ctx.config
        if not group_id:
            op.respond(req.token, join_error(p.version, E.INVALID_GROUP_ID, p.member_id))
            return
        if not cfg.min_session_timeout_ms <= p.session_timeout_ms <= cfg.max_session_timeout_ms:
            op.respond(req.token, join_error(p.version, E.INVALID_SESSION_TIMEOUT, p.member_id))
            return
        group = op.ctx.groups.get(group_id)
        if group is None:
            if p.member_id:
                op.respond(req.token, join_error(p.version, E.UNKNOWN_MEMBER_ID, p.member_id))
                return
            group = op.ctx.groups[group_id] = ClassicGroup(group_id, op.now_ms)
        if not self._accepts_joining_member(op, group, p.member_id):
            op.respond(req.token, join_error(p.version, E.GROUP_MAX_SIZE_REACHED))
            if p.member_id in group.members:
                # Kafka's way to shrink a group whose size limit was lowered: the last rejoiners are let go.
                # (Kafka then waits out the rebalance timeout; we finish at once if everyone left has joined.)
                self._drop_member(op, group, p.member_id)
                self._maybe_complete_join_phase(op, group)
        elif not p.member_id:
            self._join_new_member(op, group, p)
        else:
            self._join_existing_member(op, group, p)
        op.ctx.forget_if_phantom(group)

    @staticmethod
    def _accepts_joining_member(op: Op, group: ClassicGroup, member_id: str) -> bool:
        limit = op.ctx.config.max_size
        if group.state in (_S.EMPTY, _S.DEAD):
            return True
        if group.state is _S.PREPARING_REBALANCE:
            member = group.members.get(member_id)
            return (
                member is not None and member.awaiting_join is not None
            ) or group.awaiting_join_count() < limit
        return member_id in group.members or len(group.members) < limit

    def _join_new_member(
        self, op: Op, group: ClassicGroup, p: JoinRequest, check_liveness: bool = True
    ) -> None:
        if group.state is _S.DEAD:
            op.respond(p.parked.token, join_error(p.version, E.COORDINATOR_NOT_AVAILABLE))
            return
        if not group.supports_protocols(p.protocol_type, (x.name for x in p.protocols)):
            op.respond(p.parked.token, join_error(p.version, E.INCONSISTENT_GROUP_PROTOCOL))
            return
        if p.instance_id is not None:
            existing = group.static_members.get(p.instance_id)
            if (
                existing is not None
                and check_liveness
                and self._static.defer_takeover(op, group, p, existing)
            ):
                return
            new_id = op.ctx.new_member_id(p.instance_id)
            if existing is not None:
                self._static.replace(op, group, p, existing, new_id)
            else:
                self._add_member(op, group, p, new_id)
            return
        new_id = op.ctx.new_member_id(p.client_id)
        if p.version >= 4:
            # The member must come back with this id, so that a client retrying a timed-out first join does not
            # leave a trail of members nobody will ever hear from again.
            group.pending_join_members.add(new_id)
            op.schedule(heartbeat_key(group.group_id, new_id), p.session_timeout_ms)
            op.respond(p.parked.token, join_error(p.version, E.MEMBER_ID_REQUIRED, new_id))
        else:
            self._add_member(op, group, p, new_id)

    def _join_existing_member(self, op: Op, group: ClassicGroup, p: JoinRequest) -> None:
        token = p.parked.token
        if group.state is _S.DEAD:
            op.respond(token, join_error(p.version, E.COORDINATOR_NOT_AVAILABLE, p.member_id))
            return
        if not group.supports_protocols(p.protocol_type, (x.name for x in p.protocols)):
            op.respond(token, join_error(p.version, E.INCONSISTENT_GROUP_PROTOCOL, p.member_id))
            return
        if p.member_id in group.pending_join_members:
            if p.instance_id is not None:
                # Pending ids are handed to dynamic members only; Kafka treats this as its own bug.
                op.respond(token, join_error(p.version, E.UNKNOWN_SERVER_ERROR, p.member_id))
                return
            self._add_member(op, group, p, p.member_id)
            return
        error = group.validate_member(p.member_id, p.instance_id)
        if error is not None:
            op.respond(token, join_error(p.version, error, p.member_id))
            return
        self._static.member_alive(op, group, p.member_id, heartbeat=False)
        member = group.members[p.member_id]
        if group.state is _S.PREPARING_REBALANCE:
            self._update_member(op, group, member, p)
        elif group.state is _S.COMPLETING_REBALANCE:
            if member.matches(p.protocols):
                # It probably missed the JoinGroup answer: repeat it.
                op.respond(token, self._current_join_response(group, member.member_id, p.version))
            else:
                self._update_member(op, group, member, p)
        elif group.state is _S.STABLE:
            if group.is_leader(member.member_id) or not member.matches(p.protocols):
                # A leader's rejoin is how it asks for a rebalance the metadata does not show (new partitions,
                # a cooperative follow-up); a follower's changed subscription needs a new assignment.
                self._update_member(op, group, member, p)
            else:
                op.respond(
                    token, self._current_join_response(group, member.member_id, p.version, leader_view=False)
                )
        else:
            op.respond(token, join_error(p.version, E.UNKNOWN_MEMBER_ID, p.member_id))

    def _current_join_response(
        self, group: ClassicGroup, member_id: str, version: int, leader_view: bool = True
    ) -> Any:
        members = self._join_members(group) if leader_view and group.is_leader(member_id) else []
        return join_response(
            version,
            member_id=member_id,
            generation=group.generation,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
            leader=group.leader_id or "",
            members=members,
        )

    @staticmethod
    def _join_members(group: ClassicGroup) -> list[JoinMember]:
        return [
            (m.member_id, m.group_instance_id, m.metadata(group.protocol_name) or b"")
            for m in group.members.values()
        ]

    def _add_member(self, op: Op, group: ClassicGroup, p: JoinRequest, member_id: str) -> None:
        member = ClassicMember(
            member_id=member_id,
            group_instance_id=p.instance_id,
            client_id=p.client_id,
            client_host=p.client_host,
            rebalance_timeout_ms=p.rebalance_timeout_ms,
            session_timeout_ms=p.session_timeout_ms,
            protocol_type=p.protocol_type,
            protocols=p.protocols,
            is_new=True,
        )
        if group.state is _S.PREPARING_REBALANCE and group.previous_state is _S.EMPTY:
            group.new_member_added = True
        group.add(member, p.parked)
        # A new member cannot heartbeat while its join is parked; this bounds how long a gone client lingers.
        op.schedule(heartbeat_key(group.group_id, member_id), op.ctx.config.new_member_join_timeout_ms)
        self._maybe_prepare_rebalance_or_complete_join(op, group)

    def _update_member(self, op: Op, group: ClassicGroup, member: ClassicMember, p: JoinRequest) -> None:
        if member.awaiting_join is not None and member.awaiting_join.token != p.parked.token:
            op.respond(
                member.awaiting_join.token,
                join_error(member.awaiting_join.version, E.REBALANCE_IN_PROGRESS, member.member_id),
            )
        member.protocols = p.protocols
        member.rebalance_timeout_ms = p.rebalance_timeout_ms
        member.session_timeout_ms = p.session_timeout_ms
        member.awaiting_join = p.parked
        self._maybe_prepare_rebalance_or_complete_join(op, group)

    # --- the rebalance -----------------------------------------------------------------------------------------

    def _maybe_prepare_rebalance_or_complete_join(self, op: Op, group: ClassicGroup) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(op, group)
        else:
            self._maybe_complete_join_phase(op, group)

    def _prepare_rebalance(self, op: Op, group: ClassicGroup) -> None:
        if group.state is _S.COMPLETING_REBALANCE:
            self._answer_parked_syncs(op, group, E.REBALANCE_IN_PROGRESS)
        op.cancel(sync_key(group.group_id))
        group.pending_sync_members.clear()
        initial = group.state is _S.EMPTY
        if initial:
            delay = op.ctx.config.initial_rebalance_delay_ms
            group.initial_delay = InitialDelay(delay, max(group.rebalance_timeout_ms() - delay, 0))
            group.new_member_added = False
            op.schedule(join_key(group.group_id), delay)
        else:
            group.initial_delay = None
        group.transition_to(_S.PREPARING_REBALANCE, op.now_ms)
        if not initial:
            if group.has_all_members_joined():
                self._complete_join(op, group)
            else:
                op.schedule(join_key(group.group_id), group.rebalance_timeout_ms())

    def _maybe_complete_join_phase(self, op: Op, group: ClassicGroup) -> None:
        if (
            group.state is _S.PREPARING_REBALANCE
            and group.previous_state is not _S.EMPTY  # the initial rebalance waits for its delay
            and group.has_all_members_joined()
        ):
            self._complete_join(op, group)

    def _complete_join(self, op: Op, group: ClassicGroup) -> None:
        op.cancel(join_key(group.group_id))
        group.initial_delay = None
        for member in [
            m for m in group.members.values() if m.awaiting_join is None and m.group_instance_id is None
        ]:
            self._drop_member(op, group, member.member_id)
        if group.state is _S.DEAD:
            return
        if group.members and not group.maybe_elect_new_joined_leader():
            # Nobody rejoined (only static members are left): wait for sessions to expire them.
            op.schedule(join_key(group.group_id), group.rebalance_timeout_ms())
            return
        if not group.members:
            # The next generation is empty; replaying this record makes the group Empty.
            value = GroupMetadataValue(
                protocol_type=group.protocol_type or "",
                generation=group.generation + 1,
                protocol=None,
                leader=None,
                current_state_timestamp=op.now_ms,
                members=(),
            )
            op.write(group_metadata_record(group.group_id, value))
            return
        group.generation += 1
        group.protocol_name = group.select_protocol()
        group.transition_to(_S.COMPLETING_REBALANCE, op.now_ms)
        group.pending_sync_members.clear()
        members = self._join_members(group)
        for member in group.members.values():
            parked = member.awaiting_join
            if parked is not None:
                op.respond(
                    parked.token,
                    join_response(
                        parked.version,
                        member_id=member.member_id,
                        generation=group.generation,
                        protocol_type=group.protocol_type,
                        protocol_name=group.protocol_name,
                        leader=group.leader_id or "",
                        members=members if group.is_leader(member.member_id) else [],
                    ),
                )
                member.awaiting_join = None
            op.schedule(heartbeat_key(group.group_id, member.member_id), member.session_timeout_ms)
            member.is_new = False
            group.pending_sync_members.add(member.member_id)
        group.sync_generation = group.generation
        op.schedule(sync_key(group.group_id), group.rebalance_timeout_ms())

    def _answer_parked_syncs(self, op: Op, group: ClassicGroup, error: ErrorCode) -> None:
        for member in group.members.values():
            parked = member.awaiting_sync
            if parked is not None:
                op.respond(parked.token, sync_response(parked.version, error))
                member.awaiting_sync = None
                op.schedule(heartbeat_key(group.group_id, member.member_id), member.session_timeout_ms)

    def _drop_member(self, op: Op, group: ClassicGroup, member_id: str) -> None:
        """Remove a member, answering whatever it has parked so that no request is left hanging."""
        member = group.members.get(member_id)
        op.cancel(heartbeat_key(group.group_id, member_id))
        if member is not None:
            if member.awaiting_join is not None:
                op.respond(
                    member.awaiting_join.token, join_error(member.awaiting_join.version, E.UNKNOWN_MEMBER_ID)
                )
            if member.awaiting_sync is not None:
                op.respond(
                    member.awaiting_sync.token,
                    sync_response(member.awaiting_sync.version, E.UNKNOWN_MEMBER_ID),
                )
        group.remove(member_id)

    # --- SyncGroup -------------------------------------------------------------------------------------------

    def sync(self, op: Op, req: ShardRequest) -> None:
        body = body_as(SYNC_GROUP, req)
        v = req.version
        group_id = str(body.group_id)
        member_id = str(body.member_id)
        if not group_id:
            op.respond(req.token, sync_response(v, E.INVALID_GROUP_ID))
            return
        group = op.ctx.groups.get(group_id)
        if group is None or group.state is _S.EMPTY:
            op.respond(req.token, sync_response(v, E.UNKNOWN_MEMBER_ID))
            return
        error = self._validate_sync(group, body)
        if error is not None:
            op.respond(req.token, sync_response(v, error))
            return
        self._static.member_alive(op, group, member_id, heartbeat=False)
        if group.state is _S.PREPARING_REBALANCE:
            op.respond(req.token, sync_response(v, E.REBALANCE_IN_PROGRESS))
            return
        member = group.members[member_id]
        if group.state is _S.STABLE:
            self._synced(op, group, member_id)
            op.respond(
                req.token,
                sync_response(v, E.NONE, member.assignment, group.protocol_type, group.protocol_name),
            )
            return
        # CompletingRebalance: park until the leader's assignment is written.
        if member.awaiting_sync is not None and member.awaiting_sync.token != req.token:
            op.respond(
                member.awaiting_sync.token,
                sync_response(member.awaiting_sync.version, E.REBALANCE_IN_PROGRESS),
            )
        member.awaiting_sync = Parked(req.token, v)
        self._synced(op, group, member_id)
        if group.is_leader(member_id):
            self._store_assignment(
                op, group, {str(a.member_id): bytes(a.assignment) for a in body.assignments}
            )

    @staticmethod
    def _validate_sync(group: ClassicGroup, body: Any) -> ErrorCode | None:
        if group.state is _S.DEAD:
            return E.COORDINATOR_NOT_AVAILABLE
        error = group.validate_member(str(body.member_id), body.group_instance_id)
        if error is not None:
            return error
        if body.generation_id != group.generation:
            return E.ILLEGAL_GENERATION
        if _inconsistent(body.protocol_type, group.protocol_type) or _inconsistent(
            body.protocol_name, group.protocol_name
        ):
            return E.INCONSISTENT_GROUP_PROTOCOL
        return None

    @staticmethod
    def _synced(op: Op, group: ClassicGroup, member_id: str) -> None:
        group.pending_sync_members.discard(member_id)
        if group.state not in (_S.COMPLETING_REBALANCE, _S.STABLE) or not group.pending_sync_members:
            op.cancel(sync_key(group.group_id))

    def _store_assignment(self, op: Op, group: ClassicGroup, assignment: dict[str, bytes]) -> None:
        """Write the leader's assignment (members it left out get an empty one) and answer the parked syncs;
        replaying the record applies it and makes the group Stable."""
        value = GroupMetadataValue(
            protocol_type=group.protocol_type or "",
            generation=group.generation,
            protocol=group.protocol_name,
            leader=group.leader_id,
            current_state_timestamp=op.now_ms,
            members=tuple(
                m.to_metadata(group.protocol_name, assignment.get(m.member_id, b""))
                for m in group.members.values()
            ),
        )
        op.write(group_metadata_record(group.group_id, value))
        for member in group.members.values():
            parked = member.awaiting_sync
            if parked is not None:
                op.respond(
                    parked.token,
                    sync_response(
                        parked.version,
                        E.NONE,
                        assignment.get(member.member_id, b""),
                        group.protocol_type,
                        group.protocol_name,
                    ),
                )
                member.awaiting_sync = None
                op.schedule(heartbeat_key(group.group_id, member.member_id), member.session_timeout_ms)

    # --- Heartbeat -------------------------------------------------------------------------------------------

    def heartbeat(self, op: Op, req: ShardRequest) -> None:
        body = body_as(HEARTBEAT, req)
        group_id = str(body.group_id)
        member_id = str(body.member_id)
        if not group_id:
            op.respond(req.token, heartbeat_response(E.INVALID_GROUP_ID))
            return
        group = op.ctx.groups.get(group_id)
        if group is None:
            op.respond(req.token, heartbeat_response(E.UNKNOWN_MEMBER_ID))
            return
        if group.state is _S.DEAD:
            op.respond(req.token, heartbeat_response(E.COORDINATOR_NOT_AVAILABLE))
            return
        error = group.validate_member(member_id, body.group_instance_id)
        if error is None:
            self._static.member_alive(op, group, member_id, heartbeat=True)
        if error is None and body.generation_id != group.generation:
            error = E.ILLEGAL_GENERATION
        if error is None and group.state is _S.EMPTY:
            error = E.UNKNOWN_MEMBER_ID
        if error is not None:
            op.respond(req.token, heartbeat_response(error))
            return
        member = group.members[member_id]
        op.schedule(heartbeat_key(group_id, member_id), member.session_timeout_ms)
        # A rebalance is how members learn of one: their next heartbeat says so.
        rebalancing = group.state is _S.PREPARING_REBALANCE
        op.respond(req.token, heartbeat_response(E.REBALANCE_IN_PROGRESS if rebalancing else E.NONE))

    # --- LeaveGroup ------------------------------------------------------------------------------------------

    def leave(self, op: Op, req: ShardRequest) -> None:
        body = body_as(LEAVE_GROUP, req)
        v = req.version
        R = LEAVE_GROUP.Response
        group_id = str(body.group_id)
        group = op.ctx.groups.get(group_id) if group_id else None
        if group is None or group.state is _S.DEAD:
            error = (
                E.INVALID_GROUP_ID
                if not group_id
                else E.UNKNOWN_MEMBER_ID
                if group is None
                else E.COORDINATOR_NOT_AVAILABLE
            )
            op.respond(req.token, R(throttle_time_ms=0, error_code=int(error), members=[]))
            return
        identities: list[tuple[str, str | None]] = (
            [(str(m.member_id), m.group_instance_id) for m in body.members]
            if v >= 3
            else [(str(body.member_id), None)]
        )
        results: list[tuple[str, str | None, ErrorCode]] = []
        members_before = len(group.members)
        for member_id, instance_id in identities:
            results.append((member_id, instance_id, self._leave_one(op, group, member_id, instance_id)))
        # Kafka rebalances even when only members that never joined (pending ids) left; nobody's assignment
        # changes then, so we do not.
        if len(group.members) < members_before:
            if group.state in (_S.STABLE, _S.COMPLETING_REBALANCE):
                self._maybe_prepare_rebalance_or_complete_join(op, group)
            elif group.state is _S.PREPARING_REBALANCE:
                self._maybe_complete_join_phase(op, group)
        op.ctx.forget_if_phantom(group)
        if v < 3:
            op.respond(req.token, R(throttle_time_ms=0, error_code=int(results[0][2]), members=[]))
            return
        op.respond(
            req.token,
            R(
                throttle_time_ms=0,
                error_code=0,
                members=[
                    R.MemberResponse(member_id=mid, group_instance_id=iid, error_code=int(err))
                    for mid, iid, err in results
                ],
            ),
        )

    def _leave_one(self, op: Op, group: ClassicGroup, member_id: str, instance_id: str | None) -> ErrorCode:
        if not member_id:
            # An admin removing a static member by its instance id alone.
            if instance_id is not None and instance_id in group.static_members:
                self._drop_member(op, group, group.static_members[instance_id])
                return E.NONE
            return E.UNKNOWN_MEMBER_ID
        if member_id in group.pending_join_members:
            group.pending_join_members.discard(member_id)
            op.cancel(heartbeat_key(group.group_id, member_id))
            return E.NONE
        error = group.validate_member(member_id, instance_id)
        if error is not None:
            return error
        self._drop_member(op, group, member_id)
        return E.NONE

    # --- timers ----------------------------------------------------------------------------------------------

    def on_heartbeat_expired(self, op: Op, group_id: str, member_id: str) -> None:
        group = op.ctx.groups.get(group_id)
        if group is None or group.state is _S.DEAD:
            return
        if member_id in group.pending_join_members:
            group.pending_join_members.discard(member_id)
            if group.state is _S.PREPARING_REBALANCE and group.has_all_members_joined():
                self._complete_join(op, group)
            op.ctx.forget_if_phantom(group)
            return
        member = group.members.get(member_id)
        if member is None or member.has_satisfied_heartbeat():
            return
        self._drop_member(op, group, member_id)
        if group.state in (_S.STABLE, _S.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance_or_complete_join(op, group)
        elif group.state is _S.PREPARING_REBALANCE and group.has_all_members_joined():
            self._complete_join(op, group)
        op.ctx.forget_if_phantom(group)

    def on_takeover_timer(self, op: Op, group_id: str, instance_id: str) -> None:
        """The static member a newcomer claims to replace stayed silent: its process is gone, let the
        newcomer in (the group may have changed, or gone, meanwhile: the join is decided afresh)."""
        p = op.ctx.pending_takeovers.pop((group_id, instance_id), None)
        if p is None:
            return
        group = op.ctx.groups.get(group_id)
        if group is None:
            group = op.ctx.groups[group_id] = ClassicGroup(group_id, op.now_ms)
        self._join_new_member(op, group, p, check_liveness=False)
        op.ctx.forget_if_phantom(group)

    def on_join_timer(self, op: Op, group_id: str) -> None:
        group = op.ctx.groups.get(group_id)
        if group is None or group.state is not _S.PREPARING_REBALANCE:
            return
        delay = group.initial_delay
        if delay is not None and group.new_member_added and delay.remaining_ms != 0:
            # Kafka's growing initial delay: another member arrived during this step, so wait one more step.
            group.new_member_added = False
            step = min(op.ctx.config.initial_rebalance_delay_ms, delay.remaining_ms)
            group.initial_delay = InitialDelay(step, max(delay.remaining_ms - delay.delay_ms, 0))
            op.schedule(join_key(group_id), step)
            return
        self._complete_join(op, group)

    def on_sync_timer(self, op: Op, group_id: str) -> None:
        group = op.ctx.groups.get(group_id)
        if group is None or group.sync_generation != group.generation:
            return
        if group.state not in (_S.COMPLETING_REBALANCE, _S.STABLE) or not group.pending_sync_members:
            return
        for member_id in sorted(group.pending_sync_members):
            self._drop_member(op, group, member_id)
        self._prepare_rebalance(op, group)

    def on_classic_rebalance_timer(self, op: Op, group_id: str) -> None:
        """A consumer group became this classic group (online downgrade): its members rebalance, so that the
        partitions of the member that left are given out, as Kafka does right after the conversion."""
        group = op.ctx.groups.get(group_id)
        if group is not None and group.members and group.can_rebalance():
            self._prepare_rebalance(op, group)

    def rebalance_oversized(self, op: Op, group: ClassicGroup) -> None:
        """After loading: a group above ``group.max.size`` (the limit was lowered) rebalances, which lets its
        members commit and drops the ones that do not rejoin in time; so does a group whose last record has no
        state timestamp, as an online downgrade writes it (`migration`): the rebalance that must follow the
        downgrade may not have run before the restart (GroupMetadata values before version 2 carry none
        either: they cost one rebalance at loading)."""
        owed = group.committed is not None and group.committed.current_state_timestamp == -1
        if group.members and (len(group.members) > op.ctx.config.max_size or owed) and group.can_rebalance():
            self._prepare_rebalance(op, group)


def _inconsistent(requested: str | None, current: str | None) -> bool:
    return requested is not None and current is not None and requested != current
