"""The orders assignors sort members in, written once so that every assignor breaks ties the same way.

Kafka compares strings by UTF-16 code units (``String.compareTo``); Python compares code points. The two
differ only when one string has a character above U+FFFF where the other has one in U+E000-U+FFFF, which
member ids built from an arbitrary ``client.id`` can contain. Sorting by the UTF-16 encoding gives Kafka's
order, so a Java leader and ours put members in the same order. (Topic names and group instance ids are
restricted to ``[a-zA-Z0-9._-]``, where both orders agree.)
"""

from __future__ import annotations

from collections.abc import Iterable

from groupstream.assignment.types import Subscription

__all__ = ["java_string_key", "member_order_key", "sorted_members"]


def java_string_key(value: str) -> bytes:
    """A sort key that orders strings as Java's ``String.compareTo`` does."""
    return value.encode("utf-16-be", "surrogatepass")


def member_order_key(member_id: str, group_instance_id: str | None) -> tuple[int, bytes, bytes]:
    """Kafka's member order (KIP-345): static members first by group.instance.id, then the others by member id.

    Static members keep their place across restarts (their member id changes, their instance id does not),
    so range and round-robin give them the same partitions again. Two members claiming the same instance id
    are ordered by member id, where Kafka would leave it to hash order.
    """
    if group_instance_id is not None:
        return (0, java_string_key(group_instance_id), java_string_key(member_id))
    return (1, b"", java_string_key(member_id))


def sorted_members(subscriptions: Iterable[Subscription]) -> list[Subscription]:
    """Subscriptions in Kafka's member order."""
    return sorted(subscriptions, key=lambda s: member_order_key(s.member_id, s.group_instance_id))
