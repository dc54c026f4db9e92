"""BatchBuilder, the lazy RecordBatch view, fetch-buffer iteration and broker-side validation."""

from __future__ import annotations

import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st
from records_strategies import codecs, record_specs

from groupstream.protocol.errors import LocalProtocolError, PeerProtocolError
from groupstream.protocol.records import (
    BatchBuilder,
    BatchHeader,
    Codec,
    ControlType,
    EndTxnMarker,
    Record,
    RecordBatch,
    build_control_batch,
    complete_batches_size,
    iter_batches,
    iter_record_batches,
    parse_header,
    patch_base_offset,
    validate_batch,
)
from groupstream.protocol.records.batch_header import (
    CONTROL_BIT,
    HEADER_SIZE,
    LOG_OVERHEAD,
    TRANSACTIONAL_BIT,
    encode_header,
    patch_crc,
)
from groupstream.protocol.records.record import encode_record

Spec = tuple[int, int, bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...]]


def _build(specs: list[Spec], codec: int = Codec.NONE, **kw: object) -> bytes:
    b = BatchBuilder(compression=codec, **kw)  # type: ignore[arg-type]
    for od, ts, k, v, h in specs:
        b.append(ts, k, v, h, offset_delta=od)
    return b.build()


def _simple(n: int = 3, codec: int = Codec.NONE, **kw: object) -> bytes:
    return _build([(i, 1000 + i, b"k%d" % i, b"v" * i, ()) for i in range(n)], codec, **kw)


def _raw_batch(
    records: bytes,
    count: int,
    last_delta: int,
    attributes: int = 0,
    producer_id: int = -1,
    base_sequence: int = -1,
) -> bytes:
    """A batch assembled field by field, for shapes the builder refuses to make."""
    h = BatchHeader(
        0,
        HEADER_SIZE - LOG_OVERHEAD + len(records),
        -1,
        2,
        0,
        attributes,
        last_delta,
        0,
        0,
        producer_id,
        0,
        base_sequence,
        count,
    )
    out = bytearray(encode_header(h) + records)
    patch_crc(out, 0, len(out))
    return bytes(out)


@settings(max_examples=150, deadline=None)
@given(
    specs=record_specs(),
    codec=codecs,
    base_offset=st.integers(0, 1 << 40),
    leader_epoch=st.integers(-1, 1000),
    producer=st.one_of(
        st.none(), st.tuples(st.integers(0, 1 << 40), st.integers(0, 32767), st.integers(0, (1 << 31) - 1))
    ),
    transactional=st.booleans(),
)
def test_builder_round_trip(
    specs: list[Spec],
    codec: Codec,
    base_offset: int,
    leader_epoch: int,
    producer: tuple[int, int, int] | None,
    transactional: bool,
) -> None:
    pid, epoch, seq = producer if producer else (-1, -1, -1)
    transactional = transactional and producer is not None
    raw = _build(
        specs,
        codec,
        base_offset=base_offset,
        partition_leader_epoch=leader_epoch,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        transactional=transactional,
    )
    batch = RecordBatch(raw)
    assert batch.validate_crc()
    assert batch.size == len(raw) and bytes(batch.raw) == raw
    assert batch.base_offset == base_offset
    assert batch.records_count == len(batch) == len(specs)
    assert batch.last_offset == base_offset + specs[-1][0]
    assert batch.next_offset == batch.last_offset + 1
    assert batch.compression == codec
    assert batch.base_timestamp == specs[0][1]
    assert batch.max_timestamp == max(s[1] for s in specs)
    assert batch.partition_leader_epoch == leader_epoch
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (pid, epoch, seq)
    assert batch.is_transactional == transactional and not batch.is_control
    assert batch.timestamp_type == 0
    expected = [Record(base_offset + od, ts, k, v, h) for od, ts, k, v, h in specs]
    assert batch.records() == expected
    assert list(batch) == expected
    assert batch.records() is batch.records()  # decoded once
    consecutive = [s[0] for s in specs] == list(range(len(specs)))
    if consecutive:
        assert validate_batch(raw, deep=True) == batch.header
    else:
        with pytest.raises(PeerProtocolError, match="spans"):
            validate_batch(raw)


def test_header_fields_on_the_wire() -> None:
    raw = _simple(3, Codec.LZ4, producer_id=5, producer_epoch=2, base_sequence=40, transactional=True)
    h = parse_header(raw)
    assert h.magic == 2 and h.batch_length == len(raw) - 12
    assert h.attributes == Codec.LZ4 | TRANSACTIONAL_BIT
    assert (h.last_offset_delta, h.records_count, h.base_timestamp, h.max_timestamp) == (2, 3, 1000, 1002)
    assert h.last_sequence == 42


