"""One classic-protocol group (JoinGroup/SyncGroup): its state machine, members, leader and protocol choice.

The fields split in two, as in Kafka's classic group:

- *Durable* fields are what a GroupMetadata record holds: generation, protocol type and name, leader, and the
  members with their subscription (metadata for the chosen protocol), timeouts and assignment. While the
  group is at rest (Stable or Empty) they change only through :meth:`ClassicGroup.apply_record`, which replay
  calls; ``committed`` is the last record itself.
- *Session* fields live only in memory and start afresh after a restart: the parked JoinGroup/SyncGroup
  requests, members' full protocol lists, members that asked for an id (MEMBER_ID_REQUIRED) but have not
  joined, who still owes a SyncGroup, the initial-delay bookkeeping. Handlers change these, and while a
  rebalance runs (PreparingRebalance, CompletingRebalance) they also change the membership being formed, the
  leader and the next generation, exactly as Kafka does in memory; the record written when the rebalance
  completes (the leader's SyncGroup, or an empty group's new generation) is what makes them durable.

States are a table of valid previous states with one checked :meth:`ClassicGroup.transition_to`. The only
moves into an at-rest state (Stable, Empty) are made by replay: checked when they finish a rebalance the
handlers started, and unchecked (:meth:`ClassicGroup.apply_record` restoring) when the log is loaded, where the
intermediate states were never written.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from enum import Enum

from groupstream.coordinator.result import RequestToken
from groupstream.protocol.consumer_protocol import CONSUMER_PROTOCOL_TYPE, decode_subscription
from groupstream.protocol.error_codes import ErrorCode
from groupstream.protocol.errors import PeerProtocolError
from groupstream.protocol.group_records import GroupMetadataValue, MemberMetadata
from groupstream.state_table import TransitionTable

__all__ = [
    "GROUP_STATES",
    "ClassicGroup",
    "ClassicMember",
    "GroupState",
    "InitialDelay",
    "Parked",
    "Protocol",
]


class GroupState(Enum):
    """Kafka's classic group states; the values are the names Kafka prints (DescribeGroups, ListGroups)."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"



_S = GroupState
GROUP_STATES = TransitionTable("a classic group", GroupState, {
    _S.EMPTY: frozenset({_S.PREPARING_REBALANCE}),
    _S.PREPARING_REBALANCE: frozenset({_S.STABLE, _S.COMPLETING_REBALANCE, _S.EMPTY}),
    _S.COMPLETING_REBALANCE: frozenset({_S.PREPARING_REBALANCE}),
    _S.STABLE: frozenset({_S.COMPLETING_REBALANCE}),
    _S.DEAD: frozenset({_S.STABLE, _S.PREPARING_REBALANCE, _S.COMPLETING_REBALANCE, _S.EMPTY, _S.DEAD}),
})
"""Kafka's table: a group may enter a state only from one of these."""

_REBALANCING = frozenset({_S.PREPARING_REBALANCE, _S.COMPLETING_REBALANCE})


@dataclass(frozen=True, slots=True)
class Protocol:
    name: str
    metadata: bytes


@dataclass(frozen=True, slots=True)
class Parked:
    """A request waiting for the group: the runtime's token and the version its answer must be built for."""

    token: RequestToken
    version: int


@dataclass(frozen=True, slots=True)
class InitialDelay:
    """Where an empty group's first rebalance is in Kafka's growing delay: the step now running and what is
    left of the rebalance timeout after it."""

    delay_ms: int
    remaining_ms: int


