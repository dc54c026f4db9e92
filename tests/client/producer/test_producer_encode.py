"""The producer's encoder: the C functions and their pure-Python twins write the same bytes and take the same
decisions, record by record and in bulk (rows and Arrow columns), and a finished batch decodes to the records
that went in."""

from __future__ import annotations

import struct
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from groupstream.client.producer import encode
from groupstream.protocol.records import RecordBatch, validate_batch
from groupstream.protocol.records.batch_header import HEADER_SIZE, LOG_OVERHEAD, patch_crc

needs_c = pytest.mark.usefixtures("c_encoder_built")


@pytest.fixture
def c_encoder_built() -> None:
    """`make test` builds the C extension (pip install -e .): a build that failed is a failure, not a skip."""
    assert encode.C_ENCODER, "the C encoder is not built: pip install -e . needs gcc and the Python headers"

payload = st.one_of(
    st.none(),
    st.binary(max_size=80),
    st.integers(min_value=8180, max_value=8200).map(lambda n: bytes(i % 251 for i in range(n))),
)
header_list = st.one_of(
    st.none(),
    st.lists(st.tuples(st.text(max_size=8), st.one_of(st.none(), st.binary(max_size=40))), max_size=3),
)
timestamps = st.integers(min_value=-(1 << 40), max_value=1 << 50)
Record = tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]] | None]
records = st.lists(st.tuples(timestamps, payload, payload, header_list), min_size=1, max_size=25)


def outcome(fn: Any, *args: Any) -> Any:
    """What a call returns, or the type of what it raises."""
    try:
        return ("ok", fn(*args))
    except Exception as e:  # the type is what is compared
        return ("raised", type(e).__name__)


def decoded(
    buf: bytearray,
) -> list[tuple[int, bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...]]]:
    """The records of a batch being built, once its header is finished as the producer finishes it."""
    data = bytearray(buf)
    struct.pack_into(">i", data, 8, len(data) - LOG_OVERHEAD)
    patch_crc(data, 0, len(data))
    validate_batch(bytes(data), deep=True)
    return [(r.timestamp, r.key, r.value, tuple(r.headers)) for r in RecordBatch(bytes(data)).records()]


@needs_c
@settings(max_examples=300, deadline=None)
@given(recs=records, limit=st.integers(min_value=HEADER_SIZE, max_value=40_000))
def test_append_record_c_and_python_write_the_same_batch(recs: list[Record], limit: int) -> None:
    c_buf, py_buf = encode.new_batch_buffer(), encode.new_batch_buffer()
    kept = []
    for ts, key, value, headers in recs:
        got = outcome(encode._c_append_record, c_buf, ts, key, value, headers, limit)
        assert got == outcome(encode.py_append_record, py_buf, ts, key, value, headers, limit)
        assert c_buf == py_buf
        if got == ("ok", len(kept)):
            kept.append((ts, key, value, tuple(headers or ())))
            assert len(kept) == 1 or len(c_buf) <= limit  # only a first record may pass the limit
        else:
            assert got == ("ok", encode.APPEND_FULL)
    assert encode.batch_count(c_buf) == len(kept) >= 1  # the first record always goes in
    assert decoded(c_buf) == kept


@pytest.mark.parametrize("append", [encode.append_record, encode.py_append_record])
def test_keys_and_values_may_be_str_or_any_buffer(append: Any) -> None:
    buf = encode.new_batch_buffer()
    append(buf, 5, "ключ", memoryview(b"value"), [("h", b"x")], 10_000)
    append(buf, 4, bytearray(b"k"), None, (), 10_000)
    assert decoded(buf) == [(5, "ключ".encode(), b"value", (("h", b"x"),)), (4, b"k", None, ())]


