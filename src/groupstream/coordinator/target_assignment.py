"""What a ``consumer`` group subscribes to, and the target assignment the server-side assignor makes of it.

Both are pure: the heartbeat handler passes the group's members as they will be once its records are
replayed, and writes records for whatever differs from what the group holds.
"""

from __future__ import annotations

import re
import uuid
from bisect import bisect_right
from collections import deque
from collections.abc import Iterable, Mapping
from itertools import compress, repeat
from operator import not_

from groupstream.assignment.ordering import java_string_key
from groupstream.assignment.server import GroupSpec, MemberSpec, ServerPartitionAssignor
from groupstream.assignment.types import ClusterView, TopicPartition
from groupstream.assignment.uniform import UniformAssignor
from groupstream.coordinator.consumer_group import PartitionSet
from groupstream.coordinator.request import TopicCatalogView
from groupstream.protocol.consumer_group_records import MemberMetadataValue, TopicMetadata

__all__ = ["compute_target", "resolve_regex", "subscribed_topics", "subscription_metadata"]


def resolve_regex(regex: str, topics: TopicCatalogView) -> tuple[str, ...]:
    """Topics whose whole name matches ``regex`` (internal topics never do, as in Kafka)."""
    pattern = re.compile(regex)
    return tuple(sorted(t for t in topics.topic_names() if not t.startswith("__") and pattern.fullmatch(t)))


def subscribed_topics(md: MemberMetadataValue, resolved: Mapping[str, Iterable[str]]) -> frozenset[str]:
    """A member's topics: those it names and those its regular expression resolved to."""
    names = set(md.subscribed_topics)
    if md.subscribed_regex:
        names.update(resolved.get(md.subscribed_regex, ()))
    return frozenset(names)


def subscription_metadata(names: Iterable[str], topics: TopicCatalogView) -> tuple[TopicMetadata, ...]:
    """The subscribed topics that exist, with their ids and partition counts, sorted by name: what the
    ConsumerGroupPartitionMetadata record holds; a change of it (a topic created or grown) bumps the epoch."""
    out = []
    for name in sorted(set(names)):
        count = topics.partition_count(name)
        topic_id = topics.topic_id(name)
        if count is not None and topic_id is not None:
            out.append(TopicMetadata(topic_id, name, count))
    return tuple(out)


def compute_target(
    assignor: ServerPartitionAssignor,
    members: Mapping[str, MemberMetadataValue],
    current: Mapping[str, PartitionSet],
    resolved: Mapping[str, Iterable[str]],
    metadata: Iterable[TopicMetadata],
) -> dict[str, PartitionSet]:
    """The new target of every member. ``current`` (the targets so far) lets sticky assignors keep
    partitions where they are; partitions of topics that no longer exist are dropped from it."""
    by_name = {t.name: t for t in metadata}
    if isinstance(assignor, UniformAssignor):
        fast = _uniform_same_subscriptions(members, current, resolved, by_name)
        if fast is not None:
            return fast
    # One lookup per partition each way: (name, partition count) by topic id, and topic id by name.
    topic_of = {t.topic_id: (t.name, t.partitions) for t in by_name.values()}
    id_of = {name: t.topic_id for name, t in by_name.items()}
    specs = []
    for member_id, md in members.items():
        assigned = []
        last: uuid.UUID | None = None
        topic: tuple[str, int] | None = None
        for t, p in current.get(member_id, ()):
            # One topic's partitions share its id object: hash it (uuid's hash is Python code) once per topic.
            if t is not last:
                last, topic = t, topic_of.get(t)
            if topic is not None and p < topic[1]:
                assigned.append(TopicPartition(topic[0], p))
        topics = subscribed_topics(md, resolved)
        specs.append(MemberSpec(member_id, topics, frozenset(assigned), md.instance_id, md.rack_id))
    view = ClusterView({name: t.partitions for name, t in by_name.items()})
    result = assignor.assign(GroupSpec(specs), view)
    out: dict[str, PartitionSet] = {}
    for member_id in members:
        by_topic: dict[uuid.UUID, list[int]] = {}
        for tp in result.get(member_id, ()):
            by_topic.setdefault(id_of[tp.topic], []).append(tp.partition)
        out[member_id] = PartitionSet.from_numbers(by_topic)
    return out


