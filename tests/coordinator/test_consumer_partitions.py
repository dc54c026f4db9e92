"""PartitionSet (issue 18's compact member partition sets) answers every set question exactly as a frozenset
of the same (topic id, partition) pairs does: random sets over a few topics, each operation both ways."""

from __future__ import annotations

import pickle
import random
import uuid

import pytest

from groupstream.coordinator.consumer_group import (
    from_topic_partitions,
    numbers_by_topic,
    to_topic_partitions,
)
from groupstream.coordinator.consumer_partitions import EMPTY, PartitionSet

TOPICS = [uuid.UUID(int=random.Random(i).getrandbits(128)) for i in range(3)]


def _random_pairs(rng: random.Random) -> frozenset[tuple[uuid.UUID, int]]:
    topics = rng.sample(TOPICS, rng.randint(0, len(TOPICS)))
    return frozenset((t, rng.randrange(40)) for t in topics for _ in range(rng.randint(0, 12)))


def _shaped_pairs(rng: random.Random) -> frozenset[tuple[uuid.UUID, int]]:
    """Per topic, one of the shapes the per-topic fast paths take: a run of consecutive numbers (ranges that
    do not overlap), a few numbers against many (bisection), or a dense random half (sets of ints)."""
    out: set[tuple[uuid.UUID, int]] = set()
    for t in rng.sample(TOPICS, rng.randint(0, len(TOPICS))):
        shape = rng.choice(("run", "few", "dense"))
        if shape == "run":
            lo = rng.randrange(1_000)
            out.update((t, p) for p in range(lo, rng.randint(lo, 1_000)))
        elif shape == "few":
            out.update((t, rng.randrange(1_000)) for _ in range(rng.randint(1, 6)))
        else:
            out.update((t, p) for p in range(1_000) if rng.random() < 0.5)
    return frozenset(out)


@pytest.mark.parametrize("seed", range(40))
def test_partition_set_agrees_with_frozenset(seed: int) -> None:
    rng = random.Random(seed)
    _agrees(f"seed {seed}", _random_pairs(rng), _random_pairs(rng))


@pytest.mark.parametrize("seed", range(60))
def test_partition_set_agrees_with_frozenset_on_large_shaped_sets(seed: int) -> None:
    rng = random.Random(seed)
    a = _shaped_pairs(rng)
    b = _shaped_pairs(rng) if seed % 3 else frozenset(p for p in a if rng.random() < 0.02)  # b a few of a's
    _agrees(f"shaped seed {seed}", a, b)


def _agrees(msg: str, a: frozenset[tuple[uuid.UUID, int]], b: frozenset[tuple[uuid.UUID, int]]) -> None:
    # ids equal but not the same objects: the topic comparison must not rely on identity alone
    b = frozenset((uuid.UUID(bytes=t.bytes), p) for t, p in b)
    pa, pb = PartitionSet.of(a), PartitionSet.of(b)
    assert set(pa) == a and len(pa) == len(a) and bool(pa) == bool(a), msg
    assert pa == a and a == pa and (pa == pb) == (a == b), msg
    for got, want in [(pa & pb, a & b), (pa | pb, a | b), (pa - pb, a - b), (pb - pa, b - a), (pa ^ pb, a ^ b),
                      (pa & b, a & b), (a - pb, a - b), (pa.difference(list(b)), a - b)]:  # fmt: skip
        assert type(got) is PartitionSet and set(got) == want and len(got) == len(want), msg
        assert all(len(ns) and list(ns) == sorted(set(ns)) for _, ns in got.by_topic()), msg  # the invariant
        assert [t for t, _ in got.by_topic()] == sorted({t for t, _ in want}, key=lambda t: t.bytes), msg
    assert pa.isdisjoint(pb) == a.isdisjoint(b) and (pa <= pb) == (a <= b) and (pa >= pb) == (a >= b), msg
    assert (pa < pb) == (a < b) and (pa <= b) == (a <= b), msg
    for probe in [*list(b)[:5], (TOPICS[0], -1), (TOPICS[1], 99), ("x", 1)]:
        assert (probe in pa) == (probe in a), msg
    assert hash(pa) == hash(a), msg
    assert from_topic_partitions(to_topic_partitions(pa)) == pa, msg
    assert {t: sorted(ns) for t, ns in numbers_by_topic(pa).items()} == {
        t: sorted(ns) for t, ns in numbers_by_topic(a).items()}, msg  # fmt: skip
    assert pickle.loads(pickle.dumps(pa)) == pa, msg


def test_empty_and_identity() -> None:
    s = PartitionSet.of([(TOPICS[0], 3), (TOPICS[0], 1), (TOPICS[0], 3)])
    assert list(s) == [(TOPICS[0], 1), (TOPICS[0], 3)]
    assert PartitionSet.of([]) is EMPTY and not EMPTY and len(EMPTY) == 0
    assert s & s is s and s | EMPTY is s and s - EMPTY is s  # no copy when the answer is an operand
    assert PartitionSet.of(s) is s
