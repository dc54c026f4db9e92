"""A `MembershipManager` for the classic group protocol: JoinGroup, SyncGroup, Heartbeat, LeaveGroup, with the
assignment computed by the leader's client-side assignor (Kafka's ConsumerCoordinator). Network thread only;
pure: time comes in as ``now_ms``, effects leave as requests and `AssignmentTarget` steps.

A rebalance, as the member lives it:

1. PREPARING: an eager member revokes everything it owns first (the callback runs, positions are committed); a
   cooperative member keeps its partitions and reports them as owned in its subscription.
2. JOINING: JoinGroup with one protocol per configured assignor (subscribed topics, owned partitions, the
   assignor's user data, generation, rack). MEMBER_ID_REQUIRED is answered by joining again with the id given.
3. SYNCING: the leader decodes every member's subscription, runs the chosen assignor over the partition counts
   it knows, and sends the result with its SyncGroup; it remembers those counts, and when metadata later shows
   a topic with more partitions (or a new topic a member subscribed to) it asks for a rebalance by rejoining.
4. RECONCILING: partitions that went away are revoked, then the assignment is applied; a cooperative member
   that had to give something up rejoins once more, so the partitions it released can be handed out (KIP-429).
5. STABLE: heartbeats every ``heartbeat.interval.ms``. REBALANCE_IN_PROGRESS means rejoin; ILLEGAL_GENERATION or
   UNKNOWN_MEMBER_ID mean the group moved on without this member: its partitions are lost (no commit) and it
   joins again (with a new member id for UNKNOWN_MEMBER_ID); FENCED_INSTANCE_ID is fatal.

``max.poll.interval.ms``: when ``poll_called`` has not been seen for that long, a dynamic member sends
LeaveGroup and gives its partitions up as lost; the next ``poll`` rejoins. A static member (``group.instance.id``)
never sends LeaveGroup when it closes, so that a restart within the session timeout keeps its assignment.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from groupstream.assignment.base import ConsumerPartitionAssignor, select_rebalance_protocol
from groupstream.assignment.types import ClusterView, RebalanceProtocol, Subscription, TopicPartition
from groupstream.client.consumer.classic_member_state import CLASSIC_MEMBER_STATES, ClassicMemberState
from groupstream.client.consumer.consumer_membership_errors import (
    FencedInstanceIdError,
    GroupMembershipError,
    MaxPollIntervalExceededError,
)
from groupstream.client.consumer.membership_api import (
    AssignmentTarget,
    CommitIdentity,
    CoordinatorLocator,
    StepDone,
)
from groupstream.client.consumer.membership_timing import PollTimer, RetryBackoff
from groupstream.client.net.metadata import MetadataCache
from groupstream.client.net.requests import ClientResponse, PollResult, UnsentRequest
from groupstream.protocol.consumer_protocol import (
    ConsumerAssignment,
    ConsumerSubscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from groupstream.protocol.error_codes import ErrorCode
from groupstream.protocol.messages import by_name

__all__ = ["ClassicMembershipConfig", "ClassicMembershipManager"]

log = logging.getLogger("groupstream.client.consumer")

S = ClassicMemberState
E = ErrorCode
_JOIN, _SYNC, _HEARTBEAT, _LEAVE = (by_name(n) for n in ("JoinGroup", "SyncGroup", "Heartbeat", "LeaveGroup"))
_COORDINATOR_ERRORS = frozenset({E.NOT_COORDINATOR, E.COORDINATOR_NOT_AVAILABLE})
_RETRY_LATER = frozenset({E.COORDINATOR_LOAD_IN_PROGRESS, E.REBALANCE_IN_PROGRESS})
_FATAL = frozenset(
    {
        E.FENCED_INSTANCE_ID,
        E.INCONSISTENT_GROUP_PROTOCOL,
        E.GROUP_MAX_SIZE_REACHED,
        E.GROUP_AUTHORIZATION_FAILED,
        E.INVALID_SESSION_TIMEOUT,
        E.INVALID_GROUP_ID,
        E.UNSUPPORTED_VERSION,
    }
)


@dataclass(frozen=True)
class ClassicMembershipConfig:
    group_id: str
    group_instance_id: str | None
    client_id: str
    session_timeout_ms: int = 45_000
    rebalance_timeout_ms: int = 300_000  # max.poll.interval.ms, as Java sends it
    heartbeat_interval_ms: int = 3_000
    retry_backoff_ms: int = 100
    retry_backoff_max_ms: int = 1_000
    assignors: tuple[ConsumerPartitionAssignor, ...] = ()
    client_rack: str | None = None


class ClassicMembershipManager:
    def __init__(
        self,
        config: ClassicMembershipConfig,
        target: AssignmentTarget,
        locator: CoordinatorLocator,
        metadata: MetadataCache,
    ) -> None:
        if not config.assignors:
            raise ValueError("partition.assignment.strategy names no assignor")
        self.config = config
        self._target = target
        self._locator = locator
        self._metadata = metadata
        self.protocol = select_rebalance_protocol(config.assignors)
        self.state = S.UNJOINED
        self.member_id = ""
        self.generation = -1
        self.leader_id = ""
        self.protocol_name: str | None = None
        self.topics: frozenset[str] = frozenset()
        self._in_flight = False
        self._step = False  # an AssignmentTarget step is running
        self._rejoin_needed = False
        self._join_backoff = RetryBackoff(config.retry_backoff_ms, config.retry_backoff_max_ms)
        self._next_heartbeat_ms = 0
        self._last_heartbeat_ok_ms: int | None = None
        self._heartbeat_in_flight = False
        self._poll_timer = PollTimer(config.rebalance_timeout_ms)
        self._left_for_poll_timeout = False
        self._leader_counts: dict[str, int] | None = None
        self._leave_done: StepDone | None = None
        self._fatal: BaseException | None = None
        self._pending_requests: list[UnsentRequest] = []  # made in response handlers, sent by the next poll
        self._metadata_version_at_subscribe = 0
        self.last_step_error: BaseException | None = None

    def transition_to(self, state: ClassicMemberState) -> None:
        CLASSIC_MEMBER_STATES.check(self.state, state)
        log.debug("group %s member %s: %s -> %s", self.config.group_id, self.member_id, self.state.value, state.value)
        self.state = state

    # --- the MembershipManager contract ----------------------------------------------------------------

    def subscribe(self, topics: frozenset[str], pattern: str | None, now_ms: int) -> None:
        if pattern is not None:
            raise ValueError("the classic protocol resolves patterns in the client: subscribe with topic names")
        changed = topics != self.topics
        self.topics = topics
        self._metadata.add_topics(topics)
        self._metadata_version_at_subscribe = self._metadata.version
        if self.state is S.UNJOINED or changed:
            self._request_rejoin()

    def leave(self, now_ms: int, done: StepDone) -> None:
        if self.state is S.FATAL:
            done(None)
            return
        self._leave_done = done
        self._rejoin_needed = False  # a rejoin asked for before (REBALANCE_IN_PROGRESS) must not follow the leave
        owned = self._target.owned_partitions()
        self.transition_to(S.LEAVING)
        if owned:
            self._step = True
            self._target.revoke(owned, self._after_leave_revoke)
        else:
            self._after_leave_revoke(None)

    def poll_called(self, now_ms: int) -> None:
        self._poll_timer.poll_called(now_ms)
        if self._left_for_poll_timeout and self.state is S.UNJOINED:
            self._left_for_poll_timeout = False
            self._request_rejoin()

    def commit_identity(self) -> CommitIdentity:
        return CommitIdentity(self.generation, self.member_id, self.config.group_instance_id)

    def commit_rejected(self, error_code: int, now_ms: int) -> None:
        if error_code == E.REBALANCE_IN_PROGRESS:
            self._request_rejoin()
        elif error_code in (E.ILLEGAL_GENERATION, E.UNKNOWN_MEMBER_ID):
            if self.state is not S.STABLE:
                # The answer is about a generation this member is already leaving: a (re)join is under way.
                # Resetting now would orphan the JoinGroup in flight, which the coordinator holds until the
                # rebalance ends, and stall the member for the rebalance timeout (seen on Tansu).
                return
            self._reset(now_ms, forget_member_id=error_code == E.UNKNOWN_MEMBER_ID)
        elif error_code == E.FENCED_INSTANCE_ID:
            self._fail(E.FENCED_INSTANCE_ID)

    def fatal_error(self) -> BaseException | None:
        return self._fatal

    def left_group_error(self) -> MaxPollIntervalExceededError | None:
        if not self._left_for_poll_timeout:
            return None
        return MaxPollIntervalExceededError(self.config.group_id, self.config.rebalance_timeout_ms)

    # --- the request manager -----------------------------------------------------------------------------

    def poll(self, now_ms: int) -> PollResult:
        result = self._poll(now_ms)
        if not self._pending_requests:
            return result
        pending, self._pending_requests = self._pending_requests, []
        return PollResult([*pending, *result.unsent_requests], next_poll_delay_ms=result.next_poll_delay_ms)

    def _poll(self, now_ms: int) -> PollResult:
        if self.state is S.FATAL or (self._in_flight and self.state is not S.STABLE):
            return PollResult(next_poll_delay_ms=None)
        if self._poll_interval_expired(now_ms):
            return self._leave_for_poll_timeout(now_ms)
        if self.state is S.LEAVING:
            return PollResult()
        node = self._locator.coordinator()
        if node is None:
            return PollResult(next_poll_delay_ms=self.config.retry_backoff_ms)
        if self.state is S.STABLE:
            self._check_metadata()
        if self._rejoin_needed and not self._step and self.state in (S.UNJOINED, S.STABLE):
            self._rejoin_needed = False
            self.transition_to(S.PREPARING)
            self._prepare()
        if self.state is S.PREPARING and not self._step and not self._in_flight:
            if wait := self._join_backoff.wait_ms(now_ms):
                return PollResult(next_poll_delay_ms=wait)
            if not self._metadata_ready():
                self._metadata.request_update()
                return PollResult(next_poll_delay_ms=self.config.retry_backoff_ms)
            return PollResult([self._join_request(node)])
        if self.state is S.STABLE and not self._heartbeat_in_flight:
            if self._last_heartbeat_ok_ms is not None and now_ms - self._last_heartbeat_ok_ms > self.config.session_timeout_ms:
                log.info("group %s: no heartbeat answered for session.timeout.ms; finding the coordinator again",
                         self.config.group_id)  # fmt: skip
                self._locator.coordinator_lost(now_ms)
                self._last_heartbeat_ok_ms = now_ms
                return PollResult(next_poll_delay_ms=self.config.retry_backoff_ms)
            if now_ms >= self._next_heartbeat_ms:
                self._heartbeat_in_flight = True
                self._next_heartbeat_ms = now_ms + self.config.heartbeat_interval_ms
                return PollResult([self._heartbeat_request(node)], next_poll_delay_ms=self.config.heartbeat_interval_ms)
            return PollResult(next_poll_delay_ms=self._next_heartbeat_ms - now_ms)
        return PollResult()

    def _metadata_ready(self) -> bool:
        """Join only once metadata knows the subscribed topics (or that they do not exist), so that a leader
        does not assign from an empty view and rebalance again right after."""
        if all(self._metadata.partition_count(t) is not None for t in self.topics):
            return True
        # a refresh asked for after the subscription changed has answered: missing topics do not exist (yet)
        return self._metadata.version >= self._metadata_version_at_subscribe + 2

    def _request_rejoin(self) -> None:
        if self.state is not S.FATAL:
            self._rejoin_needed = True

    def _prepare(self) -> None:
        """Eager: give everything up before joining. Cooperative: keep it."""
        owned = self._target.owned_partitions()
        if self.protocol is RebalanceProtocol.EAGER and owned:
            self._step = True
            self._target.revoke(owned, self._step_done)

    def _step_done(self, error: BaseException | None) -> None:
        self._step = False
        if error is not None:
            self.last_step_error = error

    # --- JoinGroup ------------------------------------------------------------------------------------------

    def _join_request(self, node: int) -> UnsentRequest:
        cfg = self.config
        owned = sorted(self._target.owned_partitions())
        protocols = []
        R: Any = _JOIN.Request
        for assignor in cfg.assignors:
            user_data = assignor.subscription_user_data(sorted(self.topics), owned if self.generation >= 0 else None,
                                                        self.generation)  # fmt: skip
            sub = ConsumerSubscription(
                topics=tuple(sorted(self.topics)),
                user_data=user_data,
                owned_partitions=tuple((tp.topic, tp.partition) for tp in owned),
                generation_id=self.generation,
                rack_id=cfg.client_rack,
            )
            protocols.append(R.JoinGroupRequestProtocol(name=assignor.name, metadata=encode_subscription(sub)))
        body = R(
            group_id=cfg.group_id,
            session_timeout_ms=cfg.session_timeout_ms,
            rebalance_timeout_ms=cfg.rebalance_timeout_ms,
            member_id=self.member_id,
            group_instance_id=cfg.group_instance_id,
            protocol_type="consumer",
            protocols=protocols,
        )
        self._in_flight = True
        self.transition_to(S.JOINING)
        # the join waits for the whole rebalance: up to the rebalance timeout, plus a margin
        return UnsentRequest(_JOIN, body, self._on_join, node_id=node, timeout_ms=cfg.rebalance_timeout_ms + 5_000)

    def _on_join(self, response: ClientResponse) -> None:
        self._in_flight = False
        now = response.received_ms
        if self.state is not S.JOINING:
            return  # left or failed meanwhile
        if response.error is not None:
            self._retry_join(now, coordinator=True)
            return
        body = response.body
        code = body.error_code
        if code == E.MEMBER_ID_REQUIRED:
            self.member_id = body.member_id
            self._retry_join(now, delay=False)
            return
        if code == E.UNKNOWN_MEMBER_ID:
            self.member_id = ""
            self._retry_join(now, delay=False)
            return
        if code in _COORDINATOR_ERRORS:
            self._retry_join(now, coordinator=True)
            return
        if code in _RETRY_LATER:
            self._retry_join(now)
            return
        if code != E.NONE:
            self._fail(code)
            return
        self._join_backoff.succeeded()
        self.member_id = body.member_id
        self.generation = body.generation_id
        self.leader_id = body.leader
        self.protocol_name = body.protocol_name
        self.transition_to(S.SYNCING)
        assignments: list[Any] = []
        if body.leader == body.member_id and not getattr(body, "skip_assignment", False):
            try:
                assignments = self._assign(body.protocol_name, body.members)
            except Exception as e:  # an assignor failed: the group cannot be assigned by this leader
                log.error("group %s: the %s assignor failed: %s", self.config.group_id, body.protocol_name, e)
                self._fail(E.INCONSISTENT_GROUP_PROTOCOL, str(e))
                return
        self._send_sync(assignments)

    def _retry_join(self, now_ms: int, *, coordinator: bool = False, delay: bool = True) -> None:
        if coordinator:
            self._locator.coordinator_lost(now_ms)
        if delay:
            self._join_backoff.failed(now_ms)
        else:
            self._join_backoff.not_before_ms = now_ms
        self.transition_to(S.PREPARING)  # a retry of the join: JOINING and SYNCING may go back to PREPARING
        self._rejoin_needed = False

    def _assign(self, protocol_name: str, members: Sequence[Any]) -> list[Any]:
        assignor = next(a for a in self.config.assignors if a.name == protocol_name)
        subscriptions = []
        topics: set[str] = set()
        for m in members:
            sub = decode_subscription(bytes(m.metadata))
            topics.update(sub.topics)
            subscriptions.append(
                Subscription(
                    member_id=m.member_id,
                    topics=tuple(sub.topics),
                    owned_partitions=tuple(TopicPartition(t, p) for t, p in sub.owned_partitions),
                    user_data=sub.user_data,
                    group_instance_id=m.group_instance_id,
                    rack_id=sub.rack_id,
                    generation_id=sub.generation_id if sub.version >= 2 else None,
                )
            )
        self._metadata.add_topics(topics)
        counts = {t: n for t in sorted(topics) if (n := self._metadata.partition_count(t))}
        self._leader_counts = counts
        result = assignor.assign(ClusterView(counts), subscriptions)
        R: Any = _SYNC.Request
        return [
            R.SyncGroupRequestAssignment(
                member_id=member,
                assignment=encode_assignment(
                    ConsumerAssignment(tuple((tp.topic, tp.partition) for tp in parts), result.user_data.get(member))
                ),
            )
            for member, parts in result.items()
        ]

    def _check_metadata(self) -> None:
        """The leader rejoins when a topic of the group grew or appeared since it assigned."""
        if self._leader_counts is None or self.leader_id != self.member_id:
            return
        for topic in set(self._leader_counts) | set(self.topics):
            count = self._metadata.partition_count(topic)
            if count and count != self._leader_counts.get(topic):
                log.info("group %s: %s now has %d partitions; rebalancing", self.config.group_id, topic, count)
                self._leader_counts = None
                self._request_rejoin()
                return

    # --- SyncGroup ----------------------------------------------------------------------------------------------

    def _send_sync(self, assignments: list[Any]) -> None:
        node = self._locator.coordinator()
        if node is None:
            self._retry_join(0, coordinator=False)
            return
        R: Any = _SYNC.Request
        body = R(
            group_id=self.config.group_id,
            generation_id=self.generation,
            member_id=self.member_id,
            group_instance_id=self.config.group_instance_id,
            protocol_type="consumer",
            protocol_name=self.protocol_name,
            assignments=assignments,
        )
        self._in_flight = True
        self._pending_requests.append(
            UnsentRequest(_SYNC, body, self._on_sync, node_id=node, timeout_ms=self.config.rebalance_timeout_ms + 5_000)
        )

    def _on_sync(self, response: ClientResponse) -> None:
        self._in_flight = False
        now = response.received_ms
        if self.state is not S.SYNCING:
            return
        if response.error is not None:
            self._retry_join(now, coordinator=True)
            return
        code = response.body.error_code
        if code in (E.REBALANCE_IN_PROGRESS, *_COORDINATOR_ERRORS):
            self._retry_join(now, coordinator=code in _COORDINATOR_ERRORS)
            return
        if code in (E.ILLEGAL_GENERATION, E.UNKNOWN_MEMBER_ID):
            self._reset(now, forget_member_id=code == E.UNKNOWN_MEMBER_ID)
            return
        if code != E.NONE:
            self._fail(code)
            return
        assignment = decode_assignment(bytes(response.body.assignment))
        mine = frozenset(TopicPartition(t, p) for t, p in assignment.partitions)
        assignor = next((a for a in self.config.assignors if a.name == self.protocol_name), None)
        if assignor is not None:
            assignor.on_assignment(sorted(mine), assignment.user_data, self.generation)
        self.transition_to(S.RECONCILING)
        self._reconcile(mine)

    def _reconcile(self, assignment: frozenset[TopicPartition]) -> None:
        owned = self._target.owned_partitions()
        revoked = owned - assignment
        added = assignment - owned
        follow_up = self.protocol is RebalanceProtocol.COOPERATIVE and bool(revoked)

        def assign(error: BaseException | None) -> None:
            if error is not None:
                self.last_step_error = error
            if self.state is not S.RECONCILING:
                self._step = False
                return
            self._target.assign(assignment, added, assigned)

        def assigned(error: BaseException | None) -> None:
            self._step = False
            if error is not None:
                self.last_step_error = error
            if self.state is not S.RECONCILING:
                return
            self.transition_to(S.STABLE)
            self._next_heartbeat_ms = 0
            self._last_heartbeat_ok_ms = None
            if follow_up:
                self._request_rejoin()  # KIP-429: what was released is handed out in one more round

        self._step = True
        if revoked:
            self._target.revoke(revoked, assign)
        else:
            assign(None)

    # --- Heartbeat -------------------------------------------------------------------------------------------------

    def _heartbeat_request(self, node: int) -> UnsentRequest:
        R: Any = _HEARTBEAT.Request
        body = R(group_id=self.config.group_id, generation_id=self.generation, member_id=self.member_id,
                 group_instance_id=self.config.group_instance_id)  # fmt: skip
        generation = self.generation
        return UnsentRequest(_HEARTBEAT, body, lambda r: self._on_heartbeat(r, generation), node_id=node)

    def _on_heartbeat(self, response: ClientResponse, generation: int) -> None:
        self._heartbeat_in_flight = False
        now = response.received_ms
        if response.error is not None:
            self._locator.coordinator_lost(now)
            return
        code = response.body.error_code
        if code == E.NONE:
            self._last_heartbeat_ok_ms = now
            return
        if generation != self.generation or self.state is not S.STABLE:
            return  # about a generation this member already left
        if code in _COORDINATOR_ERRORS:
            self._locator.coordinator_lost(now)
        elif code == E.REBALANCE_IN_PROGRESS:
            self._last_heartbeat_ok_ms = now
            self._request_rejoin()
        elif code in (E.ILLEGAL_GENERATION, E.UNKNOWN_MEMBER_ID):
            self._reset(now, forget_member_id=code == E.UNKNOWN_MEMBER_ID)
        elif code in _FATAL:
            self._fail(code)
        else:
            log.warning("group %s: heartbeat failed with %s", self.config.group_id, E(code).name)

    # --- resets, failures, leaving ----------------------------------------------------------------------------------

    def _reset(self, now_ms: int, forget_member_id: bool) -> None:
        """The group moved on without this member: what it owns is lost (no commit), then it joins again."""
        log.info("group %s: member %s is out of the group's generation; rejoining", self.config.group_id, self.member_id)
        self.generation = -1
        if forget_member_id:
            self.member_id = ""
        if self.state not in (S.UNJOINED, S.LEAVING, S.FATAL):
            self.transition_to(S.UNJOINED)
        owned = self._target.owned_partitions()
        if owned:
            self._step = True
            self._target.lose(owned, self._step_done)
        self._request_rejoin()

    def _fail(self, code: int, detail: str | None = None) -> None:
        error: BaseException
        if code == E.FENCED_INSTANCE_ID:
            error = FencedInstanceIdError(
                code, f"another consumer took over group.instance.id {self.config.group_instance_id!r}",
                group_id=self.config.group_id,
            )  # fmt: skip
        else:
            error = GroupMembershipError(code, detail, group_id=self.config.group_id)
        log.error("group %s: %s", self.config.group_id, error)
        self._fatal = error
        if self.state is not S.FATAL:
            self.transition_to(S.FATAL)
        owned = self._target.owned_partitions()
        if owned:
            self._target.lose(owned, self._step_done)

    def _poll_interval_expired(self, now_ms: int) -> bool:
        return self.state not in (S.UNJOINED, S.LEAVING) and self._poll_timer.expired(now_ms)

    def _leave_for_poll_timeout(self, now_ms: int) -> PollResult:
        log.warning("group %s: poll() was not called within max.poll.interval.ms (%d ms); leaving the group",
                    self.config.group_id, self.config.rebalance_timeout_ms)  # fmt: skip
        dynamic = self.config.group_instance_id is None and self._locator.coordinator() is not None
        request = self._leave_request() if dynamic and self.member_id else None
        self._left_for_poll_timeout = True
        self.transition_to(S.UNJOINED)
        self.generation = -1
        owned = self._target.owned_partitions()
        if owned:
            self._step = True
            self._target.lose(owned, self._step_done)
        if request is None:
            return PollResult()
        self.member_id = ""
        return PollResult([request])

    def _after_leave_revoke(self, error: BaseException | None) -> None:
        self._step = False
        if error is not None:
            self.last_step_error = error
        node = self._locator.coordinator()
        done = self._leave_done
        self._leave_done = None
        dynamic = self.config.group_instance_id is None and node is not None and self.member_id
        request = self._leave_request() if dynamic else None
        self.generation = -1
        self.member_id = "" if request is not None else self.member_id
        self.transition_to(S.UNJOINED)
        if request is None or node is None:
            if done is not None:
                done(None)
            return
        request.handler = lambda _r: done(None) if done is not None else None
        self._pending_requests.append(request)

    def _leave_request(self) -> UnsentRequest:
        R: Any = _LEAVE.Request
        member_id = self.member_id

        def body(version: int) -> Any:
            if version >= 3:
                return R(group_id=self.config.group_id,
                         members=[R.MemberIdentity(member_id=member_id, group_instance_id=None)])  # fmt: skip
            return R(group_id=self.config.group_id, member_id=member_id)

        return UnsentRequest(_LEAVE, body, lambda _r: None, node_id=self._locator.coordinator())
