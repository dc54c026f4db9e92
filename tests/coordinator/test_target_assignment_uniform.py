"""``compute_target`` with ``uniform`` and members subscribing alike takes a path of its own (no conversion
to named partitions); it must give exactly what the assignor gives on the same input. Random groups: current
targets of any shape (balanced, skewed, overlapping claims, partitions of shrunk or unknown topics), the
seed printed on failure."""

from __future__ import annotations

import random
import uuid

import pytest

from groupstream.assignment.uniform import UniformAssignor
from groupstream.coordinator import target_assignment
from groupstream.coordinator.target_assignment import compute_target
from groupstream.protocol.consumer_group_records import MemberMetadataValue, TopicMetadata

TOPICS = {name: uuid.uuid5(uuid.NAMESPACE_URL, f"topic:{name}") for name in ("a", "b", "c")}


def metadata(rng: random.Random) -> tuple[TopicMetadata, ...]:
    names = rng.sample(sorted(TOPICS), rng.randint(1, 3))
    return tuple(TopicMetadata(TOPICS[n], n, rng.choice([0, 1, 3, 8, 20])) for n in sorted(names))


def generic(members, current, resolved, meta):  # type: ignore[no-untyped-def]
    """compute_target with the fast path switched off: the assignor itself."""
    saved = target_assignment._uniform_same_subscriptions
    target_assignment._uniform_same_subscriptions = lambda *args: None  # type: ignore[assignment]
    try:
        return compute_target(UniformAssignor(), members, current, resolved, meta)
    finally:
        target_assignment._uniform_same_subscriptions = saved


@pytest.mark.parametrize("seed", range(300))
def test_same_subscriptions_give_what_the_assignor_gives(seed: int) -> None:
    rng = random.Random(seed)
    meta = metadata(rng)
    subscribed = tuple(sorted(rng.sample(sorted(TOPICS), rng.randint(1, 3))))
    regex = rng.choice([None, "c|b"])
    resolved = {"c|b": ("b", "c")}
    n = rng.randint(1, 9)
    members = {f"m{rng.randint(0, 99):02}-{i}": MemberMetadataValue(None, None, "c", "/h", subscribed, regex, 1000, None)
               for i in range(n)}  # fmt: skip
    everything = [(TOPICS[n_], p) for n_ in TOPICS for p in range(25)]
    current = {m: frozenset(rng.sample(everything, rng.randint(0, 12))) for m in members if rng.random() < 0.8}
    fast = compute_target(UniformAssignor(), members, current, resolved, meta)
    assert fast == generic(members, current, resolved, meta), f"seed {seed}"
    # Once computed, computing again changes nothing, and every target is the very same set (no copy, and
    # the heartbeat compares nothing element by element).
    again = compute_target(UniformAssignor(), members, fast, resolved, meta)
    assert all(again[m] is fast[m] for m in members if fast[m]), f"seed {seed}"
