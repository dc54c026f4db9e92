from __future__ import annotations

import struct
from pathlib import Path

import pytest
from storagekit import make_batch, read_all, segment_files, sized_batch, small_config, split_batches

from groupstream.protocol.records import BatchBuilder, RecordBatch, codec_from_name
from groupstream.protocol.records.batch_header import TIMESTAMP_TYPE_BIT, crc_ok, iter_batches, parse_header
from groupstream.storage import (
    CorruptBatchError,
    LogClosedError,
    LogConfig,
    OffsetOutOfRange,
    PartitionLog,
    RecordTooLargeError,
    TimestampType,
)
from groupstream.storage.offset_index import OffsetIndex
from groupstream.storage.time_index import TimeIndex


def open_log(tmp_path: Path, config: LogConfig | None = None, now_ms: int = 0) -> PartitionLog:
    return PartitionLog.open(tmp_path / "t-0", config or small_config(), now_ms)


def test_append_assigns_offsets_in_place_and_reads_back(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    a = make_batch(payload=b"first", last_offset_delta=2, base_timestamp=10)
    b = make_batch(payload=b"second", base_timestamp=11)
    info = log.append(a, now_ms=100)
    assert (info.base_offset, info.last_offset, info.log_append_time, info.log_start_offset) == (0, 2, -1, 0)
    assert parse_header(a).base_offset == 0
    info = log.append(b, now_ms=101)
    assert (info.base_offset, info.last_offset) == (3, 3)
    assert parse_header(b).base_offset == 3 and crc_ok(b, 0, parse_header(b))
    assert log.log_end_offset == log.high_watermark == 4
    result = log.read(0, 1 << 20)
    assert result.records == bytes(a) + bytes(b)
    assert (result.next_offset, result.high_watermark, result.log_start_offset) == (4, 4, 0)
    assert log.size_bytes == len(a) + len(b)


def test_several_batches_in_one_append(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    data = make_batch(payload=b"x", last_offset_delta=1) + make_batch(payload=b"y", last_offset_delta=4)
    info = log.append(data, now_ms=0)
    assert (info.base_offset, info.last_offset) == (0, 6)
    assert [(h.base_offset, h.last_offset) for _, h in iter_batches(data)] == [(0, 1), (2, 6)]
    assert log.read(0, 1 << 20).records == bytes(data)


def test_read_from_inside_a_compressed_batch_returns_the_whole_batch(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append(make_batch(payload=b"a" * 40), now_ms=0)  # offset 0
    gz = make_batch(payload=b"\x1f\x8b opaque compressed bytes", last_offset_delta=9, attributes=1)
    log.append(gz, now_ms=0)  # offsets 1..10
    for offset in (1, 5, 10):
        result = log.read(offset, 1 << 20)
        assert result.records == bytes(gz)
        assert result.next_offset == 11


def test_read_limits(tmp_path: Path) -> None:
    log = open_log(tmp_path, small_config(segment_bytes=100_000))
    batches = [sized_batch(200) for _ in range(5)]
    for b in batches:
        log.append(b, now_ms=0)
    assert len(log.read(0, 450).records) == 400  # whole batches only
    assert log.read(0, 450).next_offset == 2
    big = log.read(0, 50)
    assert big.records == bytes(batches[0])  # at least one whole batch
    assert log.read(0, 50, min_one_batch=False).records == b""
    assert log.read(1, 1 << 20, max_offset=3).records == bytes(batches[1]) + bytes(batches[2])
    assert log.read(3, 1 << 20, max_offset=3).records == b""
    assert log.read(5, 1 << 20).records == b""  # exactly at the log end
    assert log.read(5, 1 << 20).next_offset == 5


def test_offset_out_of_range(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append(make_batch(last_offset_delta=4), now_ms=0)
    with pytest.raises(OffsetOutOfRange) as info:
        log.read(6, 100)
    assert (info.value.offset, info.value.log_start_offset, info.value.log_end_offset) == (6, 0, 5)
    log.delete_records(3)
    with pytest.raises(OffsetOutOfRange):
        log.read(2, 100)
    assert log.read(3, 100).records  # the batch 0..4 still serves offset 3
    with pytest.raises(OffsetOutOfRange):
        log.read(-1, 100)


def test_roll_by_size_and_index_lookups(tmp_path: Path) -> None:
    log = open_log(tmp_path, small_config(segment_bytes=1000, index_interval_bytes=150))
    written = []
    for i in range(30):
        b = sized_batch(100 + i, last_offset_delta=i % 3, timestamp=1000 + i)
        log.append(b, now_ms=0)
        written.append(bytes(b))
    bases = log.segment_base_offsets()
    assert len(bases) > 3
    logs = segment_files(log.directory)
    assert [p.name for p in logs] == [f"{b:020d}.log" for b in bases]
    assert all(p.stat().st_size <= 1000 for p in logs)
    assert [raw for _, _, raw in read_all(log)] == written
    # Every offset reads from its own batch, via the sparse index.
    layout = [(s, e) for s, e, _ in read_all(log)]
    for start, end in layout:
        for offset in range(start, end + 1):
            got = split_batches(log.read(offset, 1).records)
            assert (got[0][0], got[0][1]) == (start, end)


def test_index_files_use_kafka_layout(tmp_path: Path) -> None:
    log = open_log(tmp_path, small_config(segment_bytes=100_000, index_interval_bytes=150))
    for i in range(10):
        log.append(sized_batch(100, timestamp=500 + i), now_ms=0)
    log.close()
    index = (log.directory / f"{0:020d}.index").read_bytes()
    entries = [struct.unpack_from(">ii", index, i) for i in range(0, len(index), 8)]
    # An entry once more than 150 bytes have gone by since the last: batches 2, 4, 6, 8 (100 bytes each).
    assert entries == [(2, 200), (4, 400), (6, 600), (8, 800)]
    tindex = (log.directory / f"{0:020d}.timeindex").read_bytes()
    tentries = [struct.unpack_from(">qi", tindex, i) for i in range(0, len(tindex), 12)]
    assert tentries == [(502, 2), (504, 4), (506, 6), (508, 8)]


def test_offset_index_lookup_unit(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "x.index", 100, 1024)
    index.start_rebuild()
    index.sync_file()
    index.append(105, 400)
    index.append(110, 900)
    assert [index.lookup(o) for o in (100, 104, 105, 109, 110, 500)] == [0, 0, 400, 400, 900, 900]
    with pytest.raises(ValueError):
        index.append(110, 1000)
    assert (tmp_path / "x.index").read_bytes() == struct.pack(">iiii", 5, 400, 10, 900)
    index.close()


def test_time_index_only_grows(tmp_path: Path) -> None:
    index = TimeIndex(tmp_path / "x.timeindex", 0, 1200)
    index.start_rebuild()
    assert index.maybe_append(50, 3)
    assert not index.maybe_append(50, 4)
    assert not index.maybe_append(40, 5)
    assert index.maybe_append(70, 9)
    assert [index.lookup(t) for t in (10, 50, 60, 70, 99)] == [None, 3, 3, 9, 9]
    index.close()


def test_offset_for_timestamp(tmp_path: Path) -> None:
    log = open_log(tmp_path, small_config(segment_bytes=400, index_interval_bytes=100))
    stamps = [100, 200, 150, 300, 300, 250, 400, 500, 450, 600]
    for ts in stamps:
        log.append(sized_batch(120, last_offset_delta=1, timestamp=ts), now_ms=0)
    assert len(log.segment_base_offsets()) > 2

    def expected(ts: int) -> tuple[int, int] | None:
        for i, t in enumerate(stamps):
            if t >= ts:
                return 2 * i, t
        return None

    for ts in (0, 100, 101, 150, 201, 300, 301, 401, 599, 600, 601):
        assert log.offset_for_timestamp(ts) == expected(ts), ts
    assert log.max_timestamp_offset() == (19, 600)
    log.delete_records(5)  # inside the batch 4..5 (ts 150)
    assert log.offset_for_timestamp(0) == (5, 150)
    assert log.offset_for_timestamp(250) == (6, 300)


@pytest.mark.parametrize("codec", ["none", "zstd"])
def test_offset_for_timestamp_finds_the_record_inside_a_batch(tmp_path: Path, codec: str) -> None:
    """ListOffsets by timestamp answers with the first *record* at or after the time, as Kafka does, not with
    the start of the batch that holds it."""
    log = open_log(tmp_path)
    for first in (0, 10):
        b = BatchBuilder(compression=codec_from_name(codec))
        for i in range(first, first + 10):
            b.append(1000 + 10 * i, b"k", b"v")
        log.append(bytearray(b.build()), now_ms=0)
    assert log.offset_for_timestamp(1000) == (0, 1000)
    assert log.offset_for_timestamp(1041) == (5, 1050)
    assert log.offset_for_timestamp(1150) == (15, 1150)
    assert log.offset_for_timestamp(1191) is None
    log.delete_records(7)
    assert log.offset_for_timestamp(1041) == (7, 1070)


def test_segment_ms_rolls_an_old_segment(tmp_path: Path) -> None:
    log = open_log(tmp_path, small_config(segment_bytes=100_000, segment_ms=1000))
    log.append(sized_batch(100), now_ms=5000)
    log.append(sized_batch(100), now_ms=6000)
    assert log.segment_base_offsets() == [0]
    log.append(sized_batch(100), now_ms=6001)
    assert log.segment_base_offsets() == [0, 2]


def test_retention_by_time_deletes_old_segments_and_moves_log_start(tmp_path: Path) -> None:
    log = open_log(tmp_path, small_config(segment_bytes=250, retention_ms=1000))
    for i in range(10):
        log.append(sized_batch(100, timestamp=i * 100), now_ms=0)  # two batches per segment
    assert log.segment_base_offsets() == [0, 2, 4, 6, 8]
    assert log.enforce_retention(now_ms=1000) == []
    # Segment [0, 2) has max timestamp 100: older than 1000 ms at now=1101, [2, 4) (300) is not.
    assert log.enforce_retention(now_ms=1101) == [0]
    assert log.log_start_offset == 2
    assert not (log.directory / f"{0:020d}.log").exists()
    assert not (log.directory / f"{0:020d}.index").exists()
    # Everything but the active segment can go; the active one never does.
    assert log.enforce_retention(now_ms=10**9) == [2, 4, 6]
    assert log.log_start_offset == 8
    assert [s for s, _, _ in read_all(log)] == [8, 9]


def test_retention_by_bytes(tmp_path: Path) -> None:
    log = open_log(tmp_path, small_config(segment_bytes=250, retention_bytes=450))
    for _ in range(9):
        log.append(sized_batch(100), now_ms=0)
    assert log.size_bytes == 900
    assert log.enforce_retention(now_ms=0) == [0, 2]
    assert log.size_bytes == 500 and log.log_start_offset == 4


def test_compact_only_topics_are_not_retained(tmp_path: Path) -> None:
    config = LogConfig.from_properties({"cleanup.policy": "compact", "retention.bytes": "1"}, base=small_config(segment_bytes=250))
    log = open_log(tmp_path, config)
    for _ in range(6):
        log.append(sized_batch(100), now_ms=0)
    assert log.enforce_retention(now_ms=10**12) == []


def test_delete_records_moves_log_start_and_deletes_whole_segments_only(tmp_path: Path) -> None:
    log = open_log(tmp_path, small_config(segment_bytes=250))
    for _ in range(6):
        log.append(sized_batch(100), now_ms=0)
    assert log.segment_base_offsets() == [0, 2, 4]
    assert log.delete_records(1) == 1
    assert log.segment_base_offsets() == [0, 2, 4]
    assert log.delete_records(3) == 3
    assert log.segment_base_offsets() == [2, 4]
    assert log.delete_records(2) == 3  # never backwards
    with pytest.raises(OffsetOutOfRange):
        log.delete_records(7)
    assert log.delete_records(6) == 6  # up to the end: the active segment stays, empty of readable data
    assert log.segment_base_offsets() == [4]
    assert log.read(6, 100).records == b""
    log.close()
    reopened = open_log(tmp_path)
    assert (reopened.log_start_offset, reopened.log_end_offset) == (6, 6)


def test_truncate_to(tmp_path: Path) -> None:
    log = open_log(tmp_path, small_config(segment_bytes=250))
    for _ in range(5):
        log.append(make_batch(payload=b"z" * 60, last_offset_delta=2), now_ms=0)  # 121-byte batches
    assert log.segment_base_offsets() == [0, 6, 12]
    log.truncate_to(8)  # inside batch 6..8: that whole batch goes
    assert log.log_end_offset == 6
    assert log.segment_base_offsets() == [0, 6]
    assert log.append(make_batch(), now_ms=0).base_offset == 6
    log.truncate_to(3)
    assert log.segment_base_offsets() == [0]
    assert [s for s, _, _ in read_all(log)] == [0]
    log.truncate_to(100)  # beyond the end: nothing to do
    assert log.log_end_offset == 3


def test_log_append_time_stamps_batches(tmp_path: Path) -> None:
    log = open_log(tmp_path, small_config(message_timestamp_type=TimestampType.LOG_APPEND_TIME))
    b = make_batch(payload=b"p", base_timestamp=5, attributes=1)
    info = log.append(b, now_ms=123456)
    assert info.log_append_time == 123456
    h = parse_header(b)
    assert h.max_timestamp == 123456 and h.attributes == 1 | TIMESTAMP_TYPE_BIT and crc_ok(b, 0, h)
    assert log.read(0, 1000).records == bytes(b)
    assert log.offset_for_timestamp(123456) == (0, 123456)


def test_rejections(tmp_path: Path) -> None:
    log = open_log(tmp_path, small_config(max_message_bytes=500, segment_bytes=800))
    with pytest.raises(RecordTooLargeError, match=r"max\.message\.bytes"):
        log.append(sized_batch(501), now_ms=0)
    with pytest.raises(RecordTooLargeError, match=r"segment\.bytes"):
        log.append(sized_batch(450) + sized_batch(450), now_ms=0)
    with pytest.raises(CorruptBatchError):
        log.append(sized_batch(100)[:80], now_ms=0)
    with pytest.raises(CorruptBatchError):
        log.append(bytearray(), now_ms=0)
    assert log.log_end_offset == 0 and log.size_bytes == 0
    log.close()
    with pytest.raises(LogClosedError):
        log.append(sized_batch(100), now_ms=0)
    with pytest.raises(LogClosedError):
        log.read(0, 10)


def test_delete_removes_the_directory(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append(make_batch(), now_ms=0)
    log.delete()
    assert not log.directory.exists()
    assert log.flush() == 0


@pytest.mark.parametrize("codec", ["gzip", "zstd"])
def test_real_compressed_batches_pass_through_untouched(tmp_path: Path, codec: str) -> None:
    log = open_log(tmp_path, small_config(segment_bytes=100_000))
    log.append(make_batch(payload=b"first"), now_ms=0)
    builder = BatchBuilder(compression=codec_from_name(codec))
    for i in range(20):
        builder.append(1000 + i, f"k{i}".encode(), f"value-{i}".encode() * 5)
    built = builder.build()
    stored = bytearray(built)
    assert (log.append(stored, now_ms=0).base_offset, log.log_end_offset) == (1, 21)
    assert stored[8:] == built[8:]  # only baseOffset changed
    batch = RecordBatch(log.read(13, 10).records)
    assert batch.validate_crc() and batch.base_offset == 1
    assert [(r.offset, r.value) for r in batch.records()][12] == (13, b"value-12" * 5)
    assert log.offset_for_timestamp(1010) == (11, 1010)  # the record, not its batch
