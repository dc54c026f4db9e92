"""Our consumer in ``consumer`` (KIP-848) groups on our broker, and what both incremental protocols promise.

- A group of our consumers with the broker's ``uniform`` and ``range`` assignors splits the partitions,
  rebalances as members come and go, and returns every record exactly once (commits on revocation).
- KIP-822 under the ``consumer`` protocol: a paused partition that stays assigned stays paused.
- A regular-expression subscription is resolved by the broker, and a matching topic created later is assigned.
- Partitions that do not move keep being returned by ``poll`` while the group rebalances, with
  cooperative-sticky (classic protocol) and with the ``consumer`` protocol: a member owning every partition of
  a topic fed at a steady pace keeps returning records of the partitions it keeps while a second member joins
  and takes half, with no gap longer than one heartbeat interval.
"""

from __future__ import annotations

import itertools
import time
import uuid
from typing import Any

import pytest
from test_consumer_brokers import (
    Member,
    classic,
    group_splits_rebalances_and_consumes_everything_once,
    kip848,
    new_topic,
    paused_partitions_stay_paused_across_a_rebalance,
    regex_subscription_picks_up_new_topics,
)

from support.brokers import KIP848_TEST_SETTINGS, BrokerProcess
from support.feed import Feed
from support.waiting import wait_until

pytestmark = pytest.mark.broker_ours

HEARTBEAT_S = int(KIP848_TEST_SETTINGS["group.consumer.heartbeat.interval.ms"]) / 1000


@pytest.mark.parametrize("assignor", ["uniform", "range"])
def test_a_consumer_protocol_group_splits_rebalances_and_consumes_everything_once(
    kip848_broker: BrokerProcess, assignor: str
) -> None:
    group_splits_rebalances_and_consumes_everything_once(kip848_broker.bootstrap, kip848(assignor))


def test_kip822_paused_partitions_stay_paused_across_a_consumer_protocol_rebalance(
    kip848_broker: BrokerProcess,
) -> None:
    paused_partitions_stay_paused_across_a_rebalance(kip848_broker.bootstrap, kip848("uniform"))


@pytest.mark.parametrize("settings", [classic("cooperative-sticky"), kip848("uniform")],
                         ids=["cooperative-sticky", "consumer-uniform"])  # fmt: skip
def test_partitions_that_stay_keep_flowing_during_a_rebalance(
    kip848_broker: BrokerProcess, settings: dict[str, Any]
) -> None:
    bs = kip848_broker.bootstrap
    partitions = 6
    topic = new_topic(bs, partitions)
    group = f"g-{uuid.uuid4().hex[:6]}"
    feed = Feed(bs, topic, batch=60, pace_s=0.05)  # ~10 records per partition every 50 ms
    feed.start()
    first = Member(bs, group, topic, settings)
    second: Member | None = None
    try:
        wait_until(lambda: len(first.listener.owned) == partitions and len(first.times) == partitions, 60,
                   "the first member to own and read every partition")  # fmt: skip
        joined_at = time.monotonic()
        second = Member(bs, group, topic, settings)
        wait_until(lambda: second is not None and len(second.listener.owned) == partitions // 2
                   and len(first.listener.owned) == partitions // 2, 60, "the second member to take half")  # fmt: skip
        settled_at = time.monotonic()
        kept = {tp.partition for tp in first.listener.owned}
        wait_until(lambda: all(first.times[p][-1] > settled_at + 1 for p in kept), 30, "the kept partitions to go on")
        revoked = {tp.partition for kind, ps in list(first.listener.events) if kind == "revoked" for tp in ps}
    finally:
        feed.stop_event.set()
        feed.join(30)
        first.stop()
        if second is not None:
            second.stop()
    assert revoked == set(range(partitions)) - kept, f"revoked {sorted(revoked)} while keeping {sorted(kept)}"
    gaps = {}
    for p in kept:
        window = [t for t in first.times[p] if joined_at - 1 <= t <= settled_at + 1]
        gaps[p] = max(b - a for a, b in itertools.pairwise(window))
    worst = max(gaps, key=lambda p: gaps[p])
    assert gaps[worst] <= HEARTBEAT_S, (
        f"partition {worst} was not returned by poll for {gaps[worst]:.3f} s while the group rebalanced "
        f"({settled_at - joined_at:.3f} s from the join to the split); the heartbeat interval is {HEARTBEAT_S} s"
    )
    print(f"\nworst gap of a kept partition {gaps[worst] * 1000:.0f} ms; join to split {settled_at - joined_at:.3f} s")
    seen = first.records + (second.records if second is not None else [])
    assert len(seen) == len(set(seen)), f"{len(seen) - len(set(seen))} records were returned twice"


def test_a_regex_subscription_is_resolved_by_the_broker_and_picks_up_new_topics(kip848_broker: BrokerProcess) -> None:
    """The pattern goes to the broker (SubscribedTopicRegex), which matches it against the topics again every
    ``group.consumer.regex.refresh.interval.ms`` (1 s on the test broker): a topic created later joins."""
    regex_subscription_picks_up_new_topics(kip848_broker.bootstrap, kip848("uniform"))
