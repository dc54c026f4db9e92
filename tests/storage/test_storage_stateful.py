"""A Hypothesis state machine drives a PartitionLog and an in-memory model side by side.

The model is a list of batches (base offset, last offset, bytes, max timestamp) plus the log start. Segment
boundaries are the implementation's business, so retention's expectation is computed from the segment
base offsets the log reports and the model's batches inside them.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule
from storagekit import make_batch, read_all, split_batches

from groupstream.storage import LogConfig, OffsetOutOfRange, PartitionLog


@dataclass(frozen=True)
class Batch:
    base: int
    last: int
    raw: bytes
    max_ts: int


batch_specs = st.lists(
    st.tuples(st.integers(0, 240), st.integers(0, 4), st.integers(0, 1000)), min_size=1, max_size=3
)


class LogMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="gs-stateful-"))
        self.generation = 0
        self.batches: list[Batch] = []
        self.log_start = 0
        self.log: PartitionLog | None = None

    @initialize(
        segment_bytes=st.integers(1000, 3000),
        interval=st.integers(0, 400),
        retention_ms=st.sampled_from([-1, 0, 300, 700]),
        retention_bytes=st.sampled_from([-1, 0, 1500, 4000]),
    )
    def start(self, segment_bytes: int, interval: int, retention_ms: int, retention_bytes: int) -> None:
        self.config = LogConfig(
            segment_bytes=segment_bytes,
            index_interval_bytes=interval,
            retention_ms=retention_ms,
            retention_bytes=retention_bytes,
            segment_index_bytes=120,  # ten offset entries: index-full rolls happen too
        )
        self.log = PartitionLog.open(self.root / "t-0", self.config, 0)

    def teardown(self) -> None:
        if self.log is not None:
            self.log.close()
        shutil.rmtree(self.root, ignore_errors=True)

    @property
    def plog(self) -> PartitionLog:
        assert self.log is not None
        return self.log

    @property
    def log_end(self) -> int:
        return self.batches[-1].last + 1 if self.batches else self.plog.segment_base_offsets()[0]

    def visible(self) -> list[Batch]:
        return [b for b in self.batches if b.last >= self.log_start]

    # -- rules ----------------------------------------------------------------------------------------

    @rule(specs=batch_specs, now=st.integers(0, 2000))
    def append(self, specs: list[tuple[int, int, int]], now: int) -> None:
        parts = [make_batch(payload=bytes([65 + len(self.batches) % 26]) * n, last_offset_delta=d, base_timestamp=ts) for n, d, ts in specs]
        data = bytearray(b"".join(parts))
        expected_base = self.plog.log_end_offset
        info = self.plog.append(data, now_ms=now)
        assert info.base_offset == expected_base
        pos, offset = 0, expected_base
        for (_, delta, ts), part in zip(specs, parts, strict=True):
            raw = bytes(data[pos : pos + len(part)])
            self.batches.append(Batch(offset, offset + delta, raw, ts))
            pos += len(part)
            offset += delta + 1
        assert info.last_offset == offset - 1

    @rule(data=st.data(), max_bytes=st.integers(0, 1500), min_one=st.booleans())
    def read(self, data: st.DataObject, max_bytes: int, min_one: bool) -> None:
        offset = data.draw(st.integers(self.log_start, self.plog.log_end_offset))
        result = self.plog.read(offset, max_bytes, min_one_batch=min_one)
        got = split_batches(result.records)
        following = [b for b in self.batches if b.last >= offset]
        assert [(s, e, r) for s, e, r in got] == [(b.base, b.last, b.raw) for b in following[: len(got)]]
        if not following:
            assert got == [] and result.next_offset == offset
            return
        if got:
            assert result.next_offset == got[-1][1] + 1
            assert len(result.records) <= max_bytes or len(got) == 1
        if min_one:
            assert got, "min_one_batch must return the first batch"
        elif len(following[0].raw) <= max_bytes:
            assert got
        else:
            assert not got

    @rule(delta=st.integers(1, 5), below=st.booleans())
    def read_out_of_range(self, delta: int, below: bool) -> None:
        offset = self.log_start - delta if below else self.plog.log_end_offset + delta
        with pytest.raises(OffsetOutOfRange):
            self.plog.read(offset, 100)

    @rule(ts=st.integers(-1, 1001))
    def offset_for_timestamp(self, ts: int) -> None:
        expected = next(((max(b.base, self.log_start), b.max_ts) for b in self.visible() if b.max_ts >= ts), None)
        assert self.plog.offset_for_timestamp(ts) == expected

    @rule(now=st.integers(0, 2500))
    def enforce_retention(self, now: int) -> None:
        bases = self.plog.segment_base_offsets()
        segs = [
            [b for b in self.batches if b.base >= lo and (hi is None or b.base < hi)]
            for lo, hi in zip(bases, [*bases[1:], None], strict=True)
        ]
        n = len(bases)
        k = 0
        if self.config.retention_ms >= 0:
            while n - k > 1 and now - max(b.max_ts for b in segs[k]) > self.config.retention_ms:
                k += 1
        if self.config.retention_bytes >= 0:
            excess = sum(len(b.raw) for seg in segs[k:] for b in seg) - self.config.retention_bytes
            while n - k > 1 and excess - sum(len(b.raw) for b in segs[k]) >= 0:
                excess -= sum(len(b.raw) for b in segs[k])
                k += 1
        while n - k > 1 and bases[k + 1] <= self.log_start:
            k += 1
        assert self.plog.enforce_retention(now) == bases[:k]
        if k:
            self.batches = [b for b in self.batches if b.base >= bases[k]]
            self.log_start = max(self.log_start, bases[k])

    @rule(data=st.data())
    def delete_records(self, data: st.DataObject) -> None:
        offset = data.draw(st.integers(max(self.log_start - 2, 0), self.plog.log_end_offset))
        self.log_start = max(self.log_start, offset)
        assert self.plog.delete_records(offset) == self.log_start
        bases = self.plog.segment_base_offsets()
        self.batches = [b for b in self.batches if b.base >= bases[0]]

    @precondition(lambda self: self.log is not None and self.plog.log_end_offset > self.log_start)
    @rule(data=st.data())
    def truncate(self, data: st.DataObject) -> None:
        offset = data.draw(st.integers(self.log_start, self.plog.log_end_offset + 2))
        self.plog.truncate_to(offset)
        dropped = [b for b in self.batches if b.last >= offset]
        if dropped:
            self.batches = self.batches[: self.batches.index(dropped[0])]
            self.log_start = min(self.log_start, dropped[0].base)

    @rule()
    def flush(self) -> None:
        assert self.plog.flush() == self.plog.log_end_offset

    @rule(clean=st.booleans())
    def reopen(self, clean: bool) -> None:
        if clean:
            self.plog.close()
            self.log = PartitionLog.open(self.plog.directory, self.config, 0)
            assert self.plog.recovery_report.clean_shutdown
        else:
            self.generation += 1
            copy = self.root / f"t-{self.generation}"
            shutil.copytree(self.plog.directory, copy)
            self.plog.close()
            self.log = PartitionLog.open(copy, self.config, 0)
            assert not self.plog.recovery_report.clean_shutdown
        report = self.plog.recovery_report
        assert report.truncations == [] and report.removed_segments == [] and report.rebuilt_indexes == []
        assert report.holes == []
        if clean:  # nothing rescanned: every segment from its index files, producer state from the snapshot
            assert report.index_problems == [] and report.validated_segments == []
            assert report.trusted_segments == self.plog.segment_base_offsets()
            assert report.producer_state == "snapshot"

    # -- invariants -----------------------------------------------------------------------------------

    @invariant()
    def offsets_match(self) -> None:
        if self.log is None:
            return
        assert self.plog.log_start_offset == self.log_start
        assert self.plog.log_end_offset == self.log_end
        assert self.plog.flushed_offset <= self.plog.log_end_offset

    @invariant()
    def contents_match(self) -> None:
        if self.log is None:
            return
        assert [(s, e, r) for s, e, r in read_all(self.plog)] == [(b.base, b.last, b.raw) for b in self.visible()]
        assert self.plog.size_bytes == sum(len(b.raw) for b in self.batches)


LogMachine.TestCase.settings = settings(
    max_examples=60, stateful_step_count=40, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
TestLogMachine = LogMachine.TestCase
