"""The steady heartbeat (a reconciled member reporting no change to a group with nothing new for it) is
answered without building the member's change; these pin that it means exactly what the full path would:
no record, the session renewed, no assignment; and that anything new still takes the full path."""

from __future__ import annotations

from consumer_group_kit import Member, heartbeat
from coordinator_harness import GROUP, Harness, StaticTopics

from groupstream.coordinator.consumer_group import ConsumerGroup
from groupstream.coordinator.timers import consumer_session_key
from groupstream.protocol.error_codes import ErrorCode

E = ErrorCode


def group(h: Harness) -> ConsumerGroup:
    g = h.shard.consumer_group(GROUP)
    assert g is not None
    return g


def test_a_steady_heartbeat_renews_the_session_and_writes_nothing() -> None:
    h = Harness()
    a = Member(h, "a")
    a.join()
    h.advance(2_000)
    written = len(h.log)
    answer = heartbeat(h, "a", a.epoch)
    assert (answer.error_code, answer.member_epoch, answer.assignment) == (E.NONE, a.epoch, None)
    assert answer.heartbeat_interval_ms == h.config.consumer_heartbeat_interval_ms
    assert len(h.log) == written
    assert h.timers[consumer_session_key(GROUP, "a")] == h.now + h.config.consumer_session_timeout_ms


def test_a_new_client_id_a_grown_topic_or_a_wrong_epoch_take_the_full_path() -> None:
    h = Harness(topics=StaticTopics({"t": 2}))
    a = Member(h, "a")
    a.join()
    written = len(h.log)
    heartbeat(h, "a", a.epoch, client_id="renamed")  # the member metadata record keeps the client id
    assert len(h.log) == written + 1 and group(h).members["a"].metadata.client_id == "renamed"
    h.topics.topics["t"] = 3
    answer = heartbeat(h, "a", a.epoch, client_id="renamed")
    assert answer.member_epoch == a.epoch + 1 and answer.assignment is not None  # the new partition
    assert heartbeat(h, "a", a.epoch + 5, client_id="renamed").error_code == E.FENCED_MEMBER_EPOCH


def test_an_acknowledgement_reporting_owned_partitions_is_steady_but_a_revocation_is_not() -> None:
    h = Harness(topics=StaticTopics({"t": 4}))
    a, b = Member(h, "a"), Member(h, "b")
    a.join()
    h.advance(2_000)  # past the assignment interval: b's join computes a new target
    b.join()
    written = len(h.log)
    assert a.beat().assignment is not None and len(a.owned) == 2  # a is told to give two up
    assert len(h.log) == written + 1
    a.beat()  # the revocation acknowledged (a reports the two it kept): a record, the full path
    assert len(h.log) == written + 2 and group(h).members["a"].assignment.pending_revocation == frozenset()
    b.beat()
    b.beat()
    g = group(h)
    assert g.state.value == "Stable" and a.epoch == b.epoch == g.epoch
    # A Stable member at the group's epoch reporting what it owns (or any other set: reconciling a Stable
    # member at the target epoch ignores it, as Kafka's CurrentAssignmentBuilder does) changes nothing.
    written, before = len(h.log), g.members["a"].assignment
    for owned in (a.owned, set(), {("t", p) for p in range(4)}):
        answer = heartbeat(h, "a", a.epoch, owned=owned)
        assert (answer.error_code, answer.member_epoch, answer.assignment) == (E.NONE, a.epoch, None)
        assert h.timers[consumer_session_key(GROUP, "a")] == h.now + h.config.consumer_session_timeout_ms
    assert len(h.log) == written and g.members["a"].assignment is before
