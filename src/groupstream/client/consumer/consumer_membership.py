"""The KIP-848 member (``group.protocol=consumer``): ConsumerGroupHeartbeat and reconciliation, as a pure
request manager (seed 002, Kafka's ``ConsumerMembershipManager`` and ``ConsumerHeartbeatRequestManager``).

The coordinator computes the target assignment; the member only converges to it and says so. Each heartbeat
response may carry a new target. When it differs from what the member owns, the member reconciles in two
steps through its `AssignmentTarget`: first it revokes what it must give up (the consumer commits and runs
``on_partitions_revoked``), then it assigns the new set (``on_partitions_assigned`` for what is new);
partitions kept through the change are never revoked. Only then does the next heartbeat, sent at once, report
the owned partitions: that acknowledgement is what lets the coordinator hand the revoked partitions to
another member, so no partition is consumed by two members at once.

Steps never overlap. A target that arrives during a step waits until the running reconciliation has finished
and been acknowledged; a fence, a leave or a fatal error that arrives during a step acts (lose or revoke
everything) once the step's ``done`` has run. Topic ids the metadata cannot name yet are left out of the step
(Kafka reconciles what it can name) and the member asks for a metadata update, trying again when it lands.

Errors: UNKNOWN_MEMBER_ID / FENCED_MEMBER_EPOCH fence the member: it loses its partitions (no commit, the
coordinator has already given them away) and rejoins with epoch 0 and the same member id, at once the first
time and with backoff if the rejoin is fenced again. Coordinator errors and broken connections keep the
assignment (the consumer keeps fetching, as librdkafka does) and retry with exponential backoff on the
coordinator the `CoordinatorLocator` finds. The rest are fatal and typed (`fatal_error`).

``max.poll.interval.ms`` without an application poll: the member leaves the group (epoch -1, or -2 for a
static member so the coordinator keeps its assignment for the session timeout), loses its partitions and
stays UNJOINED until the next ``poll_called``, which rejoins (`left_group_error` says why meanwhile).

Wiring, for ``group.protocol=consumer`` (the member id is generated once per consumer, as Kafka 4.x does)::

    ConsumerMembershipManager(
        ConsumerMembershipConfig(group_id=..., member_id=str(uuid.uuid4()), group_instance_id=...,
                                 client_rack=..., max_poll_interval_ms=..., server_assignor=...),
        assignment_target, coordinator_locator, MetadataTopicNames(metadata_cache))
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from groupstream.assignment.types import TopicPartition
from groupstream.client.consumer.consumer_membership_errors import (
    MaxPollIntervalExceededError,
    fatal_membership_error,
)
from groupstream.client.consumer.consumer_membership_metadata import TopicNames
from groupstream.client.consumer.heartbeat_fields import (
    CONSUMER_GROUP_HEARTBEAT,
    HeartbeatFields,
    HeartbeatFieldTracker,
    Subscription,
    TopicIdPartition,
)
from groupstream.client.consumer.heartbeat_schedule import HeartbeatSchedule
from groupstream.client.consumer.member_state import MemberState, MemberStateMachine
from groupstream.client.consumer.membership_api import (
    NO_GROUP_IDENTITY,
    AssignmentTarget,
    CommitIdentity,
    CoordinatorLocator,
    MembershipManager,
    StepDone,
)
from groupstream.client.consumer.membership_timing import PollTimer
from groupstream.client.errors import UnsupportedVersionError
from groupstream.client.net.requests import ClientResponse, PollResult, UnsentRequest, min_delay
from groupstream.protocol.error_codes import ErrorCode, is_retriable
from groupstream.protocol.messages.consumer_group_heartbeat import JOIN_EPOCH, LEAVE_EPOCH, STATIC_LEAVE_EPOCH

__all__ = [
    "ConsumerMembershipConfig",
    "ConsumerMembershipManager",
]


_S = MemberState
_HEARTBEATING = frozenset({_S.JOINING, _S.RECONCILING, _S.ACKNOWLEDGING, _S.STABLE, _S.PREPARE_LEAVING})
_IN_GROUP = frozenset({_S.JOINING, _S.RECONCILING, _S.ACKNOWLEDGING, _S.STABLE})
_CAN_TAKE_ASSIGNMENT = _IN_GROUP
_COORDINATOR_ERRORS = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE})
_FENCING_ERRORS = frozenset({ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_MEMBER_EPOCH})
_STALE_COMMIT_ERRORS = frozenset(
    {ErrorCode.STALE_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_MEMBER_EPOCH}
)
_ALWAYS_FATAL = frozenset(
    {
        ErrorCode.GROUP_AUTHORIZATION_FAILED,
        ErrorCode.INVALID_REQUEST,
        ErrorCode.GROUP_MAX_SIZE_REACHED,
        ErrorCode.UNSUPPORTED_ASSIGNOR,
        ErrorCode.UNRELEASED_INSTANCE_ID,
        ErrorCode.FENCED_INSTANCE_ID,
        ErrorCode.UNSUPPORTED_VERSION,
        ErrorCode.INVALID_REGULAR_EXPRESSION,
    }
)


@dataclass(frozen=True, slots=True)
class ConsumerMembershipConfig:
    """The consumer settings this member reads (Kafka's names in the comments)."""

    group_id: str  # group.id
    member_id: str  # generated once per consumer (Kafka 4.x: a random UUID), kept across rejoins
    group_instance_id: str | None = None  # group.instance.id: a static member
    client_rack: str | None = None  # client.rack
    max_poll_interval_ms: int = 300_000  # max.poll.interval.ms, also the rebalance timeout sent
    server_assignor: str | None = None  # group.remote.assignor
    retry_backoff_ms: int = 100  # retry.backoff.ms
    retry_backoff_max_ms: int = 1000  # retry.backoff.max.ms

    def __post_init__(self) -> None:
        if not self.group_id:
            raise ValueError("group.id must not be empty for group.protocol=consumer")
        if not self.member_id:
            raise ValueError("the member id must not be empty (generate one per consumer)")
        if self.max_poll_interval_ms <= 0:
            raise ValueError("max.poll.interval.ms must be positive")


class ConsumerMembershipManager:
    """A `MembershipManager` for the KIP-848 protocol. Network thread only; pure (no I/O, no clock)."""

    def __init__(
        self,
        config: ConsumerMembershipConfig,
        target: AssignmentTarget,
        coordinator: CoordinatorLocator,
        topic_names: TopicNames,
        *,
        jitter: Callable[[], float] | None = None,
    ) -> None:
        self.config = config
        self.group_id = config.group_id
        self.member_id = config.member_id
        self.member_epoch = JOIN_EPOCH
        self._target = target
        self._coordinator = coordinator
        self._names = topic_names
        self._machine = MemberStateMachine()
        self._fields = HeartbeatFieldTracker(
            config.group_id,
            instance_id=config.group_instance_id,
            rack_id=config.client_rack,
            rebalance_timeout_ms=config.max_poll_interval_ms,
            server_assignor=config.server_assignor,
        )
        self._schedule = HeartbeatSchedule(
            retry_backoff_ms=config.retry_backoff_ms,
            retry_backoff_max_ms=config.retry_backoff_max_ms,
            jitter=jitter,
        )
        self._subscription = Subscription()
        # what the member owns by topic id (reported to the coordinator) and the names it resolved for them
        self._owned: frozenset[TopicIdPartition] = frozenset()
        self._owned_names: dict[uuid.UUID, str] = {}
        self._assignment_target: frozenset[TopicIdPartition] | None = None  # the coordinator's latest target
        self._waiting_metadata_version: int | None = None
        self._step_running = False
        self._after_step: Callable[[], None] | None = None
        self._releasing = False  # lose in progress (fenced, unjoined, fatal)
        self._urgent = False
        self._generation = 0  # bumped whenever answers to earlier heartbeats stop mattering
        self._in_flight: int | None = None
        self._request_seq = 0
        self._poll_timer = PollTimer(config.max_poll_interval_ms)
        self._rejoin_on_release = False
        self._join_after_leave = False
        self._leave_waiters: list[StepDone] = []
        self._leave_epoch = LEAVE_EPOCH
        self._leave_unsent = False  # fenced while preparing to leave: nothing left to send
        self._fatal: BaseException | None = None
        self._poll_timeout: MaxPollIntervalExceededError | None = None
        self.last_step_error: BaseException | None = None
        self.heartbeats_answered = 0  # successful heartbeat responses, for metrics and tests

    # --- read-only views -------------------------------------------------------------------------------------

    @property
    def state(self) -> MemberState:
        return self._machine.state

    @property
    def owned(self) -> frozenset[TopicIdPartition]:
        """What the member last reconciled, by topic id (what it reports to the coordinator)."""
        return self._owned

    @property
    def heartbeat_interval_ms(self) -> int:
        return self._schedule.interval_ms

    # --- MembershipManager ------------------------------------------------------------------------------------

    def subscribe(self, topics: frozenset[str], pattern: str | None, now_ms: int) -> None:
        subscription = Subscription(frozenset(topics) if pattern is None else frozenset(), pattern)
        changed = subscription != self._subscription
        self._subscription = subscription
        state = self.state
        self._poll_timer.start(now_ms)
        if state is _S.UNSUBSCRIBED:
            if subscription.topics or subscription.pattern is not None:
                self._poll_timer.poll_called(now_ms)
                self._join()
        elif state in (_S.PREPARE_LEAVING, _S.LEAVING):
            self._join_after_leave = bool(subscription.topics or subscription.pattern is not None)
        elif state in _IN_GROUP and changed:
            self._urgent = True  # tell the coordinator now, not an interval later

    def leave(self, now_ms: int, done: StepDone) -> None:
        state = self.state
        self._join_after_leave = False
        if state in (_S.FATAL, _S.UNSUBSCRIBED):
            done(None)
            return
        if state in (_S.FENCED, _S.UNJOINED):
            # not in the group any more: nothing to send; the lose already running drops the partitions
            self._machine.transition_to(_S.UNSUBSCRIBED)
            self._rejoin_on_release = False
            done(None)
            return
        self._leave_waiters.append(done)
        if state in (_S.PREPARE_LEAVING, _S.LEAVING):
            return
        self._machine.transition_to(_S.PREPARE_LEAVING)
        self._leave_epoch = STATIC_LEAVE_EPOCH if self.config.group_instance_id else LEAVE_EPOCH
        self._leave_unsent = False
        self._when_idle(self._release_for_leave)

    def poll_called(self, now_ms: int) -> None:
        self._poll_timer.poll_called(now_ms)
        if self.state is _S.UNJOINED:
            if self._releasing:
                self._rejoin_on_release = True
            else:
                self._join()

    def commit_identity(self) -> CommitIdentity:
        if self.member_epoch <= 0:
            return NO_GROUP_IDENTITY
        return CommitIdentity(self.member_epoch, self.member_id, self.config.group_instance_id)

    def commit_rejected(self, error_code: int, now_ms: int) -> None:
        """Kafka leaves membership to the heartbeat: a commit with a stale epoch or an unknown member does not
        change the member's state. What it does say is that the member's view may be old, so the next
        heartbeat goes out now: it brings the new epoch (STALE_MEMBER_EPOCH, the commit can be retried with it)
        or the fencing error that makes the member rejoin."""
        if error_code in _STALE_COMMIT_ERRORS and self.state in _HEARTBEATING:
            self._urgent = True

    def fatal_error(self) -> BaseException | None:
        return self._fatal

    def left_group_error(self) -> MaxPollIntervalExceededError | None:
        """Why the member is out of the group while UNJOINED (``max.poll.interval.ms`` ran out), for the
        consumer to raise instead of a bare commit failure; None once it rejoins."""
        return self._poll_timeout

    # --- RequestManager -----------------------------------------------------------------------------------------

    def poll(self, now_ms: int) -> PollResult:
        state = self.state
        if state in _IN_GROUP and self._poll_timer.expired(now_ms):
            return self._leave_for_poll_timeout(now_ms)
        if state is _S.RECONCILING and not self._step_running:
            self._maybe_reconcile()
            state = self.state
        if state is _S.LEAVING:
            return self._send_leave(now_ms)
        if state not in _HEARTBEATING or (state is _S.PREPARE_LEAVING and self._leave_unsent):
            return PollResult()
        deadline = self._poll_timer.remaining_ms(now_ms) if state in _IN_GROUP else None
        node = self._coordinator.coordinator()
        if node is None or self._in_flight is not None:
            return PollResult((), deadline)
        send_at = self._schedule.next_send_ms(self._urgent or state in (_S.ACKNOWLEDGING,))
        if now_ms < send_at:
            return PollResult((), min_delay(send_at - now_ms, deadline))
        return PollResult((self._heartbeat(node, now_ms),), deadline)

    # --- heartbeats ---------------------------------------------------------------------------------------------

    def _heartbeat(self, node: int, now_ms: int) -> UnsentRequest:
        if self.state is _S.JOINING:
            self._fields.reset()  # every join heartbeat is a full one
        fields = self._fields.build(self.member_id, self.member_epoch, self._subscription, self._owned)
        self._urgent = False
        self._schedule.on_sent(now_ms)
        self._request_seq += 1
        seq = self._in_flight = self._request_seq
        generation = self._generation
        if self.state is _S.ACKNOWLEDGING:
            # the acknowledgement is in this request; go on with whatever is still to reconcile
            if self._assignment_target is None or self._assignment_target == self._owned:
                self._machine.transition_to(_S.STABLE)
            else:
                self._machine.transition_to(_S.RECONCILING)
        return self._request(node, fields, lambda r: self._on_response(r, seq, generation, fields))

    def _request(
        self, node: int, fields: HeartbeatFields, handler: Callable[[ClientResponse], None]
    ) -> UnsentRequest:
        return UnsentRequest(CONSUMER_GROUP_HEARTBEAT, fields.body, handler, node_id=node)

    def _on_response(
        self, response: ClientResponse, seq: int, generation: int, fields: HeartbeatFields
    ) -> None:
        if self._in_flight == seq:
            self._in_flight = None
        if generation != self._generation:
            return  # sent by an earlier incarnation of the member (before a fence, leave or rejoin)
        now = response.received_ms
        body = response.body
        if isinstance(response.error, UnsupportedVersionError):
            # the broker has no ConsumerGroupHeartbeat at all: retrying cannot help (Kafka fails the same way)
            self._fail(
                fatal_membership_error(ErrorCode.UNSUPPORTED_VERSION, str(response.error), self.group_id)
            )
            return
        if response.error is not None or body is None:
            self._retry_later(now, coordinator_lost=True)
            return
        code = body.error_code
        if code == ErrorCode.NONE:
            if response.version == 0 and fields.subscribed_topic_regex:
                self._fail(
                    fatal_membership_error(
                        ErrorCode.UNSUPPORTED_VERSION,
                        "a regex subscription needs ConsumerGroupHeartbeat v1",
                        self.group_id,
                    )
                )
                return
            self.heartbeats_answered += 1
            self._schedule.on_success(now, body.heartbeat_interval_ms)
            self._on_success(body)
        elif code in _COORDINATOR_ERRORS:
            self._retry_later(now, coordinator_lost=True)
        elif code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            self._retry_later(now, coordinator_lost=False)
        elif code in _FENCING_ERRORS:
            self._fields.reset()
            self._on_fenced(now)
        elif code in _ALWAYS_FATAL or not is_retriable(code):
            self._fields.reset()
            self._fail(fatal_membership_error(code, body.error_message, self.group_id))
        else:
            self._retry_later(now, coordinator_lost=False)

    def _retry_later(self, now_ms: int, *, coordinator_lost: bool) -> None:
        """Keep the assignment (and fetching); tell everything again once a heartbeat gets through."""
        self._fields.reset()
        self._schedule.on_failure(now_ms)
        if coordinator_lost:
            self._coordinator.coordinator_lost(now_ms)

    def _on_success(self, body: Any) -> None:
        state = self.state
        if state not in _HEARTBEATING:
            return
        if body.member_id:
            self.member_id = body.member_id  # v0 coordinators may hand out their own id on join
        self.member_epoch = body.member_epoch
        assignment = body.assignment
        if assignment is None or state not in _CAN_TAKE_ASSIGNMENT:
            return
        target = frozenset(
            TopicIdPartition(t.topic_id, p) for t in assignment.topic_partitions for p in t.partitions
        )
        self._on_target(target)

    def _on_target(self, target: frozenset[TopicIdPartition]) -> None:
        if target != self._assignment_target:
            self._waiting_metadata_version = None
        self._assignment_target = target
        state = self.state
        if state is _S.ACKNOWLEDGING:
            return  # the acknowledgement goes first; sending it moves on to this target
        if target != self._owned:
            if state is not _S.RECONCILING:
                self._machine.transition_to(_S.RECONCILING)
        elif state in (_S.JOINING, _S.RECONCILING) and not self._step_running:
            self._machine.transition_to(_S.STABLE)

    # --- reconciliation -----------------------------------------------------------------------------------------

    def _maybe_reconcile(self) -> None:
        target = self._assignment_target
        if target is None:
            return
        if (
            self._waiting_metadata_version is not None
            and self._waiting_metadata_version == self._names.version
        ):
            return  # still waiting for metadata to name some topic ids
        resolved: dict[TopicIdPartition, TopicPartition] = {}
        unknown: set[uuid.UUID] = set()
        for tip in target:
            name = self._names.topic_name(tip.topic_id) or self._owned_names.get(tip.topic_id)
            if name is None:
                unknown.add(tip.topic_id)
            else:
                resolved[tip] = TopicPartition(name, tip.partition)
        if unknown:
            self._waiting_metadata_version = self._names.version
            self._names.request_update(
                frozenset(unknown), self._subscription.topics, self._subscription.pattern
            )
        else:
            self._waiting_metadata_version = None
        resolved_ids = frozenset(resolved)
        if resolved_ids == self._owned:
            if not unknown:
                self._machine.transition_to(_S.STABLE)
            return  # nothing can change until metadata names the rest
        assigned = frozenset(resolved.values())
        owned_now = self._target.owned_partitions()
        revoked = owned_now - assigned
        added = assigned - owned_now
        names = {tip.topic_id: tp.topic for tip, tp in resolved.items()}
        self._step_running = True
        if revoked:
            self._target.revoke(
                revoked, lambda err: self._after_revoke(err, resolved_ids, names, assigned, added)
            )
        else:
            self._assign(resolved_ids, names, assigned, added)

    def _after_revoke(
        self,
        error: BaseException | None,
        resolved: frozenset[TopicIdPartition],
        names: dict[uuid.UUID, str],
        assigned: frozenset[TopicPartition],
        added: frozenset[TopicPartition],
    ) -> None:
        self._note_step_error(error)
        if self.state is not _S.RECONCILING:
            self._step_finished()  # fenced, leaving or failed meanwhile: that path takes over
            return
        self._assign(resolved, names, assigned, added)

    def _assign(
        self,
        resolved: frozenset[TopicIdPartition],
        names: dict[uuid.UUID, str],
        assigned: frozenset[TopicPartition],
        added: frozenset[TopicPartition],
    ) -> None:
        self._target.assign(assigned, added, lambda err: self._after_assign(err, resolved, names))

    def _after_assign(
        self, error: BaseException | None, resolved: frozenset[TopicIdPartition], names: dict[uuid.UUID, str]
    ) -> None:
        self._note_step_error(error)
        if self.state is _S.RECONCILING:
            # the consumer owns ``resolved`` now, whatever the callbacks said (the contract: go on either way)
            self._owned = resolved
            self._owned_names = names
            self._machine.transition_to(_S.ACKNOWLEDGING)
        self._step_finished()

    def _note_step_error(self, error: BaseException | None) -> None:
        if error is not None:
            self.last_step_error = error

    def _step_finished(self) -> None:
        self._step_running = False
        action, self._after_step = self._after_step, None
        if action is not None:
            action()

    def _when_idle(self, action: Callable[[], None]) -> None:
        """Run ``action`` now, or once the running step's ``done`` has come back (steps never overlap)."""
        if self._step_running:
            self._after_step = action
        else:
            action()

    # --- losing the assignment: fenced, poll timeout, fatal -----------------------------------------------------

    def _on_fenced(self, now_ms: int) -> None:
        state = self.state
        if state is _S.PREPARE_LEAVING:
            self._leave_unsent = True  # the coordinator dropped us already; finish releasing, send nothing
            self.member_epoch = JOIN_EPOCH
            return
        if state not in _IN_GROUP:
            return
        fenced_while_joining = state is _S.JOINING
        self._machine.transition_to(_S.FENCED)
        self._generation += 1
        self._in_flight = None
        self.member_epoch = JOIN_EPOCH
        self._assignment_target = None
        if fenced_while_joining:
            self._schedule.on_failure(now_ms)  # a join that is fenced again waits: no hot loop
        else:
            self._schedule.retry_now()
        self._release_by_losing(rejoin=True)

    def _release_by_losing(self, *, rejoin: bool) -> None:
        self._releasing = True
        self._rejoin_on_release = rejoin
        self._when_idle(self._lose_owned)

    def _lose_owned(self) -> None:
        lost = self._target.owned_partitions()
        if not lost:
            self._released(None)
            return
        self._step_running = True
        self._target.lose(lost, self._after_lose)

    def _after_lose(self, error: BaseException | None) -> None:
        self._note_step_error(error)
        self._step_running = False
        self._released(error)
        self._step_finished()

    def _released(self, error: BaseException | None) -> None:
        self._owned = frozenset()
        self._owned_names = {}
        self._releasing = False
        if self._rejoin_on_release and self.state in (_S.FENCED, _S.UNJOINED):
            self._rejoin_on_release = False
            self._join()

    def _fail(self, error: BaseException) -> None:
        state = self.state
        if not self._machine.can_transition_to(_S.FATAL):
            return
        self._fatal = error
        self._machine.transition_to(_S.FATAL)
        self._generation += 1
        self._in_flight = None
        self.member_epoch = JOIN_EPOCH
        if state in (_S.PREPARE_LEAVING, _S.LEAVING):
            self._complete_leave()
            return
        if state is not _S.UNSUBSCRIBED:
            self._release_by_losing(rejoin=False)

    # --- max.poll.interval.ms ----------------------------------------------------------------------------------

    def _leave_for_poll_timeout(self, now_ms: int) -> PollResult:
        """Kafka's STALE path: send the leave at once (no callbacks first, the application is not polling),
        then lose the partitions and wait for the next poll."""
        self._machine.transition_to(_S.PREPARE_LEAVING)
        self._machine.transition_to(_S.LEAVING)
        epoch = STATIC_LEAVE_EPOCH if self.config.group_instance_id else LEAVE_EPOCH
        node = self._coordinator.coordinator()
        requests: tuple[UnsentRequest, ...] = ()
        if node is not None:
            fields = self._fields.leave(self.member_id, epoch)
            requests = (self._request(node, fields, _ignore_response),)
        self._machine.transition_to(_S.UNJOINED)
        self._poll_timeout = MaxPollIntervalExceededError(self.group_id, self.config.max_poll_interval_ms)
        self._generation += 1
        self._in_flight = None
        self.member_epoch = epoch
        self._assignment_target = None
        self._release_by_losing(rejoin=False)
        return PollResult(requests, None)

    # --- leaving ------------------------------------------------------------------------------------------------

    def _release_for_leave(self) -> None:
        if self.state is not _S.PREPARE_LEAVING:
            return  # failed meanwhile: the fatal path completed the leave
        owned = self._target.owned_partitions()
        if not owned:
            self._released_for_leave(None)
            return
        self._step_running = True
        self._target.revoke(owned, self._after_leave_revoke)

    def _after_leave_revoke(self, error: BaseException | None) -> None:
        self._note_step_error(error)
        self._step_running = False
        self._released_for_leave(error)
        self._step_finished()

    def _released_for_leave(self, error: BaseException | None) -> None:
        self._owned = frozenset()
        self._owned_names = {}
        self._assignment_target = None
        if self.state is not _S.PREPARE_LEAVING:
            return
        self._machine.transition_to(_S.LEAVING)
        self.member_epoch = self._leave_epoch
        if self._leave_unsent:
            self._finish_leave()

    def _send_leave(self, now_ms: int) -> PollResult:
        node = self._coordinator.coordinator()
        if node is None:
            self._finish_leave()  # the leave could not be sent; the session timeout will remove us
            return PollResult()
        fields = self._fields.leave(self.member_id, self.member_epoch)
        self._finish_leave(complete_waiters=False)
        waiters, self._leave_waiters = self._leave_waiters, []

        def on_leave_response(response: ClientResponse) -> None:
            for done in waiters:
                done(None)

        return PollResult((self._request(node, fields, on_leave_response),), None)

    def _finish_leave(self, *, complete_waiters: bool = True) -> None:
        self._machine.transition_to(_S.UNSUBSCRIBED)
        self._generation += 1
        self._in_flight = None
        self.member_epoch = JOIN_EPOCH
        if complete_waiters:
            self._complete_leave()
        if self._join_after_leave:
            self._join_after_leave = False
            self._join()

    def _complete_leave(self) -> None:
        waiters, self._leave_waiters = self._leave_waiters, []
        for done in waiters:
            done(None)

    # --- joining ------------------------------------------------------------------------------------------------

    def _join(self) -> None:
        self._machine.transition_to(_S.JOINING)
        self._poll_timeout = None
        self._generation += 1
        self._in_flight = None
        self.member_epoch = JOIN_EPOCH
        self._assignment_target = None
        self._waiting_metadata_version = None
        self._fields.reset()
        self._urgent = True


def _ignore_response(response: ClientResponse) -> None:
    """The leave sent when the poll interval ran out: the member rejoins whatever the answer."""


if TYPE_CHECKING:  # the contract, checked by mypy
    _AS_CONTRACT: type[MembershipManager] = ConsumerMembershipManager
