"""Producer configuration: Kafka's names and defaults, and errors that name the property."""

from __future__ import annotations

import pytest

from groupstream.client.errors import ClientConfigError
from groupstream.client.producer import Producer
from groupstream.client.producer.config import ProducerConfig
from groupstream.protocol.records import Codec

BOOT = {"bootstrap.servers": "127.0.0.1:9092"}


def test_defaults_are_kafkas() -> None:
    c = ProducerConfig.from_mapping(BOOT)
    assert (c.acks, c.linger_ms, c.batch_size, c.compression, c.idempotence) == (
        -1,
        5,
        16_384,
        Codec.NONE,
        True,
    )
    assert (c.retries, c.delivery_timeout_ms, c.max_block_ms, c.buffer_memory) == (
        2**31 - 1,
        120_000,
        60_000,
        32 << 20,
    )
    assert c.network.max_in_flight == 5 and c.network.request_timeout_ms == 30_000
    assert c.network.bootstrap_servers == (("127.0.0.1", 9092),)
    assert c.partitioner == "murmur2_random"


def test_values_and_aliases() -> None:
    c = ProducerConfig.from_mapping(
        {"bootstrap_servers": "a:1,[::1]:2", "acks": 1, "linger_ms": "20", "compression.type": "ZSTD",
         "enable.idempotence": "false", "client.id": "me", "partitioner": "uniform_sticky"}
    )  # fmt: skip
    assert c.network.bootstrap_servers == (("a", 1), ("::1", 2))
    assert (c.acks, c.linger_ms, c.compression, c.idempotence) == (1, 20, Codec.ZSTD, False)
    assert c.network.client_id == "me" and c.partitioner == "uniform_sticky"
    assert ProducerConfig.from_mapping({**BOOT, "acks": "0", "enable.idempotence": False}).acks == 0


@pytest.mark.parametrize(
    ("props", "named"),
    [
        ({"bootstrap.server": "x:1"}, "bootstrap.server"),
        ({}, "bootstrap.servers"),
        ({"bootstrap.servers": "nohost"}, "bootstrap.servers"),
        ({**BOOT, "acks": "2"}, "acks"),
        ({**BOOT, "acks": 5}, "acks"),
        ({**BOOT, "linger.ms": -1}, "linger.ms"),
        ({**BOOT, "linger.ms": "soon"}, "linger.ms"),
        ({**BOOT, "batch.size": True}, "batch.size"),
        ({**BOOT, "compression.type": "brotli"}, "compression.type"),
        ({**BOOT, "enable.idempotence": "maybe"}, "enable.idempotence"),
        ({**BOOT, "partitioner": "random"}, "partitioner"),
        ({**BOOT, "key.serializer": "str"}, "key.serializer"),
        ({**BOOT, "transactional.id": "tx", "enable.idempotence": False}, "transactional.id"),
        ({**BOOT, "transactional.id": "tx", "acks": "1"}, "transactional.id"),
        ({**BOOT, "transaction.timeout.ms": 0}, "transaction.timeout.ms"),
        ({**BOOT, "delivery.timeout.ms": 1000}, "delivery.timeout.ms"),
        ({**BOOT, "enable.idempotence": True, "acks": "1"}, "enable.idempotence"),
        (
            {**BOOT, "enable.idempotence": True, "max.in.flight.requests.per.connection": 6},
            "enable.idempotence",
        ),
        ({**BOOT, "enable.idempotence": True, "retries": 0}, "retries=0"),
        ({**BOOT, "max.in.flight.requests.per.connection": 0}, "max.in.flight.requests.per.connection"),
    ],
)
def test_bad_properties_are_named(props: dict[str, object], named: str) -> None:
    with pytest.raises(ClientConfigError, match=named.replace(".", r"\.")):
        ProducerConfig.from_mapping(props)


def test_the_producer_refuses_bad_config_before_starting_anything() -> None:
    with pytest.raises(ClientConfigError, match="linger"):
        Producer({**BOOT, "linger.ms": "x"})


def test_defaulted_idempotence_yields_to_conflicting_settings() -> None:
    assert not ProducerConfig.from_mapping({**BOOT, "acks": "1"}).idempotence
    assert not ProducerConfig.from_mapping({**BOOT, "max.in.flight.requests.per.connection": 10}).idempotence
    assert not ProducerConfig.from_mapping({**BOOT, "retries": 0}).idempotence


def test_delivery_timeout_defaults_up_to_linger_plus_request_timeout() -> None:
    c = ProducerConfig.from_mapping({**BOOT, "request.timeout.ms": 200_000})
    assert c.delivery_timeout_ms == 200_005


def test_a_callable_partitioner_is_accepted() -> None:
    def fn(topic: str, key: bytes | None, n: int) -> int:
        return 0

    assert ProducerConfig.from_mapping({**BOOT, "partitioner": fn}).partitioner is fn
