"""Producer configuration under the Java client's property names, checked once at construction.

Defaults are Kafka 4's: ``acks=all``, idempotence on, ``linger.ms=5``, ``batch.size=16384``, unlimited
``retries`` bounded by ``delivery.timeout.ms=120000``.

``batch.max.size`` (KIP-782's name; not a Java property yet) lets a batch grow past ``batch.size`` while the
partition has a batch ahead of it still waiting to be sent: a producer that is ahead of the broker then sends
fewer, larger requests (what librdkafka gets from its 1 MB ``batch.size``), while one that is not still sends
``batch.size`` batches after ``linger.ms``. Set it to ``batch.size`` (or less) for Java's fixed batches. As in Java, idempotence that was only defaulted gives
way to a setting that conflicts with it (``acks=1``, ``retries=0``, more than 5 requests in flight), while
``enable.idempotence=true`` set explicitly together with such a setting is an error naming both.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from groupstream.client.errors import ClientConfigError
from groupstream.client.net.config import NETWORK_PROPERTIES, NetworkConfig, PropertyReader
from groupstream.protocol.records.compression import CODEC_NAMES, Codec

Serializer = Callable[[Any], bytes | None]
# A custom partitioner: (topic, key bytes or None, number of partitions) -> partition.
PartitionerFn = Callable[[str, bytes | None, int], int]

MAX_IDEMPOTENT_IN_FLIGHT = 5  # the broker remembers the last five batches of each producer and partition
INT32_MAX = 2**31 - 1

PRODUCER_PROPERTIES = (
    *NETWORK_PROPERTIES,
    "acks",
    "linger.ms",
    "batch.size",
    "batch.max.size",
    "compression.type",
    "enable.idempotence",
    "retries",
    "delivery.timeout.ms",
    "buffer.memory",
    "max.block.ms",
    "max.request.size",
    "partitioner",
    "key.serializer",
    "value.serializer",
    "transactional.id",
    "transaction.timeout.ms",
)

_ACKS = {"all": -1, "-1": -1, "1": 1, "0": 0}
# "murmur2_random" is librdkafka's name for Java's default: murmur2 of the key, sticky when there is none
_PARTITIONERS = {"murmur2_random": "murmur2_random", "default": "murmur2_random", "murmur2": "murmur2_random",
                 "uniform_sticky": "uniform_sticky"}  # fmt: skip


@dataclass(frozen=True)
class ProducerConfig:
    network: NetworkConfig
    acks: int = -1
    linger_ms: int = 5
    batch_size: int = 16_384
    batch_max_size: int = 1_048_576
    compression: Codec = Codec.NONE
    idempotence: bool = True
    retries: int = INT32_MAX
    delivery_timeout_ms: int = 120_000
    buffer_memory: int = 32 * 1024 * 1024
    max_block_ms: int = 60_000
    max_request_size: int = 1_048_576
    partitioner: str | PartitionerFn = "murmur2_random"
    key_serializer: Serializer | None = None
    value_serializer: Serializer | None = None
    transactional_id: str | None = None
    transaction_timeout_ms: int = 60_000

    @classmethod
    def from_mapping(cls, props: Mapping[str, Any] | None) -> ProducerConfig:
        r = PropertyReader(props, PRODUCER_PROPERTIES)
        network = NetworkConfig.read(r, "groupstream-producer")
        acks_raw = r.raw("acks", "all")
        acks = r.choice("acks", "all", _ACKS) if not isinstance(acks_raw, int) else _int_acks(acks_raw)
        linger = r.int_("linger.ms", cls.linger_ms, minimum=0)
        retries = r.int_("retries", cls.retries, minimum=0, maximum=INT32_MAX)
        idempotence = r.bool_("enable.idempotence", True)
        transactional_id = r.str_("transactional.id", "") if r.raw("transactional.id") is not None else None
        transactional_id = transactional_id or None
        if transactional_id is not None and not idempotence:
            raise ClientConfigError("transactional.id needs idempotence: remove enable.idempotence=false")
        if idempotence:
            conflicts = []
            if acks != -1:
                conflicts.append(f"acks={acks_raw} (idempotence needs acks=all)")
            if network.max_in_flight > MAX_IDEMPOTENT_IN_FLIGHT:
                conflicts.append(
                    f"max.in.flight.requests.per.connection={network.max_in_flight} (idempotence allows at most "
                    f"{MAX_IDEMPOTENT_IN_FLIGHT})"
                )
            if retries == 0:
                conflicts.append("retries=0 (idempotence needs retries)")
            if conflicts and transactional_id is not None:
                raise ClientConfigError("transactional.id needs idempotence, which conflicts with " + "; ".join(conflicts))
            if conflicts and r.has("enable.idempotence"):
                raise ClientConfigError("enable.idempotence=true conflicts with " + "; ".join(conflicts))
            if conflicts:
                idempotence = False  # defaulted idempotence yields, as in Java
        delivery = r.int_("delivery.timeout.ms", cls.delivery_timeout_ms, minimum=1)
        floor = linger + network.request_timeout_ms
        if delivery < floor:
            if r.has("delivery.timeout.ms"):
                raise ClientConfigError(
                    f"delivery.timeout.ms={delivery} must be at least linger.ms + request.timeout.ms = {floor}"
                )
            delivery = floor
        codec = r.choice("compression.type", "none", CODEC_NAMES)
        partitioner: str | PartitionerFn
        raw_partitioner = r.raw("partitioner", "murmur2_random")
        partitioner = (
            raw_partitioner
            if callable(raw_partitioner)
            else r.choice("partitioner", "murmur2_random", _PARTITIONERS)
        )
        return cls(
            network=network,
            acks=acks,
            linger_ms=linger,
            batch_size=r.int_("batch.size", cls.batch_size, minimum=0),
            batch_max_size=r.int_("batch.max.size", cls.batch_max_size, minimum=0),
            compression=Codec(codec),
            idempotence=idempotence,
            retries=retries,
            delivery_timeout_ms=delivery,
            buffer_memory=r.int_("buffer.memory", cls.buffer_memory, minimum=1),
            max_block_ms=r.int_("max.block.ms", cls.max_block_ms, minimum=0),
            max_request_size=r.int_("max.request.size", cls.max_request_size, minimum=1),
            partitioner=partitioner,
            key_serializer=r.callable_("key.serializer"),
            value_serializer=r.callable_("value.serializer"),
            transactional_id=transactional_id,
            transaction_timeout_ms=r.int_("transaction.timeout.ms", cls.transaction_timeout_ms, minimum=1, maximum=INT32_MAX),
        )


def _int_acks(value: int) -> int:
    if isinstance(value, bool) or value not in (-1, 0, 1):
        raise ClientConfigError(f"acks must be one of all, -1, 0, 1, got {value!r}")
    return value
