"""DescribeGroups, ListGroups and DeleteGroups: what admin tools see of a shard's groups, and how they go."""

from __future__ import annotations

from groupstream.coordinator.classic_group import GroupState
from groupstream.coordinator.consumer_admin import CONSUMER_GROUP_TYPE, describe_groups_entry
from groupstream.coordinator.consumer_records import group_records_tombstones
from groupstream.coordinator.context import Op
from groupstream.coordinator.records import group_tombstone, offset_tombstone
from groupstream.coordinator.request import ShardRequest, TopicsView, body_as
from groupstream.coordinator.responses import DELETE_GROUPS, DESCRIBE_GROUPS, LIST_GROUPS
from groupstream.protocol.error_codes import ErrorCode

__all__ = ["CLASSIC_GROUP_TYPE", "GroupAdmin"]

E = ErrorCode
_S = GroupState
CLASSIC_GROUP_TYPE = "classic"
"""The group type ListGroups v5 reports (and filters on) for classic-protocol groups, as Kafka names it."""
_NOT_FOUND_FROM = 6  # DescribeGroups answers GROUP_ID_NOT_FOUND for unknown groups from this version


class GroupAdmin:
    def describe(self, op: Op, req: ShardRequest, topics: TopicsView | None = None) -> None:
        R = DESCRIBE_GROUPS.Response
        G = R.DescribedGroup
        described = []
        for raw in body_as(DESCRIBE_GROUPS, req).groups:
            group_id = str(raw)
            consumer_group = op.ctx.consumer_groups.get(group_id)
            if consumer_group is not None:
                described.append(describe_groups_entry(consumer_group, G, topics))
                continue
            group = op.ctx.groups.get(group_id)
            if group is None or group.state is _S.DEAD:
                # Before v6 an unknown group is reported as a Dead one with no error, as older Kafka did.
                not_found = req.version >= _NOT_FOUND_FROM
                described.append(
                    G(
                        error_code=int(E.GROUP_ID_NOT_FOUND if not_found else E.NONE),
                        error_message=f"Group {group_id} not found." if not_found else None,
                        group_id=group_id,
                        group_state=_S.DEAD.value,
                        protocol_type="",
                        protocol_data="",
                        members=[],
                    )
                )
                continue
            # Member metadata is only meaningful once a protocol is chosen and every member has synced to it.
            stable = group.state is _S.STABLE
            described.append(
                G(
                    error_code=0,
                    group_id=group_id,
                    group_state=group.state.value,
                    protocol_type=group.protocol_type or "",
                    protocol_data=(group.protocol_name or "") if stable else "",
                    members=[
                        G.DescribedGroupMember(
                            member_id=m.member_id,
                            group_instance_id=m.group_instance_id,
                            client_id=m.client_id,
                            client_host=m.client_host,
                            member_metadata=(m.metadata(group.protocol_name) or b"") if stable else b"",
                            member_assignment=m.assignment,
                        )
                        for m in group.members.values()
                    ],
                )
            )
        op.respond(req.token, R(throttle_time_ms=0, groups=described))

    def list(self, op: Op, req: ShardRequest) -> None:
        R = LIST_GROUPS.Response
        body = body_as(LIST_GROUPS, req)
        states = {s.strip().lower() for s in body.states_filter}
        types = {t.strip().lower() for t in body.types_filter}
        listed = []
        if not types or CLASSIC_GROUP_TYPE in types:
            for group_id in sorted(op.ctx.groups):
                group = op.ctx.groups[group_id]
                if states and group.state.value.lower() not in states:
                    continue
                listed.append(
                    R.ListedGroup(
                        group_id=group_id,
                        protocol_type=group.protocol_type or "",
                        group_state=group.state.value,
                        group_type=CLASSIC_GROUP_TYPE,
                    )
                )
        if not types or CONSUMER_GROUP_TYPE in types:
            for group_id in sorted(op.ctx.consumer_groups):
                cg = op.ctx.consumer_groups[group_id]
                if states and cg.state.value.lower() not in states:
                    continue
                listed.append(R.ListedGroup(group_id=group_id, protocol_type=CONSUMER_GROUP_TYPE,
                                            group_state=cg.state.value, group_type=CONSUMER_GROUP_TYPE))  # fmt: skip
        op.respond(req.token, R(throttle_time_ms=0, error_code=0, groups=listed))

    def delete(self, op: Op, req: ShardRequest) -> None:
        R = DELETE_GROUPS.Response
        results = []
        for raw in body_as(DELETE_GROUPS, req).groups_names:
            group_id = str(raw)
            group = op.ctx.groups.get(group_id) if group_id else None
            consumer_group = op.ctx.consumer_groups.get(group_id)
            if consumer_group is not None:
                error = E.NON_EMPTY_GROUP if consumer_group.members else E.NONE
                if not consumer_group.members:
                    for topic, partition, _ in op.ctx.offsets.partitions(group_id):
                        op.write(offset_tombstone(group_id, topic, partition))
                    for record in group_records_tombstones(consumer_group):
                        op.write(record)
            elif not group_id:
                error = E.INVALID_GROUP_ID
            elif group is None or group.state is _S.DEAD:
                error = E.GROUP_ID_NOT_FOUND
            elif group.state is not _S.EMPTY:
                error = E.NON_EMPTY_GROUP
            else:
                # Offsets first, then the group: a reader of the log never sees offsets of a deleted group.
                for topic, partition, _ in op.ctx.offsets.partitions(group_id):
                    op.write(offset_tombstone(group_id, topic, partition))
                op.write(group_tombstone(group_id))
                error = E.NONE
            results.append(R.DeletableGroupResult(group_id=group_id, error_code=int(error)))
        op.respond(req.token, R(throttle_time_ms=0, results=results))
