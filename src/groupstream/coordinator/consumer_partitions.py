"""A compact immutable set of ``(topic id, partition)``: what a ``consumer`` group member is assigned, is
targeted, still has to revoke, and what the owners index is fed.

Why not a frozenset of pairs: for a member holding 10 partitions the set alone is about 730 bytes and its pairs
and ints another 840, and every set operation hashes each pair, whose topic UUID hashes in Python code (most of
a join storm's time). Here a set is, per topic (sorted by the id's bytes, the records' order), its partition
numbers as a sorted ``array('i')``: about 250 bytes for 10 partitions, and set operations work on ints (hashed
in C) with the topic ids compared by identity first (one topic's id is one object in a group).

It reads as a ``Set`` of pairs, so that code asking ``p in s`` or iterating pairs keeps working; operations
with another ``PartitionSet`` take the fast path, with any other set of pairs they convert it first.
"""

from __future__ import annotations

import uuid
from array import array
from bisect import bisect_left
from collections.abc import Iterable, Iterator, Mapping
from collections.abc import Set as AbstractSet
from itertools import islice, repeat
from operator import lt
from typing import Any

__all__ = ["EMPTY", "PartitionSet"]

TopicIdPartition = tuple[uuid.UUID, int]

_NO_NUMBERS = array("i")


def _numbers(values: Iterable[int]) -> array[int]:
    """Sorted, without duplicates, negative numbers kept (the set does not judge validity). Numbers that
    already are (a record's or a heartbeat's layout, another set's array) are checked in C, not re-sorted."""
    a = values if type(values) is array else array("i", values)
    if len(a) < 2 or all(map(lt, a, islice(a, 1, None))):
        return a  # arrays are never mutated here: sharing one is safe
    return array("i", sorted(set(a)))


def group_numbers(partitions: Iterable[TopicIdPartition]) -> dict[uuid.UUID, list[int]]:
    """Partition numbers by topic id, in the order met. One topic's pairs usually share its id object, which
    is hashed (uuid's hash is Python code) once per run of them, not once per pair."""
    by_topic: dict[uuid.UUID, list[int]] = {}
    last: uuid.UUID | None = None
    numbers: list[int] = []
    for topic_id, partition in partitions:
        if topic_id is not last:
            last = topic_id
            found = by_topic.get(topic_id)
            if found is None:
                found = by_topic[topic_id] = []
            numbers = found
        numbers.append(partition)
    return by_topic


