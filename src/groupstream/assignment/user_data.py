"""The user-data bytes the sticky assignors put in a member's subscription.

``sticky`` (eager) members revoke everything before joining, so the only record of what they owned is the
user data Java's StickyAssignor defines (``StickyAssignorUserData``), in the old non-flexible encoding
with no version prefix:

- v0: ``previous_assignment: [topic: string, partitions: [int32]]``
- v1: v0 followed by ``generation: int32`` (KIP-341), which lets the leader prefer the newest claim.

Java writes v1 and reads v1, then v0, and ignores the data when neither parses. kafka-python 3.0 writes
the same struct behind an int16 version prefix (its generic ApiData framing), which Java cannot read and
which cannot read Java's bytes. We write Java's encoding by default (``with_version_prefix=True`` produces
kafka-python 3.0's) and read all of them, so in a mixed group we keep every member's previous assignment.

``cooperative-sticky`` members report owned partitions in the subscription itself; its user data only
carries the generation (an int32), for subscriptions older than v2 that have no generation field.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass

from groupstream.assignment.types import TopicPartition

__all__ = [
    "DEFAULT_GENERATION",
    "StickyUserData",
    "decode_cooperative_user_data",
    "decode_sticky_user_data",
    "encode_cooperative_user_data",
    "encode_sticky_user_data",
]

DEFAULT_GENERATION = -1

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")


@dataclass(frozen=True, slots=True)
class StickyUserData:
    """A decoded StickyAssignorUserData: the member's previous partitions and, from v1, their generation."""

    partitions: tuple[TopicPartition, ...]
    generation: int | None


class _Truncated(Exception):
    """The bytes ended inside a field, or a length was negative."""


class _Reader:
    __slots__ = ("data", "pos")

    def __init__(self, data: bytes, pos: int = 0) -> None:
        self.data = data
        self.pos = pos

    def int16(self) -> int:
        if self.pos + 2 > len(self.data):
            raise _Truncated
        (value,) = _INT16.unpack_from(self.data, self.pos)
        self.pos += 2
        return int(value)

    def int32(self) -> int:
        if self.pos + 4 > len(self.data):
            raise _Truncated
        (value,) = _INT32.unpack_from(self.data, self.pos)
        self.pos += 4
        return int(value)

    def length(self, element_size: int) -> int:
        count = self.int32()
        # A negative (null) array is invalid here; a count the remaining bytes cannot hold is truncation,
        # caught before allocating anything for it.
        if count < 0 or count * element_size > len(self.data) - self.pos:
            raise _Truncated
        return count

    def string(self) -> str:
        size = self.int16()
        if size < 0 or self.pos + size > len(self.data):
            raise _Truncated
        value = self.data[self.pos : self.pos + size].decode("utf-8")
        self.pos += size
        return value

    @property
    def at_end(self) -> bool:
        return self.pos == len(self.data)


def _read_assignment(reader: _Reader) -> tuple[TopicPartition, ...]:
    partitions: list[TopicPartition] = []
    for _ in range(reader.length(6)):
        topic = reader.string()
        for _ in range(reader.length(4)):
            partitions.append(TopicPartition(topic, reader.int32()))
    return tuple(partitions)


def _parse(data: bytes, start: int, version: int, exact: bool) -> StickyUserData | None:
    reader = _Reader(data, start)
    try:
        partitions = _read_assignment(reader)
        generation = reader.int32() if version >= 1 else None
    except (_Truncated, UnicodeDecodeError):
        return None
    if exact and not reader.at_end:
        return None
    return StickyUserData(tuple(sorted(set(partitions))), generation)


def decode_sticky_user_data(data: bytes | None) -> StickyUserData | None:
    """Decode Java's or kafka-python's StickyAssignorUserData; None when absent or unreadable.

    Each encoding is tried in full (every byte consumed) before any lenient reading, so the two framings
    cannot be confused: read as Java's, kafka-python's prefix makes the topic count at least 65536.
    """
    if not data:
        return None
    for start, version in ((0, 1), (0, 0)):
        parsed = _parse(data, start, version, exact=True)
        if parsed is not None:
            return parsed
    if len(data) >= 2:
        (prefix,) = _INT16.unpack_from(data, 0)
        if prefix in (0, 1):
            parsed = _parse(data, 2, prefix, exact=True)
            if parsed is not None:
                return parsed
    # Java's reader ignores trailing bytes; so do we, last.
    return _parse(data, 0, 1, exact=False)


def encode_sticky_user_data(
    partitions: Iterable[TopicPartition],
    generation: int,
    *,
    with_version_prefix: bool = False,
) -> bytes:
    """StickyAssignorUserData v1, topics and partitions sorted; kafka-python 3.0's framing on request."""
    by_topic: dict[str, list[int]] = {}
    for tp in sorted(set(partitions)):
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    out = bytearray(_INT16.pack(1)) if with_version_prefix else bytearray()
    out += _INT32.pack(len(by_topic))
    for topic, numbers in by_topic.items():
        name = topic.encode("utf-8")
        out += _INT16.pack(len(name))
        out += name
        out += _INT32.pack(len(numbers))
        out += b"".join(_INT32.pack(n) for n in numbers)
    out += _INT32.pack(generation)
    return bytes(out)


def encode_cooperative_user_data(generation: int) -> bytes:
    """CooperativeStickyAssignor's user data: the generation of the member's owned partitions."""
    return _INT32.pack(generation)


def decode_cooperative_user_data(data: bytes | None) -> int:
    """The generation in cooperative-sticky user data; the default generation when absent or unreadable."""
    if data is None or len(data) < 4:
        return DEFAULT_GENERATION
    (generation,) = _INT32.unpack_from(data, 0)
    return int(generation)
