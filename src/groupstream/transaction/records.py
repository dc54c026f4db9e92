"""The records of `__transaction_state`, in Kafka's formats (``TransactionLogKey`` / ``TransactionLogValue``).

Key: int16 version 0, then the transactional id (string). Value: int16 version, then (version 0, and version 1
which is flexible and adds tagged fields: previous and next producer id (tags 0, 1), client transaction version
(tag 2), next producer epoch (tag 3)) the producer id and epoch, timeout, int8 status, the partitions by topic,
the last update and start timestamps. A record without a value (a tombstone) removes the transactional id. We
write version 1, as Kafka 4 does, and read both.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from groupstream.protocol import primitives as P
from groupstream.protocol.compiler import CompiledStruct
from groupstream.protocol.errors import PeerProtocolError
from groupstream.protocol.records import Record
from groupstream.protocol.records.batch import keyed_records
from groupstream.protocol.schema import Array, Field, Struct
from groupstream.protocol.topic_partition import TopicPartition
from groupstream.transaction.state import TxnMetadata, TxnState

__all__ = ["VALUE_VERSION", "TxnRecord", "decode_record", "encode_record", "transaction_records"]

KEY_VERSION = 0
VALUE_VERSION = 1

_KEY = CompiledStruct("TransactionLogKey", Struct("TransactionLogKey", Field("transactional_id", "string")), valid="0")

_VALUE = CompiledStruct(
    "TransactionLogValue",
    Struct(
        "TransactionLogValue",
        Field("producer_id", "int64"),
        Field("previous_producer_id", "int64", versions="1+", tag=0, tagged="1+", default=-1),
        Field("next_producer_id", "int64", versions="1+", tag=1, tagged="1+", default=-1),
        Field("producer_epoch", "int16"),
        Field("next_producer_epoch", "int16", versions="1+", tag=3, tagged="1+", default=-1),
        Field("transaction_timeout_ms", "int32"),
        Field("transaction_status", "int8"),
        Field(
            "transaction_partitions",
            Array(Struct("PartitionsSchema", Field("topic", "string"), Field("partition_ids", Array("int32")))),
            nullable="0+",
        ),
        Field("transaction_last_update_timestamp_ms", "int64"),
        Field("transaction_start_timestamp_ms", "int64"),
        Field("client_transaction_version", "int16", versions="1+", tag=2, tagged="1+", default=0),
    ),
    valid="0-1",
    flexible="1+",
)


@dataclass(frozen=True, slots=True)
class TxnRecord:
    """One `__transaction_state` record: the id and its metadata, or None for a tombstone."""

    transactional_id: str
    metadata: TxnMetadata | None


def encode_record(record: TxnRecord) -> tuple[bytes, bytes | None]:
    key = P.I16.pack(KEY_VERSION) + _KEY.encode(_KEY.Type(transactional_id=record.transactional_id), KEY_VERSION)
    m = record.metadata
    if m is None:
        return key, None
    PS = _VALUE.Type.PartitionsSchema
    value = _VALUE.Type(
        producer_id=m.producer_id,
        previous_producer_id=m.previous_producer_id,
        next_producer_id=m.next_producer_id,
        producer_epoch=m.producer_epoch,
        next_producer_epoch=m.next_producer_epoch,
        transaction_timeout_ms=m.timeout_ms,
        transaction_status=int(m.state),
        transaction_partitions=[PS(topic=t, partition_ids=ps) for t, ps in m.topic_partitions().items()],
        transaction_last_update_timestamp_ms=m.last_update_ms,
        transaction_start_timestamp_ms=m.start_ms,
        client_transaction_version=m.client_transaction_version,
    )
    return key, P.I16.pack(VALUE_VERSION) + _VALUE.encode(value, VALUE_VERSION)


def _version(buf: bytes | memoryview, what: str) -> int:
    if len(buf) < 2:
        raise PeerProtocolError(f"{what} of {len(buf)} bytes has no version prefix")
    (version,) = P.I16.unpack_from(buf, 0)
    return int(version)


def decode_record(key: bytes | memoryview, value: bytes | memoryview | None) -> TxnRecord:
    """Raises `PeerProtocolError` for bytes that are not a transaction log record of a known version."""
    if _version(key, "record key") != KEY_VERSION:
        raise PeerProtocolError(f"unknown __transaction_state key version {_version(key, 'record key')}")
    k, _ = _KEY.decode(key, KEY_VERSION, 2)
    if value is None:
        return TxnRecord(k.transactional_id, None)
    version = _version(value, "record value")
    v, _ = _VALUE.decode(value, version, 2)
    try:
        state = TxnState(v.transaction_status)
    except ValueError:
        raise PeerProtocolError(f"unknown transaction status {v.transaction_status}") from None
    partitions = frozenset(TopicPartition(p.topic, i) for p in v.transaction_partitions or () for i in p.partition_ids)
    return TxnRecord(
        k.transactional_id,
        TxnMetadata(
            transactional_id=k.transactional_id,
            producer_id=v.producer_id,
            producer_epoch=v.producer_epoch,
            timeout_ms=v.transaction_timeout_ms,
            state=state,
            partitions=partitions,
            start_ms=v.transaction_start_timestamp_ms,
            last_update_ms=v.transaction_last_update_timestamp_ms,
            previous_producer_id=v.previous_producer_id,
            next_producer_id=v.next_producer_id,
            next_producer_epoch=v.next_producer_epoch,
            client_transaction_version=v.client_transaction_version,
        ),
    )


def transaction_records(data: bytes | memoryview) -> Iterator[tuple[Record, TxnRecord | PeerProtocolError]]:
    """The keyed records of a read of a `__transaction_state` partition, each decoded or with the error that says
    why not (`keyed_records`; loading logs and skips it)."""
    return keyed_records(data, decode_record)