@pytest.mark.parametrize("append", [encode.append_record, encode.py_append_record])
@pytest.mark.parametrize(
    ("args", "error"),
    [
        ((bytes(61), 0, None, b"v", None, 100), TypeError),  # not a bytearray
        ((bytearray(10), 0, None, b"v", None, 100), ValueError),  # no header
        ((None, 0, 1, b"v", None, 100), TypeError),  # an int key
        ((None, 0, None, b"v", [("h", "not bytes")], 100), TypeError),
        ((None, 0, None, b"v", [(1, b"x")], 100), TypeError),
        ((None, 0, None, b"v", [("a", b"b", b"c")], 100), TypeError),
        ((None, 1 << 63, None, b"v", None, 100), OverflowError),
    ],
)
def test_bad_input_raises_the_same_error_and_changes_nothing(
    append: Any, args: tuple[Any, ...], error: type
) -> None:
    buf = args[0] if args[0] is not None else encode.new_batch_buffer()
    before = bytes(buf)
    with pytest.raises(error):
        append(buf, *args[1:])
    assert bytes(buf) == before


def test_a_timestamp_delta_beyond_int64_is_refused_by_both() -> None:
    for append in (encode.append_record, encode.py_append_record):
        buf = encode.new_batch_buffer()
        append(buf, -(1 << 63), None, b"v", None, 1000)
        with pytest.raises(OverflowError):
            append(buf, (1 << 63) - 1, None, b"v", None, 1000)


Row = (
    tuple[bytes | None, bytes | None]
    | tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]] | None]
)
rows_strategy = st.lists(
    st.one_of(st.tuples(payload, payload), st.tuples(payload, payload, header_list)), min_size=1, max_size=60
)


def run_rows(
    append_rows: Any,
    rows: list[Any] | None,
    count: int,
    limit: int,
    partitions: Any,
    columns: tuple[Any, Any, Any],
    n: int,
    open_every: int,
) -> tuple[list[Any], list[bytearray]]:
    """Drive ``append_rows`` as the producer does: open a batch where it stops, until every row went in.
    Returns the (row, partition) stops and every batch, in the order opened."""
    batches: list[bytearray | None] = [None] * count
    opened: list[bytearray] = []
    limits = [limit] * count
    touched = bytearray(count)
    stops = []
    i = 0
    while i < n:
        i, p = append_rows(batches, limits, 1_000, count, 0, True, i, min(n, i + open_every), rows, partitions,
                           *columns, touched)  # fmt: skip
        stops.append((i, p))
        if p >= 0:
            batches[p] = encode.new_batch_buffer()
            opened.append(batches[p])  # type: ignore[arg-type]
    return [*stops, bytes(touched)], opened


@needs_c
@settings(max_examples=200, deadline=None)
@given(
    rows=rows_strategy,
    count=st.integers(min_value=1, max_value=5),
    limit=st.integers(min_value=HEADER_SIZE, max_value=3_000),
    fixed=st.one_of(st.none(), st.integers(min_value=0, max_value=4)),
    chunk=st.integers(min_value=1, max_value=70),
)
def test_append_rows_c_and_python_agree_on_rows(
    rows: list[Any], count: int, limit: int, fixed: int | None, chunk: int
) -> None:
    partitions = None if fixed is None else min(fixed, count - 1)
    args = (rows, count, limit, partitions, (None, None, None), len(rows), chunk)
    c = run_rows(encode._c_append_rows, *args)
    py = run_rows(encode.py_append_rows, *args)
    assert c == py
    went_in = sorted((r for batch in c[1] for r in decoded(batch)), key=repr)
    want = sorted(((1_000, r[0], r[1], tuple((r[2] if len(r) == 3 else None) or ())) for r in rows), key=repr)
    assert went_in == want  # every row exactly once


def arrow_columns(array: pa.Array | None) -> Any:
    if array is None:
        return None
    wide = pa.types.is_large_binary(array.type)
    validity, offsets, data = array.buffers()
    return (offsets, data if data is not None else b"", validity if array.null_count else None, array.offset,
            len(array), wide)  # fmt: skip


