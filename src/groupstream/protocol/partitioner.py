"""Java's default partitioner for keyed records, so a key lands on the partition a Java client would pick.

Java's ``BuiltInPartitioner.partitionForKey`` (and librdkafka's ``murmur2_random`` partitioner, which is
Java-compatible) compute ``toPositive(murmur2(key)) % numPartitions``, where ``murmur2`` is MurmurHash2
(32-bit, seed 0x9747b28c, little-endian 4-byte words) with the result read as a signed int32, and
``toPositive`` clears the sign bit (not ``abs``, which would differ for negative values).
Records without a key are placed by the client's sticky logic, not here.
"""

from __future__ import annotations

import struct

_SEED = 0x9747B28C
_M = 0x5BD1E995
_MASK = 0xFFFFFFFF


def murmur2(data: bytes | bytearray | memoryview) -> int:
    """Kafka's ``Utils.murmur2``: a signed 32-bit int, equal to what the Java client returns."""
    view = memoryview(data).cast("B")
    length = len(view)
    h = (_SEED ^ length) & _MASK
    n_words = length >> 2
    m = _M
    mask = _MASK
    for k in struct.unpack_from(f"<{n_words}I", view):
        k = (k * m) & mask
        k ^= k >> 24
        k = (k * m) & mask
        h = ((h * m) & mask) ^ k
    tail = length & 3
    base = length & ~3
    if tail:
        if tail == 3:
            h ^= view[base + 2] << 16
        if tail >= 2:
            h ^= view[base + 1] << 8
        h ^= view[base]
        h = (h * m) & mask
    h ^= h >> 13
    h = (h * m) & mask
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def to_positive(n: int) -> int:
    """Kafka's ``Utils.toPositive``: drop the sign bit of an int32."""
    return n & 0x7FFFFFFF


def default_partition(key: bytes | bytearray | memoryview, num_partitions: int) -> int:
    """The partition Java's and librdkafka's default partitioners choose for a non-null key."""
    if num_partitions <= 0:
        raise ValueError(f"num_partitions must be positive, got {num_partitions}")
    return to_positive(murmur2(key)) % num_partitions