class PartitionSet(AbstractSet[TopicIdPartition]):
    """Immutable; build with ``of`` (pairs), ``from_numbers`` (topic id -> numbers) or the set operations."""

    __slots__ = ("_n", "_t")

    _t: tuple[uuid.UUID, ...]
    _n: tuple[array[int], ...]

    def __init__(self, topics: tuple[uuid.UUID, ...] = (), numbers: tuple[array[int], ...] = ()) -> None:
        """Internal: ``topics`` sorted by bytes and distinct, each ``numbers`` sorted, distinct, non-empty."""
        self._t = topics
        self._n = numbers

    # --- building ------------------------------------------------------------------------------------------

    @staticmethod
    def of(partitions: Iterable[TopicIdPartition]) -> PartitionSet:
        """The set of these pairs (a ``PartitionSet`` is returned as it is). One topic's pairs usually share
        its id object: the id is hashed once per run of them, not once per pair."""
        if type(partitions) is PartitionSet:
            return partitions
        return PartitionSet.from_numbers(group_numbers(partitions))

    @staticmethod
    def from_numbers(by_topic: Mapping[uuid.UUID, Iterable[int]]) -> PartitionSet:
        """Topic id -> partition numbers (in any order, duplicates allowed); topics without numbers dropped."""
        items = [(t, _numbers(ns)) for t, ns in by_topic.items()]
        items = [kv for kv in items if kv[1]]
        if not items:
            return EMPTY
        if len(items) > 1:
            items.sort(key=lambda kv: kv[0].bytes)
        return PartitionSet(tuple(t for t, _ in items), tuple(ns for _, ns in items))

    @staticmethod
    def from_sorted(topic_id: uuid.UUID, numbers: Iterable[int]) -> PartitionSet:
        """One topic's numbers, already sorted and distinct (a record's layout, a range)."""
        ns = array("i", numbers)
        return PartitionSet((topic_id,), (ns,)) if ns else EMPTY

    # --- reading -------------------------------------------------------------------------------------------

    def by_topic(self) -> Iterator[tuple[uuid.UUID, array[int]]]:
        """(topic id, sorted partition numbers), topics in the order of their ids' bytes."""
        return zip(self._t, self._n, strict=True)

    def topics(self) -> tuple[uuid.UUID, ...]:
        return self._t

    def numbers_of(self, topic_id: uuid.UUID) -> array[int]:
        """The numbers of one topic (empty: none)."""
        for t, ns in zip(self._t, self._n, strict=True):
            if t is topic_id or t == topic_id:
                return ns
        return _NO_NUMBERS

    def __len__(self) -> int:
        return sum(map(len, self._n))

    def __bool__(self) -> bool:
        return bool(self._t)

    def __iter__(self) -> Iterator[TopicIdPartition]:
        for t, ns in zip(self._t, self._n, strict=True):
            yield from zip(repeat(t), ns)

    def __contains__(self, item: object) -> bool:
        if type(item) is not tuple or len(item) != 2:
            return False
        ns = self.numbers_of(item[0])
        p = item[1]
        if not ns or type(p) is not int:
            return False
        lo, hi = 0, len(ns)
        while lo < hi:
            mid = (lo + hi) // 2
            if ns[mid] < p:
                lo = mid + 1
            else:
                hi = mid
        return lo < len(ns) and ns[lo] == p

    def __repr__(self) -> str:
        return "PartitionSet({" + ", ".join(f"{t}: {list(ns)}" for t, ns in self.by_topic()) + "})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (PartitionSet, (self._t, self._n))

    # --- comparing -----------------------------------------------------------------------------------------

    def __eq__(self, other: object) -> bool:
        if type(other) is PartitionSet:
            if other is self:
                return True
            if len(self._t) != len(other._t):
                return False
            return all(
                (a is b or a == b) and x == y
                for a, b, x, y in zip(self._t, other._t, self._n, other._n, strict=True)
            )
        if isinstance(other, AbstractSet):
            return len(self) == len(other) and all(p in self for p in other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(frozenset(self))

    def __le__(self, other: AbstractSet[Any]) -> bool:
        o = _coerce(other)
        if o is None:
            return NotImplemented
        for t, ns in self.by_topic():
            theirs = o.numbers_of(t)
            if len(theirs) < len(ns) or (theirs != ns and len(_and(ns, theirs)) != len(ns)):
                return False
        return True

    def __ge__(self, other: AbstractSet[Any]) -> bool:
        o = _coerce(other)
        return NotImplemented if o is None else o <= self

    def __lt__(self, other: AbstractSet[Any]) -> bool:
        return self <= other and len(self) < len(other)

    def __gt__(self, other: AbstractSet[Any]) -> bool:
        return self >= other and len(self) > len(other)

    def isdisjoint(self, other: Iterable[Any]) -> bool:
        o = _coerce(other)
        if o is None:
            return all(p not in self for p in other)
        for t, ns in self.by_topic():
            theirs = o.numbers_of(t)
            if theirs and not _disjoint(ns, theirs):
                return False
        return True

    # --- operations ----------------------------------------------------------------------------------------

    def _combine(self, other: PartitionSet, op: str) -> PartitionSet:
        """Topic by topic on the sorted number arrays (`_and`, `_sub`, `_or`), each result sorted and distinct."""
        out: dict[uuid.UUID, array[int]] = {}
        if op == "and":
            for t, ns in self.by_topic():
                theirs = other.numbers_of(t)
                if theirs:
                    out[t] = ns if theirs == ns else _and(ns, theirs)
            return self._result(out, other)
        if op == "sub":
            for t, ns in self.by_topic():
                theirs = other.numbers_of(t)
                if not theirs:
                    out[t] = ns
                elif theirs != ns:
                    out[t] = _sub(ns, theirs)
            return self._result(out, other)
        out = dict(self.by_topic())
        for t, ns in other.by_topic():
            mine = out.get(t)
            out[t] = ns if mine is None or mine == ns else _or(mine, ns)
        return self._result(out, other, new_topics=len(out) != len(self._t))

    def _result(self, out: dict[uuid.UUID, array[int]], other: PartitionSet, new_topics: bool = False) -> PartitionSet:
        """The set ``out`` describes (arrays sorted and distinct, in the order of ``self``'s topics then any
        ``new_topics``): ``self`` or ``other`` themselves when equal to it (no copy)."""
        for candidate in (self, other):
            if len(out) == len(candidate._t) and all(
                out.get(t) is ns for t, ns in candidate.by_topic()
            ):
                return candidate
        items = [(t, ns) for t, ns in out.items() if ns]
        if not items:
            return EMPTY
        if new_topics and len(items) > 1:
            items.sort(key=lambda kv: kv[0].bytes)
        return PartitionSet(tuple(t for t, _ in items), tuple(ns for _, ns in items))

    def __and__(self, other: AbstractSet[Any]) -> PartitionSet:
        o = _coerce(other)
        return NotImplemented if o is None else self._combine(o, "and")

    __rand__ = __and__

    def __or__(self, other: AbstractSet[Any]) -> PartitionSet:
        o = _coerce(other)
        return NotImplemented if o is None else self._combine(o, "or")

    __ror__ = __or__

    def __sub__(self, other: AbstractSet[Any]) -> PartitionSet:
        o = _coerce(other)
        return NotImplemented if o is None else self._combine(o, "sub")

    def __rsub__(self, other: AbstractSet[Any]) -> PartitionSet:
        o = _coerce(other)
        return NotImplemented if o is None else o._combine(self, "sub")

    def __xor__(self, other: AbstractSet[Any]) -> PartitionSet:
        o = _coerce(other)
        return NotImplemented if o is None else (self - o) | (o - self)

    def difference(self, *others: Iterable[TopicIdPartition]) -> PartitionSet:
        out = self
        for other in others:
            out = out - PartitionSet.of(other)
        return out

    def union(self, *others: Iterable[TopicIdPartition]) -> PartitionSet:
        out = self
        for other in others:
            out = out | PartitionSet.of(other)
        return out

    def intersection(self, *others: Iterable[TopicIdPartition]) -> PartitionSet:
        out = self
        for other in others:
            out = out & PartitionSet.of(other)
        return out

    def issubset(self, other: Iterable[TopicIdPartition]) -> bool:
        return self <= PartitionSet.of(other)

    def issuperset(self, other: Iterable[TopicIdPartition]) -> bool:
        return PartitionSet.of(other) <= self


# --- one topic's numbers: sorted, distinct, non-empty arrays -------------------------------------------------
# Where one array is much smaller than the other (a member's hundred partitions against the thousands a first
# member held), its numbers are looked up in the larger one by bisection, and a difference is cut out of the
# larger one by slices (copied in C); where their ranges do not overlap (what uniform keeps, lowest numbers
# first, against what it revokes), nothing is looked up at all. Otherwise a set of ints does it.

_FEW = 8
"""An array this many times smaller than the other is looked up in it by bisection."""


def _and(a: array[int], b: array[int]) -> array[int]:
    if a[-1] < b[0] or b[-1] < a[0]:
        return _NO_NUMBERS
    small, large = (a, b) if len(a) <= len(b) else (b, a)
    if len(small) * _FEW <= len(large):
        n = len(large)
        found = array("i", [x for x in small if (i := bisect_left(large, x)) < n and large[i] == x])
        return small if len(found) == len(small) else found
    return array("i", sorted(set(a).intersection(b)))


def _sub(a: array[int], b: array[int]) -> array[int]:
    """``a`` without ``b``'s numbers (``a`` itself when it has none of them)."""
    if a[-1] < b[0] or b[-1] < a[0]:
        return a
    if len(a) * _FEW <= len(b):
        n = len(b)
        kept = array("i", [x for x in a if (i := bisect_left(b, x)) >= n or b[i] != x])
        return a if len(kept) == len(a) else kept
    if len(b) * _FEW <= len(a):
        out = array("i")
        n, start = len(a), 0
        for x in b:
            i = bisect_left(a, x, start)
            if i < n and a[i] == x:
                out += a[start:i]
                start = i + 1
        if start == 0:
            return a
        out += a[start:]
        return out
    return array("i", sorted(set(a).difference(b)))


def _or(a: array[int], b: array[int]) -> array[int]:
    if a[-1] < b[0]:
        return a + b
    if b[-1] < a[0]:
        return b + a
    small, large = (a, b) if len(a) <= len(b) else (b, a)
    if len(small) * _FEW <= len(large) and _and(small, large) is small:
        return large  # the few are among the many already
    return array("i", sorted(set(a).union(b)))


def _disjoint(a: array[int], b: array[int]) -> bool:
    if a[-1] < b[0] or b[-1] < a[0]:
        return True
    small, large = (a, b) if len(a) <= len(b) else (b, a)
    if len(small) * _FEW <= len(large):
        return not _and(small, large)
    return set(small).isdisjoint(large)


def _coerce(other: Iterable[Any]) -> PartitionSet | None:
    if type(other) is PartitionSet:
        return other
    if isinstance(other, AbstractSet | list | tuple):
        return PartitionSet.of(other)
    return None


EMPTY = PartitionSet()
"""The one empty set."""