@needs_c
@settings(max_examples=200, deadline=None)
@given(
    pairs=st.lists(
        st.tuples(payload, payload, st.one_of(st.none(), st.integers(0, 3))), min_size=1, max_size=60
    ),
    large=st.booleans(),
    cut=st.integers(min_value=0, max_value=5),
    with_partitions=st.booleans(),
    limit=st.integers(min_value=HEADER_SIZE, max_value=3_000),
)
def test_append_rows_from_arrow_buffers_matches_the_same_rows(
    pairs: list[tuple[bytes | None, bytes | None, int | None]], large: bool, cut: int, with_partitions: bool,
    limit: int,
) -> None:  # fmt: skip
    kind = pa.large_binary() if large else pa.binary()
    keys = pa.array([k for k, _, _ in pairs], kind).slice(
        min(cut, len(pairs) - 1)
    )  # a sliced array: shift > 0
    values = pa.array([v for _, v, _ in pairs], kind).slice(min(cut, len(pairs) - 1))
    parts = pa.array([p for _, _, p in pairs], pa.int32()).slice(min(cut, len(pairs) - 1))
    n = len(keys)
    part_spec = None
    if with_partitions:
        validity, buf = parts.buffers()
        part_spec = (buf, validity if parts.null_count else None, parts.offset, len(parts))
    columns = (arrow_columns(keys), arrow_columns(values), part_spec)
    c = run_rows(encode._c_append_rows, None, 4, limit, None, columns, n, 25)
    py = run_rows(encode.py_append_rows, None, 4, limit, None, columns, n, 25)
    as_rows = list(zip(keys.to_pylist(), values.to_pylist(), strict=True))
    plist = parts.to_pylist() if with_partitions else None
    rows = run_rows(encode._c_append_rows, as_rows, 4, limit, plist, (None, None, None), n, 25)
    assert c == py == rows


@pytest.mark.parametrize("append_rows", [encode.append_rows, encode.py_append_rows])
def test_append_rows_refuses_partitions_that_do_not_exist(append_rows: Any) -> None:
    batches: list[bytearray | None] = [encode.new_batch_buffer(), encode.new_batch_buffer()]
    rows = [(None, b"a"), (None, b"b")]
    for partitions in (5, [0, 2], [-1, 0]):
        with pytest.raises(ValueError, match="does not exist"):
            append_rows(batches, [1000, 1000], 0, 2, 0, True, 0, 2, rows, partitions, None, None, None, None)
    with pytest.raises(TypeError):
        append_rows(
            batches, [1000, 1000], 0, 2, 0, True, 0, 1, [b"not a tuple"], None, None, None, None, None
        )


class Handle(tuple[Any, ...]):
    __slots__ = ()


@needs_c
@settings(max_examples=300, deadline=None)
@given(
    records=st.lists(
        st.tuples(
            payload,
            payload,
            st.one_of(st.none(), st.integers(-1, 4)),  # partition
            st.one_of(st.none(), st.integers(-5, 1 << 45)),  # timestamp
        ),
        min_size=1,
        max_size=30,
    ),
    count=st.integers(min_value=1, max_value=4),
    sticky=st.integers(min_value=-1, max_value=4),
    use_keys=st.booleans(),
    limit=st.integers(min_value=HEADER_SIZE, max_value=2_000),
    missing=st.sets(st.integers(0, 3)),
)
def test_append_routed_c_and_python_place_append_and_refuse_alike(
    records: list[tuple[bytes | None, bytes | None, int | None, int | None]],
    count: int,
    sticky: int,
    use_keys: bool,
    limit: int,
    missing: set[int],
) -> None:
    results: list[list[Any]] = []
    buffers: list[list[bytearray | None]] = []
    for fn in (encode._c_append_routed, encode.py_append_routed):
        bufs: list[bytearray | None] = [
            None if p in missing else encode.new_batch_buffer() for p in range(count)
        ]
        outcomes = [f"outcome-{p}" for p in range(count)]
        got = []
        for key, value, partition, ts in records:
            h = fn(
                bufs, [limit] * count, outcomes, count, sticky, use_keys, partition, key, value, ts, Handle
            )
            if h is not None:
                assert type(h) is Handle and h[0] == outcomes[int(h[0].split("-")[1])]
                got.append((h[0], h[1], h[2] if ts is not None else "now"))
            else:
                got.append(None)
        results.append(got)
        buffers.append([bytes(b) if b is not None else None for b in bufs])
    if results[0] != results[1] or buffers[0] != buffers[1]:
        # "now" timestamps may differ by a millisecond between the two runs: compare what does not depend on it
        assert [r is None for r in results[0]] == [r is None for r in results[1]]
        assert all(a is None or a[:2] == b[:2] for a, b in zip(results[0], results[1], strict=True))
        assert any(ts is None for _k, _v, _p, ts in records)
