"""``ColumnBuilder`` (what ``poll_arrow`` returns) against ``records_to_arrow`` built from the same records, and
what building it costs the first time (issue 14: ``poll_arrow`` >= 3x ``poll``)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from groupstream.client.consumer.arrow import ColumnBuilder, records_to_arrow
from groupstream.client.consumer.records import ConsumerRecord, batch_records
from groupstream.protocol.records import BatchBuilder, RecordBatch

pa = pytest.importorskip("pyarrow")  # a dependency of the [spark] extra, which `make test` installs


def _batch(base: int, n: int, *, null_keys: bool = False) -> RecordBatch:
    b = BatchBuilder(base_offset=base)
    for o in range(base, base + n):
        b.append(1_000 + o, None if null_keys or o % 3 == 0 else b"k%d" % o, None if o % 4 == 1 else b"v%d" % o, [])
    return RecordBatch(b.build())


def test_topic_runs_and_missing_headers_match_records_to_arrow() -> None:
    """Rows of several topics (one of them with an empty name, one coming back after another), from whole
    batches and from records, with and without headers, null keys and tombstones: the topic column's
    offsets are a running sum over the runs."""
    builder = ColumnBuilder()
    expected: list[ConsumerRecord] = []
    for topic, partition, base, n in (("a", 0, 0, 5), ("a", 1, 10, 3), ("bb", 0, 0, 4), ("", 2, 7, 2), ("a", 0, 5, 6)):
        batch = _batch(base, n, null_keys=topic == "bb")
        assert builder.add_batch(topic, partition, batch, base) == (n, base + n - 1)
        expected += batch_records(topic, partition, batch, base)
    headed = [ConsumerRecord("ccc", 4, 40 + i, 2_000 + i, b"k", b"v", (("h", b"x"),) if i % 2 else (), 0)
              for i in range(3)]  # fmt: skip
    builder.add_records(headed)
    expected += headed
    got = builder.finish()
    got.validate(full=True)
    assert got.equals(records_to_arrow(expected))
    assert got.column("topic").to_pylist() == ["a"] * 8 + ["bb"] * 4 + [""] * 2 + ["a"] * 6 + ["ccc"] * 3


def test_no_headers_column_of_zero_rows() -> None:
    got = ColumnBuilder().finish()
    got.validate(full=True)
    assert got.num_rows == 0 and got.equals(records_to_arrow([]))


def test_the_first_poll_arrow_batch_imports_no_pandas() -> None:
    """pyarrow's ``fill_null`` and ``pa.array`` import pandas on first use: 0.3 s inside a consumer's first
    ``poll_arrow``, more than the rest of a 1,000,000-record read took. In a fresh interpreter."""
    code = textwrap.dedent(
        """
        import sys
        from groupstream.client.consumer.arrow import ColumnBuilder
        from groupstream.protocol.records import BatchBuilder, RecordBatch
        b = BatchBuilder(base_offset=0)
        b.append(1, b"k", b"v", [])
        builder = ColumnBuilder()
        builder.add_batch("t", 0, RecordBatch(b.build()), 0)
        assert builder.finish().num_rows == 1
        print("pandas" in sys.modules)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "False", out.stdout + out.stderr


@pytest.mark.parametrize("codec", ["NONE", "GZIP", "SNAPPY", "LZ4", "ZSTD"])
@pytest.mark.parametrize("log_append_time", [False, True])
def test_whole_batches_match_their_records(codec: str, log_append_time: bool) -> None:
    """What ``add_batch`` appends (compressed, transactional, log-append time, read from an offset inside the
    batch, null keys and tombstones) equals ``records_to_arrow`` of the record decoder's records."""
    from groupstream.protocol.records.compression import Codec

    b = BatchBuilder(compression=Codec[codec], base_offset=100, producer_id=7, producer_epoch=0, base_sequence=0,
                     transactional=True, log_append_time=log_append_time)  # fmt: skip
    for o in range(50):
        b.append(5_000 + o, None if o % 5 == 0 else b"key-%d" % o, None if o % 7 == 3 else bytes([o]) * o, [])
    batch = RecordBatch(b.build())
    builder = ColumnBuilder()
    assert builder.add_batch("t", 2, batch, 110) == (40, 149)
    got = builder.finish()
    got.validate(full=True)
    assert got.equals(records_to_arrow(batch_records("t", 2, batch, 110)))
    assert got.column("offset").to_pylist() == list(range(110, 150))