@dataclass(slots=True, eq=False)
class ClassicMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: tuple[Protocol, ...]
    assignment: bytes = b""
    # session state
    awaiting_join: Parked | None = None
    awaiting_sync: Parked | None = None
    is_new: bool = False
    last_seen_ms: int | None = None
    """When this member id last made a valid JoinGroup, SyncGroup or Heartbeat: whether its process is alive
    (see ``static_membership``)."""
    last_heartbeat_ms: int | None = None
    heartbeat_gap_ms: int | None = None
    """The time between its last two consecutive heartbeats: the client's heartbeat interval, as observed."""

    def metadata(self, protocol_name: str | None) -> bytes | None:
        for p in self.protocols:
            if p.name == protocol_name:
                return p.metadata
        return None

    def matches(self, protocols: tuple[Protocol, ...]) -> bool:
        """Same protocols, same metadata, same preference order: a rejoin that changes nothing."""
        return self.protocols == protocols

    def vote(self, candidates: Iterable[str]) -> str:
        """The member's most preferred protocol among ``candidates``."""
        allowed = set(candidates)
        for p in self.protocols:
            if p.name in allowed:
                return p.name
        raise ValueError(f"member {self.member_id} supports none of {sorted(allowed)}")

    def seen(self, now_ms: int, heartbeat: bool) -> None:
        if heartbeat and self.last_heartbeat_ms is not None:
            self.heartbeat_gap_ms = now_ms - self.last_heartbeat_ms
        # A join or sync breaks the heartbeat rhythm (clients stop heartbeating while they rebalance).
        self.last_heartbeat_ms = now_ms if heartbeat else None
        self.last_seen_ms = now_ms

    def has_satisfied_heartbeat(self) -> bool:
        """A parked JoinGroup or SyncGroup counts as a heartbeat, except for a new member: it must complete
        its first join before its join timeout."""
        if self.is_new:
            return False
        return self.awaiting_join is not None or self.awaiting_sync is not None

    def to_metadata(self, protocol_name: str | None, assignment: bytes | None = None) -> MemberMetadata:
        return MemberMetadata(
            member_id=self.member_id,
            group_instance_id=self.group_instance_id,
            client_id=self.client_id,
            client_host=self.client_host,
            rebalance_timeout=self.rebalance_timeout_ms,
            session_timeout=self.session_timeout_ms,
            subscription=self.metadata(protocol_name) or b"",
            assignment=self.assignment if assignment is None else assignment,
        )


def _with_selected(
    protocols: tuple[Protocol, ...], name: str | None, metadata: bytes
) -> tuple[Protocol, ...]:
    """A loaded or replayed member's protocols: the persisted subscription is the truth for the chosen
    protocol; the rest of the list (session state) survives where the member is still live."""
    if name is None:
        return protocols
    if any(p.name == name for p in protocols):
        return tuple(Protocol(name, metadata) if p.name == name else p for p in protocols)
    return (Protocol(name, metadata),)


