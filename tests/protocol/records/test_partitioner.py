"""murmur2 and the default partitioner against Java's published values and kafka-python's implementation."""

from __future__ import annotations

import pytest
from aiokafka.partitioner import DefaultPartitioner as AiokafkaPartitioner
from aiokafka.partitioner import murmur2 as aiokafka_murmur2
from hypothesis import given
from hypothesis import strategies as st
from kafka.partitioner.default import murmur2 as kafka_python_murmur2

from groupstream.protocol.partitioner import default_partition, murmur2, to_positive

# From apache/kafka's UtilsTest.testMurmur2 (Utils.murmur2 returns a signed int).
JAVA_MURMUR2 = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}


@pytest.mark.parametrize("key,expected", list(JAVA_MURMUR2.items()))
def test_murmur2_matches_java(key: bytes, expected: int) -> None:
    assert murmur2(key) == expected
    assert murmur2(bytearray(key)) == murmur2(memoryview(key)) == expected


@given(st.binary(max_size=64))
def test_murmur2_matches_kafka_python_and_aiokafka(key: bytes) -> None:
    # both return the same 32 bits, unsigned
    assert murmur2(key) & 0xFFFFFFFF == kafka_python_murmur2(key) & 0xFFFFFFFF
    assert murmur2(key) & 0xFFFFFFFF == aiokafka_murmur2(key) & 0xFFFFFFFF
    assert -(1 << 31) <= murmur2(key) < 1 << 31


@given(st.binary(max_size=64), st.integers(min_value=1, max_value=1000))
def test_default_partition_matches_aiokafka(key: bytes, n: int) -> None:
    partitions = list(range(n))
    assert default_partition(key, n) == AiokafkaPartitioner()(key, partitions, partitions)


def test_to_positive_is_not_abs() -> None:
    assert to_positive(-1) == 0x7FFFFFFF
    assert to_positive(-(1 << 31)) == 0
    assert to_positive(5) == 5
    # Java: toPositive(murmur2("21")) % 4 for the value above
    assert default_partition(b"21", 4) == (-973932308 & 0x7FFFFFFF) % 4 == 0


def test_empty_key_and_bad_partition_count() -> None:
    assert murmur2(b"") == 275646681 == kafka_python_murmur2(b"")
    with pytest.raises(ValueError):
        default_partition(b"k", 0)
