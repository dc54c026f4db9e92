"""ListOffsets by time over a partition's segments: the first record at or after a timestamp, and the batch
holding the largest timestamp, both at or above the log start. Read-only; the segments' time indexes find the
batch, its records are decoded only when the answer lies inside it."""

from __future__ import annotations

from collections.abc import Sequence

from groupstream.protocol.errors import PeerProtocolError
from groupstream.protocol.records.batch import iter_record_batches
from groupstream.storage.fileio import pread_upto
from groupstream.storage.segment import Segment

__all__ = ["first_at_or_after", "largest_timestamp"]


def first_at_or_after(segments: Sequence[Segment], start: int, timestamp: int) -> tuple[int, int] | None:
    """``(offset, timestamp)`` of the first record at or above ``start`` whose timestamp is at least
    ``timestamp``, as Kafka answers ListOffsets: the time index finds the batch, then the batch's records
    are read to find the record (under LogAppendTime every record carries the batch's max timestamp)."""
    for seg in segments:
        if seg.next_offset <= start or seg.max_timestamp < timestamp:
            continue
        hint = seg.time_index.lookup(timestamp)
        from_offset = start if hint is None else max(hint, start)
        # A damaged range on the way raises: the answer may lie in it.
        for batch_pos, h in seg.batches_from(from_offset):
            if h.last_offset < start or h.max_timestamp < timestamp:
                continue
            if h.timestamp_type == 1:  # LogAppendTime: every record has the batch's timestamp
                return max(h.base_offset, start), h.max_timestamp
            try:
                raw = pread_upto(seg.log_fd, h.size, batch_pos)
                records = next(iter_record_batches(raw, check_crc=False)).records()
            except PeerProtocolError:  # records we cannot decode: answer for the batch as a whole
                return max(h.base_offset, start), h.max_timestamp
            for record in records:
                if record.offset >= start and record.timestamp >= timestamp:
                    return record.offset, record.timestamp
    return None


def largest_timestamp(segments: Sequence[Segment], start: int) -> tuple[int, int] | None:
    """ListOffsets MAX_TIMESTAMP: ``(offset, timestamp)`` of the first batch at or above ``start`` holding the
    largest timestamp; the offset is that batch's last offset (batch granularity, like the offsets Kafka's
    time index records)."""
    best: tuple[int, int] | None = None
    for seg in segments:
        if seg.next_offset <= start or seg.max_timestamp < 0:
            continue
        if best is not None and seg.max_timestamp <= best[1]:
            continue
        if seg.offset_of_max_timestamp >= start:
            best = (seg.offset_of_max_timestamp, seg.max_timestamp)
            continue
        # The segment's maximum lies below the log start: find the maximum of what remains.
        for _, h in seg.batches_from(start):
            if h.last_offset >= start and (best is None or h.max_timestamp > best[1]):
                best = (h.last_offset, h.max_timestamp)
    return best
