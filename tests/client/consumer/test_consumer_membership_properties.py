"""Random interleavings of new targets, finished steps and heartbeats (Hypothesis, manual clock, no threads).

Whatever the order: steps never overlap (the recording target fails the test otherwise), the member never
reports owning a partition the consumer does not own, a revoke never touches a partition the same
reconciliation keeps, and once the coordinator stops changing its mind the consumer owns exactly the last
target and the member is STABLE.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from test_consumer_membership import ID_A, Member, owned_on_wire, sent, tp

from groupstream.client.consumer.heartbeat_fields import TopicIdPartition
from groupstream.client.consumer.member_state import MemberState

PARTITIONS = range(6)
targets = st.frozensets(st.sampled_from(list(PARTITIONS)))
operations = st.lists(
    st.one_of(
        st.tuples(st.just("target"), targets),
        st.tuples(st.just("finish"), st.none()),
        st.tuples(st.just("heartbeat"), st.none()),
    ),
    max_size=25,
)


def check_report(h: Member, req: Any) -> None:
    reported = owned_on_wire(sent(req))
    if reported is not None:
        assert tp("A", *reported.get(ID_A, [])) == h.target.owned, (
            "reported partitions the consumer does not own"
        )


def answer_next(h: Member, epoch: int, target: frozenset[int] | None) -> None:
    """Send whatever heartbeat is due (advancing the clock to it) and answer it."""
    reqs = h.poll()
    if not reqs:
        delay = h.m.poll(h.now).next_poll_delay_ms
        if delay is None:
            return  # in flight or nothing to send (a step is running): the caller finishes it
        h.now += delay
        reqs = h.poll()
    for req in reqs:
        check_report(h, req)
        h.answer(req, epoch=epoch, assignment=None if target is None else {ID_A: sorted(target)})


@settings(max_examples=150, deadline=None)
@given(first=targets, ops=operations)
def test_any_interleaving_converges_without_overlap_or_false_reports(
    first: frozenset[int], ops: list[tuple[str, Any]]
) -> None:
    h = Member(max_poll_interval_ms=10**9)
    h.stable_with(sorted(first))
    epoch = 1
    last = first
    for op, arg in ops:
        if op == "target":
            epoch += 1
            last = arg
            answer_next(h, epoch, arg)
        elif op == "finish":
            if h.target.running is not None:
                h.target.finish()
        else:
            answer_next(h, epoch, None)
        assert h.m.state not in (MemberState.FENCED, MemberState.FATAL, MemberState.UNJOINED)

    for _ in range(50):  # drain: the coordinator keeps its last target
        if h.target.running is not None:
            h.target.finish()
        elif h.m.state is MemberState.STABLE and h.target.owned == tp("A", *last):
            break
        else:
            answer_next(h, epoch, None)
    assert h.m.state is MemberState.STABLE
    assert h.target.owned == tp("A", *last)
    assert h.m.owned == frozenset(TopicIdPartition(ID_A, p) for p in last)  # what it reports, by topic id

    # each reconciliation's revoke and the assign after it never share a partition
    steps = h.target.steps
    for i, step in enumerate(steps):
        if step.kind == "revoke":
            nxt = steps[i + 1] if i + 1 < len(steps) else None
            if nxt is not None and nxt.kind == "assign":
                assert not (step.partitions & nxt.partitions), (step, nxt)
