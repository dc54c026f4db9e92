"""Which `__consumer_offsets` partition coordinates a group: the placement every Kafka tool assumes.

Kafka computes ``Utils.abs(groupId.hashCode()) % offsets.topic.num.partitions``: Java's ``String.hashCode``
(``s[0]*31^(n-1) + ... + s[n-1]`` over UTF-16 code units, in int32 arithmetic) and Kafka's ``Utils.abs``, which
maps Integer.MIN_VALUE to 0 where ``Math.abs`` would leave it negative. Doing the same puts a group in the
partition where Kafka would, so lag tools reading `__consumer_offsets` find it where they expect.
"""

from __future__ import annotations


def java_string_hashcode(text: str) -> int:
    """Java's ``String.hashCode`` as a signed int32."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def kafka_abs(n: int) -> int:
    """Kafka's ``Utils.abs``: like ``abs`` but Integer.MIN_VALUE becomes 0."""
    return 0 if n == -(1 << 31) else abs(n)


def partition_for(group_id: str, num_partitions: int) -> int:
    return kafka_abs(java_string_hashcode(group_id)) % num_partitions