def test_timestamps_may_go_backwards_and_max_is_tracked() -> None:
    raw = _build(
        [(0, 500, None, b"a", ()), (1, 100, None, b"b", ()), (2, 900, None, b"c", ()), (3, 0, None, b"d", ())]
    )
    batch = RecordBatch(raw)
    assert (batch.base_timestamp, batch.max_timestamp) == (500, 900)
    assert [r.timestamp for r in batch] == [500, 100, 900, 0]


def test_log_append_time_uses_the_batch_max_timestamp() -> None:
    b = BatchBuilder(log_append_time=True)
    b.append(10, None, b"a")
    b.append(30, None, b"b")
    batch = RecordBatch(b.build())
    assert batch.timestamp_type == 1
    assert [r.timestamp for r in batch] == [30, 30]


def test_builder_tracks_size_and_refuses_bad_input() -> None:
    b = BatchBuilder()
    assert b.uncompressed_size == HEADER_SIZE and len(b) == 0
    with pytest.raises(LocalProtocolError, match="at least one"):
        b.build()
    b.append(0, b"k", b"v")
    assert b.uncompressed_size == HEADER_SIZE + len(encode_record(0, 0, b"k", b"v")) and len(b) == 1
    with pytest.raises(LocalProtocolError, match="follow"):
        b.append(0, None, None, offset_delta=0)
    with pytest.raises(LocalProtocolError):
        BatchBuilder(compression=6)
    with pytest.raises(LocalProtocolError, match="producer id"):
        BatchBuilder(transactional=True)
    with pytest.raises(LocalProtocolError, match="base sequence"):
        BatchBuilder(producer_id=1, producer_epoch=0)


def test_control_batch() -> None:
    raw = build_control_batch(
        ControlType.COMMIT,
        producer_id=9,
        producer_epoch=3,
        coordinator_epoch=11,
        timestamp=77,
        base_offset=40,
    )
    h = validate_batch(raw, allow_control=True, deep=True)
    assert h.attributes == CONTROL_BIT | TRANSACTIONAL_BIT and h.base_sequence == -1
    batch = RecordBatch(raw)
    assert batch.is_control and batch.is_transactional
    assert batch.control_marker() == EndTxnMarker(ControlType.COMMIT, 11, 0)
    (r,) = batch.records()
    assert (r.offset, r.timestamp, r.key, r.value) == (
        40,
        77,
        b"\x00\x00\x00\x01",
        b"\x00\x00\x00\x00\x00\x0b",
    )
    with pytest.raises(PeerProtocolError, match="control"):
        validate_batch(raw)
    abort = build_control_batch(
        ControlType.ABORT, producer_id=9, producer_epoch=3, coordinator_epoch=0, timestamp=1
    )
    assert RecordBatch(abort).control_marker() == EndTxnMarker(ControlType.ABORT, 0, 0)
    assert RecordBatch(_simple()).control_marker() is None
    with pytest.raises(LocalProtocolError):
        build_control_batch(
            ControlType.LEADER_CHANGE, producer_id=1, producer_epoch=0, coordinator_epoch=0, timestamp=0
        )


def test_patch_base_offset_keeps_crc_and_shifts_offsets() -> None:
    buf = bytearray(_simple(3, Codec.ZSTD))
    patch_base_offset(buf, 0, 1_000_000)
    batch = RecordBatch(buf)
    assert batch.validate_crc()
    assert [r.offset for r in batch] == [1_000_000, 1_000_001, 1_000_002]


# --- fetch buffers ------------------------------------------------------------------------------------


def _fetch_buffer() -> tuple[bytes, list[bytes]]:
    batches = [
        _simple(3, Codec.NONE, base_offset=0),
        _simple(5, Codec.LZ4, base_offset=3),
        build_control_batch(
            ControlType.ABORT,
            producer_id=1,
            producer_epoch=0,
            coordinator_epoch=0,
            timestamp=5,
            base_offset=8,
        ),
        _simple(2, Codec.ZSTD, base_offset=9),
    ]
    return b"".join(batches), batches


def test_iter_record_batches_tolerates_every_truncation() -> None:
    buf, batches = _fetch_buffer()
    ends = [sum(len(b) for b in batches[: i + 1]) for i in range(len(batches))]
    for cut in range(len(buf) + 1):
        got = list(iter_record_batches(buf[:cut]))
        complete = [e for e in ends if e <= cut]
        assert [bytes(b.raw) for b in got] == batches[: len(complete)]
        assert complete_batches_size(buf[:cut]) == (complete[-1] if complete else 0)
    offsets = [r.offset for b in iter_record_batches(buf) for r in b]
    assert offsets == list(range(11))


