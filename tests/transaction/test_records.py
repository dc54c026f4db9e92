"""`__transaction_state` records in Kafka's formats: bytes we write decode to what we wrote, version 0 values
(non-flexible, as older Kafka wrote them) are read, and what is not a record is an error, not a guess."""

from __future__ import annotations

import struct

import pytest

from groupstream.protocol.errors import PeerProtocolError
from groupstream.protocol.records.batch import BatchBuilder
from groupstream.transaction.records import TxnRecord, decode_record, encode_record, transaction_records
from groupstream.transaction.state import TxnMetadata, TxnState


def meta(**kw: object) -> TxnMetadata:
    base: dict[str, object] = dict(transactional_id="tx-1", producer_id=1234, producer_epoch=5, timeout_ms=60_000,
                                   state=TxnState.ONGOING, partitions=frozenset({("a", 1), ("a", 0), ("b", 2)}),
                                   start_ms=1_000, last_update_ms=2_000)  # fmt: skip
    base.update(kw)
    return TxnMetadata(**base)  # type: ignore[arg-type]


@pytest.mark.parametrize("m", [
    meta(),
    meta(state=TxnState.EMPTY, partitions=frozenset(), start_ms=-1),
    meta(state=TxnState.PREPARE_ABORT, previous_producer_id=99, next_producer_id=100, next_producer_epoch=0),
], ids=["ongoing", "empty", "tagged-fields"])  # fmt: skip
def test_round_trip(m: TxnMetadata) -> None:
    key, value = encode_record(TxnRecord(m.transactional_id, m))
    assert key == struct.pack(">hh", 0, len("tx-1")) + b"tx-1"  # Kafka's key: version 0, the id
    assert value is not None and value[:2] == b"\x00\x01"  # value version 1 (flexible), as Kafka 4 writes
    assert decode_record(key, value) == TxnRecord(m.transactional_id, m)


def test_partitions_are_grouped_by_topic_in_order() -> None:
    _, value = encode_record(TxnRecord("tx-1", meta()))
    assert value is not None
    # compact array of 2 topics (varint 3), "a" (compact string 2) with partitions [0, 1], then "b" with [2]
    a = bytes([3, 2]) + b"a" + bytes([3]) + struct.pack(">ii", 0, 1) + b"\x00"
    assert a in value


def test_version_0_value_is_read() -> None:
    m = meta()
    parts = [("a", [0, 1]), ("b", [2])]
    v0 = struct.pack(">hqhib", 0, m.producer_id, m.producer_epoch, m.timeout_ms, int(m.state)) + struct.pack(">i", 2)
    for topic, ps in parts:
        v0 += struct.pack(">h", len(topic)) + topic.encode() + struct.pack(">i", len(ps))
        v0 += b"".join(struct.pack(">i", p) for p in ps)
    v0 += struct.pack(">qq", m.last_update_ms, m.start_ms)
    key, _ = encode_record(TxnRecord("tx-1", m))
    assert decode_record(key, v0) == TxnRecord("tx-1", m)


def test_tombstone_and_errors() -> None:
    key, _ = encode_record(TxnRecord("gone", None))
    assert decode_record(key, None) == TxnRecord("gone", None)
    with pytest.raises(PeerProtocolError, match="key version 7"):
        decode_record(struct.pack(">hh", 7, 1) + b"x", None)
    _, value = encode_record(TxnRecord("tx-1", meta()))
    assert value is not None
    status_at = 2 + 8 + 2 + 4  # version, producer id, epoch, timeout
    bad = bytearray(value)
    bad[status_at] = 42
    with pytest.raises(PeerProtocolError, match="unknown transaction status 42"):
        decode_record(key, bytes(bad))


def test_records_of_a_partition_read() -> None:
    builder = BatchBuilder()
    for rec in (TxnRecord("x", meta(transactional_id="x")), TxnRecord("x", None)):
        k, v = encode_record(rec)
        builder.append(0, k, v)
    decoded = [r for _, r in transaction_records(builder.build())]
    assert decoded == [TxnRecord("x", meta(transactional_id="x")), TxnRecord("x", None)]
