"""Time to compute an assignment, for every assignor, on groups of 10/100/1000 members x 1000/10000 partitions.

Two scenarios per size, both with 10 topics of equal size:
- ``fresh``: nobody owns anything (a group forming, or any eager rebalance for range/roundrobin);
- ``join``: the group is settled and one member joins, so the sticky assignors start from everyone's
  previous assignment (sticky: decoded from user data; cooperative-sticky: owned partitions; uniform and
  server range: the current target assignment).
Subscriptions are identical unless ``--heterogeneous``, where every other member takes only half the topics.

Usage: ``.venv/bin/python bench/assignors.py [--repeat N] [--heterogeneous] [--markdown]``.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Mapping, Sequence

from groupstream.assignment import (
    ClusterView,
    CooperativeStickyAssignor,
    GroupSpec,
    MemberSpec,
    RangeAssignor,
    RoundRobinAssignor,
    ServerRangeAssignor,
    StickyAssignor,
    Subscription,
    TopicPartition,
    UniformAssignor,
)
from groupstream.assignment.user_data import encode_sticky_user_data

MEMBERS = (10, 100, 1000)
PARTITIONS = (1000, 10000)
TOPICS = 10
GENERATION = 5


def group(
    members: int, partitions: int, heterogeneous: bool
) -> tuple[ClusterView, list[str], dict[str, tuple[str, ...]]]:
    topics = [f"topic-{i:02}" for i in range(TOPICS)]
    cluster = ClusterView({t: partitions // TOPICS for t in topics})
    ids = [f"consumer-{i:04}-{i * 7919 % 10007:05}" for i in range(members + 1)]  # the last one joins
    subscribed = {
        m: tuple(topics if not heterogeneous or i % 2 == 0 else topics[: TOPICS // 2])
        for i, m in enumerate(ids)
    }
    return cluster, ids, subscribed


def client_subs(
    ids: Sequence[str],
    subscribed: Mapping[str, tuple[str, ...]],
    previous: Mapping[str, Sequence[TopicPartition]] | None,
    style: str,
) -> list[Subscription]:
    out = []
    for m in ids:
        owned = tuple(previous.get(m, ())) if previous is not None else ()
        if style == "sticky":
            data = encode_sticky_user_data(owned, GENERATION) if previous is not None else None
            out.append(Subscription(m, subscribed[m], user_data=data))
        else:
            out.append(Subscription(m, subscribed[m], owned_partitions=owned, generation_id=GENERATION))
    return out


def server_spec(
    ids: Sequence[str],
    subscribed: Mapping[str, tuple[str, ...]],
    target: Mapping[str, Sequence[TopicPartition]],
) -> GroupSpec:
    return GroupSpec(MemberSpec(m, frozenset(subscribed[m]), frozenset(target.get(m, ()))) for m in ids)


def best_of(repeat: int, run: Callable[[], object]) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)


def measure(
    members: int, partitions: int, repeat: int, heterogeneous: bool
) -> dict[str, tuple[float, float]]:
    """Assignor -> (fresh seconds, join seconds); inputs are built outside the timed region."""
    cluster, ids, subscribed = group(members, partitions, heterogeneous)
    settled, everyone = ids[:-1], ids
    results: dict[str, tuple[float, float]] = {}

    for name, client, style in (
        ("range", RangeAssignor(), "plain"),
        ("roundrobin", RoundRobinAssignor(), "plain"),
        ("sticky", StickyAssignor(), "sticky"),
        ("cooperative-sticky", CooperativeStickyAssignor(), "cooperative"),
    ):
        fresh_subs = client_subs(settled, subscribed, None, style)
        before = client.assign(cluster, fresh_subs)
        join_subs = client_subs(everyone, subscribed, before, style)
        fresh = best_of(repeat, lambda c=client, s=fresh_subs: c.assign(cluster, s))  # type: ignore[misc]
        join = best_of(repeat, lambda c=client, s=join_subs: c.assign(cluster, s))  # type: ignore[misc]
        results[f"client {name}"] = (fresh, join)

    for name, server in (("uniform", UniformAssignor()), ("range", ServerRangeAssignor())):
        fresh_spec = server_spec(settled, subscribed, {})
        before = server.assign(fresh_spec, cluster)
        join_spec = server_spec(everyone, subscribed, before)
        fresh = best_of(repeat, lambda a=server, s=fresh_spec: a.assign(s, cluster))  # type: ignore[misc]
        join = best_of(repeat, lambda a=server, s=join_spec: a.assign(s, cluster))  # type: ignore[misc]
        results[f"server {name}"] = (fresh, join)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=3, help="runs per measurement; the best is reported")
    parser.add_argument("--heterogeneous", action="store_true", help="half the members take half the topics")
    args = parser.parse_args()

    table: dict[str, dict[tuple[int, int], tuple[float, float]]] = {}
    for members in MEMBERS:
        for partitions in PARTITIONS:
            for assignor, times in measure(members, partitions, args.repeat, args.heterogeneous).items():
                table.setdefault(assignor, {})[(members, partitions)] = times

    kind = "heterogeneous" if args.heterogeneous else "identical"
    sizes = [(m, p) for m in MEMBERS for p in PARTITIONS]
    print(
        f"Assignment time in ms, fresh / one member joins ({kind} subscriptions, {TOPICS} topics, best of {args.repeat})"
    )
    print()
    print("| assignor | " + " | ".join(f"{m} x {p}" for m, p in sizes) + " |")
    print("|---|" + "---|" * len(sizes))
    for assignor, by_size in table.items():
        cells = [f"{by_size[s][0] * 1e3:.1f} / {by_size[s][1] * 1e3:.1f}" for s in sizes]
        print(f"| {assignor} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