def test_iter_record_batches_rejects_a_corrupt_complete_batch() -> None:
    buf, batches = _fetch_buffer()
    bad = bytearray(buf)
    bad[len(batches[0]) + HEADER_SIZE + 2] ^= 0xFF  # inside batch 2's compressed records
    it = iter_record_batches(bad)
    assert next(it).base_offset == 0
    with pytest.raises(PeerProtocolError, match="CRC"):
        next(it)
    magic = bytearray(buf)
    magic[16] = 1
    with pytest.raises(PeerProtocolError, match="magic"):
        list(iter_record_batches(magic))


def test_decompressed_size_limit_applies_to_batches() -> None:
    raw = _build([(0, 0, None, bytes(4 << 20), ())], Codec.ZSTD)
    assert len(raw) < 4096
    with pytest.raises(PeerProtocolError, match="limit"):
        RecordBatch(raw, max_decompressed_size=1 << 20).records()
    with pytest.raises(PeerProtocolError, match="limit"):
        validate_batch(raw, deep=True, max_decompressed_size=1 << 20)
    (batch,) = iter_record_batches(raw, max_decompressed_size=1 << 20)
    with pytest.raises(PeerProtocolError):
        batch.records()
    assert RecordBatch(raw).records()[0].value == bytes(4 << 20)


def test_zstd_batches_without_content_size_decode() -> None:
    """What a Java producer sends: zstd-jni's stream writes no content size."""
    records = b"".join(encode_record(i, i, None, b"java-%d" % i) for i in range(50))
    payload = zstandard.ZstdCompressor(write_content_size=False).compress(records)
    raw = _raw_batch(payload, 50, 49, attributes=Codec.ZSTD)
    assert [r.value for r in RecordBatch(raw)] == [b"java-%d" % i for i in range(50)]


# --- validation ---------------------------------------------------------------------------------------


def _with_header(raw: bytes, **fields: int) -> bytes:
    h = parse_header(raw)._replace(**fields)
    out = bytearray(encode_header(h) + raw[HEADER_SIZE:])
    patch_crc(out, 0, len(out))
    return bytes(out)


def test_validate_cheap_mode_rejections() -> None:
    good = _simple(3, Codec.GZIP, producer_id=4, producer_epoch=0, base_sequence=0)
    assert validate_batch(good).records_count == 3
    assert validate_batch(memoryview(bytearray(good))).records_count == 3
    cases: list[tuple[bytes, str]] = [
        (good + good, "declares"),
        (good[:-1], "declares"),
        (good[:40], "truncated"),
        (good[:-1] + bytes([good[-1] ^ 1]), "CRC"),
        (_with_header(good, attributes=5), "codec"),
        (_with_header(good, records_count=2), "spans"),
        (_with_header(good, last_offset_delta=3), "spans"),
        (_with_header(good, base_sequence=-1), "sequence"),
        (
            _with_header(good, attributes=Codec.GZIP | TRANSACTIONAL_BIT, producer_id=-1, base_sequence=-1),
            "producer id",
        ),
        (_with_header(good, magic=1), "magic"),
    ]
    for raw, match in cases:
        with pytest.raises(PeerProtocolError, match=match):
            validate_batch(raw)


def test_validate_cheap_mode_does_not_touch_records() -> None:
    # garbage records with a correct CRC: the cheap mode passes (the broker stores bytes), deep mode does not
    raw = _raw_batch(b"\xff" * 30, 1, 0, attributes=Codec.LZ4)
    assert validate_batch(raw).records_count == 1
    with pytest.raises(PeerProtocolError):
        validate_batch(raw, deep=True)


def test_validate_deep_mode_rejections() -> None:
    recs = encode_record(0, 0, None, b"a") + encode_record(1, 0, None, b"b")
    assert validate_batch(_raw_batch(recs, 2, 1), deep=True).records_count == 2
    with pytest.raises(PeerProtocolError, match="remain"):  # one declared, two present
        validate_batch(_raw_batch(recs, 1, 0), deep=True)
    with pytest.raises(PeerProtocolError, match="truncated"):
        validate_batch(_raw_batch(recs, 3, 2), deep=True)
    skewed = encode_record(0, 0, None, b"a") + encode_record(5, 0, None, b"b")
    with pytest.raises(PeerProtocolError, match="offset delta 5"):
        validate_batch(_raw_batch(skewed, 2, 1), deep=True)


@settings(max_examples=300, deadline=None)
@given(codec=codecs, data=st.data())
def test_mutated_batches_raise_only_peer_errors(codec: Codec, data: st.DataObject) -> None:
    raw = bytearray(_build(data.draw(record_specs(max_size=6)), codec))
    for _ in range(data.draw(st.integers(1, 3))):
        i = data.draw(st.integers(0, len(raw) - 1))
        raw[i] = data.draw(st.integers(0, 255))
    try:
        for pos, h in iter_batches(raw, validate_crc=False):
            records = RecordBatch(memoryview(raw)[pos:], h, max_decompressed_size=1 << 20).records()
            assert len(records) == h.records_count
    except PeerProtocolError:
        return