class ClassicGroup:
    def __init__(self, group_id: str, state_timestamp: int | None = None) -> None:
        self.group_id = group_id
        self.state = GroupState.EMPTY
        self.previous_state = GroupState.DEAD
        self.state_timestamp = state_timestamp
        # durable (see the module docstring for when handlers may change them)
        self.generation = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, ClassicMember] = {}
        self.committed: GroupMetadataValue | None = None
        self.in_log = False
        """Some record of this group has been replayed: it exists after a restart too."""
        # session
        self.static_members: dict[str, str] = {}
        self.pending_join_members: set[str] = set()
        self.pending_sync_members: set[str] = set()
        self.new_member_added = False
        self.initial_delay: InitialDelay | None = None
        self.sync_generation = -1

    def __repr__(self) -> str:
        return f"ClassicGroup({self.group_id!r}, {self.state.value}, generation={self.generation})"

    # --- state machine ---------------------------------------------------------------------------------

    def transition_to(self, state: GroupState, now_ms: int | None) -> None:
        GROUP_STATES.check(self.state, state, who=f"group {self.group_id!r}")
        self.previous_state = self.state
        self.state = state
        self.state_timestamp = now_ms

    def can_rebalance(self) -> bool:
        return GROUP_STATES.allows(self.state, GroupState.PREPARING_REBALANCE)

    @property
    def is_rebalancing(self) -> bool:
        return self.state in _REBALANCING

    # --- members ---------------------------------------------------------------------------------------

    def is_empty(self) -> bool:
        """No member and nobody joining: the group may become a ``consumer`` group."""
        return self.state is GroupState.EMPTY and not self.members and not self.pending_join_members

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id is not None and self.leader_id == member_id

    def add(self, member: ClassicMember, parked: Parked | None) -> None:
        if member.group_instance_id is not None:
            if member.group_instance_id in self.static_members:
                raise ValueError(f"instance {member.group_instance_id!r} is already a member")
            self.static_members[member.group_instance_id] = member.member_id
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        member.awaiting_join = parked
        self.members[member.member_id] = member
        self.pending_join_members.discard(member.member_id)

    def remove(self, member_id: str) -> ClassicMember | None:
        member = self.members.pop(member_id, None)
        if member is not None and member.group_instance_id is not None:
            self.static_members.pop(member.group_instance_id, None)
        if self.is_leader(member_id):
            # Kafka takes whichever member its hash map yields first; we take the oldest, deterministically.
            self.leader_id = next(iter(self.members), None)
        self.pending_join_members.discard(member_id)
        self.pending_sync_members.discard(member_id)
        return member

    def replace_member_id(self, old_id: str, new_id: str) -> ClassicMember:
        """A static member rejoined under a new id: same member, same place in the group."""
        old = self.members[old_id]
        renamed = replace(
            old,
            member_id=new_id,
            awaiting_join=None,
            awaiting_sync=None,
            last_seen_ms=None,
            last_heartbeat_ms=None,
            heartbeat_gap_ms=None,
        )
        self.members = {
            (new_id if mid == old_id else mid): (renamed if mid == old_id else m)
            for mid, m in self.members.items()
        }
        if old.group_instance_id is not None:
            self.static_members[old.group_instance_id] = new_id
        if self.is_leader(old_id):
            self.leader_id = new_id
        if old_id in self.pending_sync_members:
            self.pending_sync_members.discard(old_id)
            self.pending_sync_members.add(new_id)
        return renamed

    def validate_member(self, member_id: str, group_instance_id: str | None) -> ErrorCode | None:
        """Kafka's check for every request from a member: a static id must map to this member id."""
        if group_instance_id is not None:
            known = self.static_members.get(group_instance_id)
            if known is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if known != member_id:
                return ErrorCode.FENCED_INSTANCE_ID
        if member_id not in self.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        return None

    def validate_offset_commit(
        self, member_id: str, group_instance_id: str | None, generation: int
    ) -> ErrorCode | None:
        if self.state is GroupState.DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if generation < 0 and self.state is GroupState.EMPTY:
            return None  # a simple (assign-mode) consumer or an admin: allowed while nobody is a member
        if generation >= 0 or member_id or group_instance_id is not None:
            error = self.validate_member(member_id, group_instance_id)
            if error is not None:
                return error
            if generation != self.generation:
                return ErrorCode.ILLEGAL_GENERATION
        elif self.state is not GroupState.EMPTY:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if self.state is GroupState.COMPLETING_REBALANCE:
            # The member knows the new generation but has no assignment yet: tell it to finish the rebalance.
            return ErrorCode.REBALANCE_IN_PROGRESS
        return None

    def awaiting_join_count(self) -> int:
        return sum(1 for m in self.members.values() if m.awaiting_join is not None)

    def has_all_members_joined(self) -> bool:
        return not self.pending_join_members and all(
            m.awaiting_join is not None for m in self.members.values()
        )

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keep the leader if it rejoined, else pick the first member that did; False if nobody rejoined."""
        if self.leader_id is None:
            return False
        leader = self.members.get(self.leader_id)
        if leader is not None and leader.awaiting_join is not None:
            return True
        for member in self.members.values():
            if member.awaiting_join is not None:
                self.leader_id = member.member_id
                return True
        return False

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    # --- protocols -------------------------------------------------------------------------------------

    def supports_protocols(self, protocol_type: str, names: Iterable[str]) -> bool:
        """Can a member with these protocols join? An empty group takes any non-empty offer; otherwise the
        type must match and one protocol must be one every current member supports."""
        offered = set(names)
        if self.state is GroupState.EMPTY:
            return bool(protocol_type) and bool(offered)
        if self.protocol_type != protocol_type:
            return False
        return bool(offered & self._common_protocols(self.members.values()))

    @staticmethod
    def _common_protocols(members: Iterable[ClassicMember]) -> set[str]:
        common: set[str] | None = None
        for m in members:
            names = {p.name for p in m.protocols}
            common = names if common is None else common & names
        return common or set()

    def select_protocol(self, override: Mapping[str, tuple[Protocol, ...]] | None = None) -> str:
        """Each member votes for its most preferred protocol that every member supports; most votes wins.

        Kafka breaks a tie by hash-map order; we break it by name so that the choice is deterministic.
        ``override`` asks what would be chosen if some members offered other protocols.
        """
        if not self.members:
            raise ValueError(f"cannot select a protocol for empty group {self.group_id!r}")
        members = [
            m
            if override is None or m.member_id not in override
            else replace(m, protocols=override[m.member_id])
            for m in self.members.values()
        ]
        candidates = self._common_protocols(members)
        votes: dict[str, int] = {}
        for m in members:
            choice = m.vote(candidates)
            votes[choice] = votes.get(choice, 0) + 1
        return min(votes, key=lambda name: (-votes[name], name))

    @property
    def uses_consumer_protocol(self) -> bool:
        return self.protocol_type == CONSUMER_PROTOCOL_TYPE

    def subscribed_topics(self) -> frozenset[str] | None:
        """Topics the members subscribe to (consumer protocol only); None when unknown (another protocol,
        no protocol chosen yet, or metadata that does not parse)."""
        if not self.uses_consumer_protocol:
            return None
        if not self.members:
            return frozenset()
        if self.protocol_name is None:
            return None
        topics: set[str] = set()
        for m in self.members.values():
            metadata = m.metadata(self.protocol_name)
            if metadata is None:
                return None
            try:
                topics.update(decode_subscription(metadata).topics)
            except PeerProtocolError:
                return None
        return frozenset(topics)

    def is_subscribed_to_topic(self, topic: str) -> bool:
        """Kafka's rule: when the subscriptions are unknown, a consumer-protocol group counts as subscribed."""
        topics = self.subscribed_topics()
        if topics is None:
            return self.uses_consumer_protocol
        return topic in topics

    # --- views -----------------------------------------------------------------------------------------

    def durable_view(self) -> GroupMetadataValue:
        """The group as a GroupMetadata record would hold it now."""
        return GroupMetadataValue(
            protocol_type=self.protocol_type or "",
            generation=self.generation,
            protocol=self.protocol_name,
            leader=self.leader_id,
            current_state_timestamp=-1 if self.state_timestamp is None else self.state_timestamp,
            members=tuple(m.to_metadata(self.protocol_name) for m in self.members.values()),
        )

    def parked_tokens(self) -> list[RequestToken]:
        tokens: list[RequestToken] = []
        for m in self.members.values():
            for parked in (m.awaiting_join, m.awaiting_sync):
                if parked is not None:
                    tokens.append(parked.token)
        return tokens

    # --- replay ----------------------------------------------------------------------------------------

    def apply_record(self, value: GroupMetadataValue) -> None:
        """Make the durable fields what ``value`` says (replay's half of the group).

        Live members keep their session state (parked requests, full protocol lists); a static member that
        the record names under a new id is the live member with that instance id, renamed. A group that was
        rebalancing finishes the rebalance (a checked transition); a group at rest, or one being loaded, is
        restored to Stable or Empty as the record says.
        """
        members: dict[str, ClassicMember] = {}
        for m in value.members:
            live = self.members.get(m.member_id)
            if live is None and m.group_instance_id is not None:
                old_id = self.static_members.get(m.group_instance_id)
                live = None if old_id is None else self.members.get(old_id)
            member = ClassicMember(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                rebalance_timeout_ms=m.session_timeout if m.rebalance_timeout == -1 else m.rebalance_timeout,
                session_timeout_ms=m.session_timeout,
                protocol_type=value.protocol_type,
                protocols=_with_selected(
                    () if live is None else live.protocols, value.protocol, m.subscription
                ),
                assignment=m.assignment,
            )
            if live is not None:
                member.awaiting_join = live.awaiting_join
                member.awaiting_sync = live.awaiting_sync
                member.is_new = live.is_new
                if live.member_id == m.member_id:  # not a static member renamed for a new process
                    member.last_seen_ms = live.last_seen_ms
                    member.last_heartbeat_ms = live.last_heartbeat_ms
                    member.heartbeat_gap_ms = live.heartbeat_gap_ms
            members[m.member_id] = member
        self.members = members
        self.static_members = {
            m.group_instance_id: m.member_id for m in members.values() if m.group_instance_id is not None
        }
        self.pending_join_members -= members.keys()
        self.pending_sync_members &= members.keys()
        self.generation = value.generation
        self.protocol_type = value.protocol_type or None
        self.protocol_name = value.protocol
        self.leader_id = value.leader
        target = GroupState.STABLE if members else GroupState.EMPTY
        timestamp = None if value.current_state_timestamp == -1 else value.current_state_timestamp
        if self.is_rebalancing:
            self.transition_to(target, timestamp)
        else:
            self.previous_state = self.state
            self.state = target
            self.state_timestamp = timestamp
        self.committed = value
        self.in_log = True
