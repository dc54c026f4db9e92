"""The consumer protocol's Subscription and Assignment bytes: golden bytes real clients sent (captured from
DescribeGroups of their groups on our broker), round trips at every version, and the forward-compatibility
rule (a newer version decodes with the newest layout we know)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from groupstream.protocol.consumer_protocol import (
    ASSIGNMENT_MAX_VERSION,
    SUBSCRIPTION_MAX_VERSION,
    ConsumerAssignment,
    ConsumerSubscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from groupstream.protocol.errors import PeerProtocolError

# one member subscribed to topic "cap" (3 partitions), owning all three, as each client encoded it
LIBRDKAFKA_2_16_SUBSCRIPTION = "00030000000100036361700000000000000000ffffffff0000"  # v3
KAFKA_PYTHON_STICKY_SUBSCRIPTION = "00000000000100036361700000000a00010000000000000001"  # v0 + sticky user data
KAFKA_PYTHON_RANGE_SUBSCRIPTION = "000000000001000363617000000000"  # v0, empty user data (aiokafka alike)
ASSIGNMENT_ALL_THREE = "00000000000100036361700000000300000000000000010000000200000000"  # v0, every client


def test_golden_subscriptions() -> None:
    s = decode_subscription(bytes.fromhex(LIBRDKAFKA_2_16_SUBSCRIPTION))
    assert s == ConsumerSubscription(("cap",), b"", (), -1, "", version=3)
    s = decode_subscription(bytes.fromhex(KAFKA_PYTHON_STICKY_SUBSCRIPTION))
    assert s.version == 0 and s.topics == ("cap",) and s.user_data == bytes.fromhex("00010000000000000001")
    assert s.owned_partitions == () and s.generation_id == -1 and s.rack_id is None
    s = decode_subscription(bytes.fromhex(KAFKA_PYTHON_RANGE_SUBSCRIPTION))
    assert s == ConsumerSubscription(("cap",), b"", version=0, rack_id=None)
    # and we encode them back to the same bytes
    for golden in (LIBRDKAFKA_2_16_SUBSCRIPTION, KAFKA_PYTHON_STICKY_SUBSCRIPTION, KAFKA_PYTHON_RANGE_SUBSCRIPTION):
        assert encode_subscription(decode_subscription(bytes.fromhex(golden))).hex() == golden


def test_golden_assignment() -> None:
    a = decode_assignment(bytes.fromhex(ASSIGNMENT_ALL_THREE))
    assert a == ConsumerAssignment((("cap", 0), ("cap", 1), ("cap", 2)), b"", 0)
    assert a.by_topic() == {"cap": (0, 1, 2)}
    assert encode_assignment(a).hex() == ASSIGNMENT_ALL_THREE


def test_newer_versions_decode_with_the_newest_known_layout() -> None:
    sub = ConsumerSubscription(("a", "b"), b"u", (("a", 1),), 7, "rack-1", version=SUBSCRIPTION_MAX_VERSION)
    raw = encode_subscription(sub)
    future = (SUBSCRIPTION_MAX_VERSION + 2).to_bytes(2, "big") + raw[2:] + b"\x00\x00\x00\x05appended"
    got = decode_subscription(future)
    assert got.version == SUBSCRIPTION_MAX_VERSION + 2
    assert (got.topics, got.user_data, got.owned_partitions, got.generation_id, got.rack_id) == (
        ("a", "b"), b"u", (("a", 1),), 7, "rack-1")  # fmt: skip
    a = encode_assignment(ConsumerAssignment((("t", 0),), None, ASSIGNMENT_MAX_VERSION))
    assert decode_assignment(b"\x00\x09" + a[2:] + b"more").partitions == (("t", 0),)


def test_empty_assignment_and_bad_bytes() -> None:
    assert decode_assignment(b"") == ConsumerAssignment(())
    with pytest.raises(PeerProtocolError):
        decode_subscription(b"")
    with pytest.raises(PeerProtocolError):
        decode_subscription(b"\x00\x01\x00\x00\x00\x05ab")  # an array of five topics that is not there
    with pytest.raises(PeerProtocolError):
        decode_assignment(b"\xff\xff\x00\x00\x00\x00")  # negative version


names = st.text(st.characters(min_codepoint=33, max_codepoint=0x2FF), min_size=1, max_size=12)
pairs = st.lists(st.tuples(names, st.integers(0, 2**31 - 1)), max_size=8).map(lambda ps: tuple(sorted(set(ps))))


@given(
    version=st.integers(0, SUBSCRIPTION_MAX_VERSION),
    topics=st.lists(names, max_size=5).map(tuple),
    user_data=st.none() | st.binary(max_size=20),
    owned=pairs,
    generation=st.integers(-1, 2**31 - 1),
    rack=st.none() | names,
)
def test_subscription_round_trip(
    version: int, topics: tuple[str, ...], user_data: bytes | None, owned: tuple[tuple[str, int], ...],
    generation: int, rack: str | None,
) -> None:  # fmt: skip
    sub = ConsumerSubscription(topics, user_data, owned, generation, rack, version)
    got = decode_subscription(encode_subscription(sub))
    assert got.version == version and got.topics == topics and got.user_data == user_data
    # fields a version lacks decode to their defaults
    assert got.owned_partitions == (owned if version >= 1 else ())
    assert got.generation_id == (generation if version >= 2 else -1)
    assert got.rack_id == (rack if version >= 3 else None)


@given(version=st.integers(0, ASSIGNMENT_MAX_VERSION), parts=pairs, user_data=st.none() | st.binary(max_size=20))
def test_assignment_round_trip(version: int, parts: tuple[tuple[str, int], ...], user_data: bytes | None) -> None:
    a = ConsumerAssignment(parts, user_data, version)
    assert decode_assignment(encode_assignment(a)) == a
