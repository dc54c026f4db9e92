"""Partition choice: Java's murmur2 for keys, sticky (KIP-480) for records without one."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from groupstream.client.producer import encode
from groupstream.client.producer.accumulator import TopicRoute
from groupstream.client.producer.partitioner import Partitioner
from groupstream.protocol.partitioner import default_partition


def route(count: int, available: Sequence[int] = (), topic: str = "t") -> TopicRoute:
    return TopicRoute(topic, count, available)


def test_keys_go_where_java_puts_them() -> None:
    p = Partitioner("murmur2_random", lambda n: 0)
    for key in (b"", b"a", b"key-17", "ключ".encode()):
        assert p.partition(route(7), key) == default_partition(key, 7)


@pytest.mark.parametrize("key_partition", [encode.key_partition, encode.py_key_partition])
@settings(deadline=None)
@given(key=st.binary(max_size=64), n=st.integers(min_value=1, max_value=10_000))
def test_the_encoders_key_partition_is_javas(key_partition: encode.KeyPartition, key: bytes, n: int) -> None:
    assert key_partition(key, n) == default_partition(key, n)
    assert key_partition(bytearray(key), n) == default_partition(key, n)


def test_unkeyed_records_stick_until_told_to_move_then_go_to_another_available_partition() -> None:
    picks: list[int] = []

    def rand(n: int) -> int:
        picks.append(n)
        return 0

    p = Partitioner("murmur2_random", rand)
    r = route(5, [1, 3, 4])
    assert [p.partition(r, None) for _ in range(3)] == [1, 1, 1]
    assert p.next_sticky(r) == 3 and p.partition(r, None) == 3  # a new batch was needed: move
    assert picks == [3, 2]  # the second choice excludes the current partition


def test_topics_stick_independently() -> None:
    p = Partitioner("murmur2_random", lambda n: n - 1)
    assert p.partition(route(3, [0, 1, 2], "a"), None) == 2
    assert p.partition(route(2, [0, 1], "b"), None) == 1


def test_no_available_partition_falls_back_to_all() -> None:
    p = Partitioner("murmur2_random", lambda n: n - 1)
    assert p.partition(route(4), None) == 3


def test_a_sticky_partition_beyond_a_shrunk_view_is_chosen_again() -> None:
    p = Partitioner("murmur2_random", lambda n: 0)
    r = route(4, [0, 1, 2, 3])
    r.sticky = 9
    assert p.sticky(r) == 0


def test_uniform_sticky_ignores_keys() -> None:
    p = Partitioner("uniform_sticky", lambda n: 0)
    r = route(8, list(range(8)))
    assert {p.partition(r, b"k%d" % i) for i in range(20)} == {0}


def test_custom_partitioner() -> None:
    p = Partitioner(lambda topic, key, n: len(key or b"") % n, lambda n: 0)
    assert p.partition(route(2), b"abc") == 1
