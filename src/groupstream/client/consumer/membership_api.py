"""The contract between a group membership manager and the consumer that owns the partitions.

A membership manager (classic JoinGroup/SyncGroup, or the KIP-848 ``consumer`` protocol) decides *what* the
member should own; the consumer decides *how* partitions are given up and taken on. The manager never touches
the subscription state, the fetch buffer or user callbacks: it asks its `AssignmentTarget` to begin a step and
is told, later and on the network thread, that the step finished. Between the two the consumer stops fetching
revoked partitions, drops their buffered records, commits their positions when auto commit is on, and runs the
user's rebalance listener on the application thread inside ``poll`` (seed 002). Only then does the manager
acknowledge the new assignment to the coordinator, which is what keeps one partition from being consumed by
two members at once.

Every step ends with exactly one call of its ``done`` callback, with ``None`` or the error the user's callback
(or the commit) raised; the manager goes on either way, as Kafka's does, and reports the error on the next
``poll``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from groupstream.assignment.types import TopicPartition
from groupstream.client.net.requests import RequestManager

__all__ = [
    "NO_GROUP_IDENTITY",
    "AssignmentTarget",
    "CommitIdentity",
    "CoordinatorLocator",
    "MembershipManager",
    "StepDone",
]

StepDone = Callable[[BaseException | None], None]


class AssignmentTarget(Protocol):
    """Implemented by the consumer's network-thread side; called by membership managers on that thread."""

    def owned_partitions(self) -> frozenset[TopicPartition]:
        """The partitions the consumer currently owns (assigned and not yet revoked or lost)."""
        ...

    def revoke(self, partitions: frozenset[TopicPartition], done: StepDone) -> None:
        """Give up ``partitions`` cleanly: stop fetching them, discard their buffered records, commit their
        consumed positions if auto commit is on, run ``on_partitions_revoked``; then call ``done``."""
        ...

    def assign(
        self, assignment: frozenset[TopicPartition], added: frozenset[TopicPartition], done: StepDone
    ) -> None:
        """Own exactly ``assignment`` from now on (``added`` are the partitions new to this member): start
        fetching them (positions from committed offsets or ``auto.offset.reset``), keep the pause state of
        partitions that stay (KIP-822), run ``on_partitions_assigned(added)``; then call ``done``."""
        ...

    def lose(self, partitions: frozenset[TopicPartition], done: StepDone) -> None:
        """The member lost ``partitions`` without a chance to commit (fenced, session expired, fatal): drop them
        and their buffered records without committing, run ``on_partitions_lost``; then call ``done``."""
        ...


@dataclass(frozen=True, slots=True)
class CommitIdentity:
    """What an OffsetCommit (and an OffsetFetch under KIP-848) carries to prove membership: the classic
    generation id or the KIP-848 member epoch, the member id and the static instance id. A consumer outside a
    group (assign mode) commits with generation -1 and an empty member id."""

    generation_or_epoch: int = -1
    member_id: str = ""
    group_instance_id: str | None = None


NO_GROUP_IDENTITY = CommitIdentity()


@dataclass(frozen=True, slots=True)
class GroupMetadata:
    """``Consumer.group_metadata()``: the member's group, generation (the KIP-848 member epoch under
    ``group.protocol=consumer``), member id and static instance id, for a transactional producer's
    ``send_offsets_to_transaction`` (KIP-447). The group coordinator takes the transaction's offsets only from
    the current generation's member, so a zombie copy of a consume-transform-produce loop cannot commit offsets
    of partitions that moved on to another member."""

    group_id: str
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None


class CoordinatorLocator(Protocol):
    """Finds the group coordinator (FindCoordinator) for every manager that talks to it."""

    def coordinator(self) -> int | None:
        """The coordinator's node id, or None while it is being looked up."""
        ...

    def coordinator_lost(self, now_ms: int) -> None:
        """A response said NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE, or the connection broke: look it up
        again (with backoff)."""
        ...


class MembershipManager(RequestManager, Protocol):
    """One group protocol's member (classic or KIP-848), polled by the network thread like any request
    manager. Pure: no I/O, no clock, never blocks; all effects go through returned requests and the
    `AssignmentTarget` it was built with."""

    def subscribe(self, topics: frozenset[str], pattern: str | None, now_ms: int) -> None:
        """The subscription changed (a set of topic names, or a regular expression when ``pattern`` is set):
        join the group, or tell the coordinator what changed."""
        ...

    def leave(self, now_ms: int, done: StepDone) -> None:
        """Unsubscribe or close: give up the assignment through the target (revoke, so positions get
        committed) and leave the group; ``done`` runs once the leave was sent or could not be."""
        ...

    def poll_called(self, now_ms: int) -> None:
        """The application called ``poll``: restart the ``max.poll.interval.ms`` clock, and rejoin if the
        member had left the group because that interval ran out."""
        ...

    def commit_identity(self) -> CommitIdentity:
        """The identity commits must carry right now."""
        ...

    def commit_rejected(self, error_code: int, now_ms: int) -> None:
        """An OffsetCommit came back ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID,
        STALE_MEMBER_EPOCH or REBALANCE_IN_PROGRESS: the member's view of the group is stale."""
        ...

    def fatal_error(self) -> BaseException | None:
        """A typed error the application must see on its next call (a fenced static member), or None."""
        ...

    def left_group_error(self) -> BaseException | None:
        """Why the member is out of the group until its next ``poll`` (``max.poll.interval.ms`` ran out), or
        None: a commit meanwhile fails with this reason rather than a bare "commit failed"."""
        ...
