"""A bounced static member whose subscription bytes differ only in what a restart changes: no rebalance.

Found with Apache Kafka's Java consumer (tests/java/test_java_groups.py): its subscription (ConsumerProtocol
v3) carries the generation of its owned partitions, and a process that rejoined in a later generation sends
other bytes than its restarted successor (generation -1, nothing owned) for the same topics. Comparing the
bytes rebalanced the whole group on about half of all static bounces; the topics (and rack) are what an old
assignment depends on.
"""

from __future__ import annotations

from coordinator_harness import Harness, assignment

from groupstream.coordinator.classic_group import GroupState
from groupstream.protocol.consumer_protocol import ConsumerSubscription, encode_subscription
from groupstream.protocol.error_codes import ErrorCode

TIMEOUTS = {"session": 20_000, "rebalance": 30_000}


def _subscription(
    *topics: str, generation: int, owned: tuple[tuple[str, int], ...], rack: str | None
) -> bytes:
    sub = ConsumerSubscription(
        topics=topics,
        owned_partitions=owned,
        generation_id=generation,
        rack_id=rack,
        user_data=b"g%d" % generation,
    )
    return encode_subscription(sub, 3)


def _group_where_b_rejoined_later(h: Harness) -> tuple[dict[str, str], int]:
    """Static members a and b; b's metadata is from a later generation and lists what it owned."""
    protocols = {
        "a": [("range", _subscription("t", generation=-1, owned=(), rack=None))],
        "b": [("range", _subscription("t", generation=4, owned=(("t", 1),), rack=None))],
    }
    tokens = {i: h.join(instance_id=i, protocols=protocols[i], **TIMEOUTS) for i in ("a", "b")}
    h.advance(2 * h.config.initial_rebalance_delay_ms)
    answers = {i: h.answer(t) for i, t in tokens.items()}
    ids = {i: a.member_id for i, a in answers.items()}
    generation = answers["a"].generation_id
    leader = answers["a"].leader
    followers = [h.sync(m, generation, instance_id=i) for i, m in ids.items() if m != leader]
    h.sync(leader, generation, {ids["a"]: assignment(("t", 0)), ids["b"]: assignment(("t", 1))},
           instance_id=next(i for i, m in ids.items() if m == leader))  # fmt: skip
    assert all(h.answer(t).error_code == 0 for t in followers)
    return ids, generation


def _restart_b(h: Harness, metadata: bytes) -> int:
    token = h.join(instance_id="b", protocols=[("range", metadata)], **TIMEOUTS)
    h.advance(h.config.static_member_liveness_ms)  # the old process stays silent: it is gone
    return token


def test_a_restarted_static_member_with_the_same_topics_takes_its_place_without_a_rebalance() -> None:
    h = Harness()
    ids, generation = _group_where_b_rejoined_later(h)
    answer = h.answer(_restart_b(h, _subscription("t", generation=-1, owned=(), rack=None)))
    assert answer.error_code == ErrorCode.NONE and answer.member_id != ids["b"]
    assert answer.generation_id == generation and h.state() is GroupState.STABLE
    assert h.answer(h.sync(answer.member_id, generation, instance_id="b")).assignment == assignment(("t", 1))
    assert h.heartbeat(ids["a"], generation, instance_id="a") == ErrorCode.NONE


def test_a_restarted_static_member_with_other_topics_or_rack_rebalances() -> None:
    for metadata in (
        _subscription("t", "u", generation=-1, owned=(), rack=None),
        _subscription("t", generation=-1, owned=(), rack="rack-2"),
    ):
        h = Harness()
        _ids, _generation = _group_where_b_rejoined_later(h)
        token = _restart_b(h, metadata)
        assert h.parked(token) and h.state() is GroupState.PREPARING_REBALANCE