def _uniform_same_subscriptions(
    members: Mapping[str, MemberMetadataValue],
    current: Mapping[str, PartitionSet],
    resolved: Mapping[str, Iterable[str]],
    by_name: Mapping[str, TopicMetadata],
) -> dict[str, PartitionSet] | None:
    """``uniform`` when every member subscribes alike (the usual group), computed on the partitions as the
    group holds them: the same result as the assignor's balanced sticky assignment (quotas by what each
    member holds, each keeping its lowest partition numbers up to its quota, the rest dealt round-robin in
    topic and partition order), without converting every partition to a named one and back. A member whose
    target does not change keeps the very same set. None: subscriptions differ (or name nothing that
    exists), and the assignor runs.

    Partitions are numbered across the subscribed topics in the assignor's order (topics by name, then
    partition number): one int each, so that claims, quotas and the deal work on ints, not (UUID, int) pairs."""
    first: tuple[tuple[str, ...], str | None] | None = None
    md0: MemberMetadataValue | None = None
    for md in members.values():
        key = (md.subscribed_topics, md.subscribed_regex)
        if first is None:
            first, md0 = key, md
        elif key != first:
            return None
    if md0 is None:
        return {}
    topics = sorted(t for t in subscribed_topics(md0, resolved) if t in by_name and by_name[t].partitions > 0)
    if not topics:
        return None
    order = sorted(members, key=java_string_key)
    n = len(order)
    # topic id -> (index of its first partition in the global numbering, partition count)
    starts: list[int] = []
    ids: list[uuid.UUID] = []
    base_of: dict[uuid.UUID, tuple[int, int]] = {}
    total = 0
    for name in topics:
        t = by_name[name]
        starts.append(total)
        ids.append(t.topic_id)
        base_of[t.topic_id] = (total, t.partitions)
        total += t.partitions
    # Who claims each partition; a partition two members claim is nobody's (_CONFLICT), as resolve_claims
    # decides for claims of the same generation.
    held: dict[str, list[int]] = {}
    claimed = 0
    for member_id in order:
        mine: list[int] = []
        ps = current.get(member_id)
        if ps is not None:
            for tid, ns in PartitionSet.of(ps).by_topic():
                found = base_of.get(tid)
                if found is None:
                    continue
                base, count = found
                if ns[0] >= 0 and ns[-1] < count:  # sorted and non-empty: all in range, renumbered in C
                    mine.extend(ns if base == 0 else map(base.__add__, ns))
                else:
                    mine.extend([base + p for p in ns if 0 <= p < count])
        held[member_id] = mine
        claimed += len(mine)
    # Claims overlap only when some partition is claimed twice: counted in C (a set of every claim), the
    # per-partition pass that finds and drops them runs only then (a member's first target hands it
    # every partition: thousands of claims to walk in Python otherwise).
    if claimed and len(set().union(*held.values())) != claimed:
        claim: list[str | None] = [None] * total
        for member_id in order:
            for g in held[member_id]:
                c = claim[g]
                claim[g] = member_id if c is None else _CONFLICT
        for member_id, mine in held.items():
            if any(claim[g] is _CONFLICT for g in mine):
                held[member_id] = [g for g in mine if claim[g] is not _CONFLICT]
    base, extra = divmod(total, n)
    rank = {m: i for i, m in enumerate(order)}
    by_claims = sorted(order, key=lambda m: (-len(held[m]), rank[m]))
    quota = {m: base + (1 if i < extra else 0) for i, m in enumerate(by_claims)}
    result: dict[str, list[int]] = {}
    taken = bytearray(total)
    for m in order:
        mine = held[m]
        if len(mine) > quota[m]:
            mine = _lowest_numbers(mine, starts, quota[m])
        result[m] = mine
        deque(map(taken.__setitem__, mine, repeat(1)), maxlen=0)
    unchanged = {m for m in order if m in current and len(result[m]) == len(current[m]) == quota[m]}
    free = list(compress(range(total), map(not_, taken)))
    _deal_round_robin(free, [m for m in order if len(result[m]) < quota[m]], quota, result)
    return {
        member_id: current[member_id] if member_id in unchanged else _to_set(result[member_id], starts, ids)
        for member_id in members
    }


_CONFLICT = "\0conflict"  # not a member id that a claim can carry (a sentinel compared by identity)


def _to_set(numbers: list[int], starts: list[int], ids: list[uuid.UUID]) -> PartitionSet:
    """Globally numbered partitions (``_uniform_same_subscriptions``) back as a set."""
    if len(ids) == 1:
        return PartitionSet.from_numbers({ids[0]: numbers})
    by_topic: dict[uuid.UUID, list[int]] = {}
    for g in numbers:
        i = bisect_right(starts, g) - 1
        by_topic.setdefault(ids[i], []).append(g - starts[i])
    return PartitionSet.from_numbers(by_topic)


def _lowest_numbers(partitions: list[int], starts: list[int], n: int) -> list[int]:
    """The ``n`` partitions with the lowest numbers, ties by topic name (the assignor's order for what a
    member keeps); ``partitions`` numbered globally, topics in name order starting at ``starts``."""
    if len(starts) == 1:
        return sorted(partitions)[:n]
    keyed = []
    for g in partitions:
        i = bisect_right(starts, g) - 1
        keyed.append((g - starts[i], i, g))
    keyed.sort()
    return [k[2] for k in keyed[:n]]


def _deal_round_robin(
    free: list[int],
    waiting: list[str],
    quota: Mapping[str, int],
    result: dict[str, list[int]],
) -> None:
    """Deal ``free`` one at a time to ``waiting`` in turn, a member leaving the turn once at its quota (the
    assignor's round-robin), by slices: while ``k`` members all still need at least ``m``, the next ``m * k``
    partitions go ``i, i + k, i + 2k, ...`` to the ``i``-th of them, exactly as ``m`` whole turns would."""
    need = {m: quota[m] - len(result[m]) for m in waiting}
    start = 0
    while waiting and start < len(free):
        k = len(waiting)
        rounds = min(need[m] for m in waiting)
        chunk = free[start : start + rounds * k]
        for i, m in enumerate(waiting):
            result[m].extend(chunk[i::k])
            need[m] -= rounds
        start += rounds * k
        waiting = [m for m in waiting if need[m] > 0]
