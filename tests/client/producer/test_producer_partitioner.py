"""Partition choice: Java's murmur2 for keys, sticky (KIP-794) for records without one."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from groupstream.client.producer.config import PartitionerFn
from groupstream.client.producer.partitioner import Partitioner
from groupstream.protocol.partitioner import default_partition


def partitioner(
    mode: str | PartitionerFn,
    batch_size: int,
    rand: Callable[[int], int],
    available: dict[str, Sequence[int]] | None = None,
) -> Partitioner:
    return Partitioner(mode, batch_size, rand, lambda topic: (available or {}).get(topic, ()))


def test_keys_go_where_java_puts_them() -> None:
    p = partitioner("murmur2_random", 100, lambda n: 0)
    for key in (b"", b"a", b"key-17", "ключ".encode()):
        assert p.partition("t", key, 7, 10) == default_partition(key, 7)


def test_unkeyed_records_stick_until_batch_size_bytes_then_move_to_another_available_partition() -> None:
    picks: list[int] = []

    def rand(n: int) -> int:
        picks.append(n)
        return 0

    p = partitioner("murmur2_random", 100, rand, {"t": [1, 3, 4]})
    chosen = [p.partition("t", None, 5, 40) for _ in range(6)]
    # 40 + 40 + 40 bytes reach batch.size=100 after the third record; the next one moves on
    assert chosen == [1, 1, 1, 3, 3, 3]
    assert picks == [3, 2]  # the second choice excludes the current partition


def test_topics_stick_independently() -> None:
    p = partitioner("murmur2_random", 1000, lambda n: n - 1, {"a": [0, 1, 2], "b": [0, 1]})
    assert p.partition("a", None, 3, 1) == 2
    assert p.partition("b", None, 2, 1) == 1


def test_no_available_partition_falls_back_to_all() -> None:
    p = partitioner("murmur2_random", 10, lambda n: n - 1)
    assert p.partition("t", None, 4, 1) == 3


def test_uniform_sticky_ignores_keys() -> None:
    p = partitioner("uniform_sticky", 1000, lambda n: 0, {"t": list(range(8))})
    assert {p.partition("t", b"k%d" % i, 8, 1) for i in range(20)} == {0}


def test_custom_partitioner() -> None:
    p = partitioner(lambda topic, key, n: len(key or b"") % n, 10, lambda n: 0)
    assert p.partition("t", b"abc", 2, 1) == 1
