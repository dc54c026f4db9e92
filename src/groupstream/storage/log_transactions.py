"""A partition log's transaction state: the producer state (open transactions) and the aborted-transaction
index, taken at open from a clean close's snapshot and ``.txnindex`` files when they are trusted, or rebuilt
from the log's batches and markers (and the files rewritten to match). Used by `PartitionLog`, which keeps them
up to date on append.
"""

from __future__ import annotations

from groupstream.protocol.errors import PeerProtocolError
from groupstream.protocol.records.batch import iter_record_batches
from groupstream.protocol.records.batch_header import BatchHeader
from groupstream.protocol.records.record import ControlType, EndTxnMarker
from groupstream.storage.fileio import pread_upto
from groupstream.storage.producer_state import ProducerStateManager, Snapshot
from groupstream.storage.recovery import RecoveryReport
from groupstream.storage.segment import Segment
from groupstream.storage.txn_index import (
    AbortedTxn,
    AbortedTxnIndex,
    encode_entry,
    read_entries,
    write_entries,
)

__all__ = ["TxnReplay", "note_marker", "read_marker", "restore_transaction_state", "segment_end"]


def read_marker(fd: int, position: int, h: BatchHeader) -> EndTxnMarker | None:
    """The COMMIT/ABORT marker of the control batch at ``position`` (None for other control records or
    records that cannot be decoded: such a batch ends no transaction)."""
    try:
        raw = pread_upto(fd, h.size, position)
        return next(iter_record_batches(raw, check_crc=False)).control_marker()
    except (PeerProtocolError, StopIteration, OSError):
        return None


class TxnReplay:
    """Rebuilds producer state and the aborted-transaction index from the batches of the log, in order."""

    def __init__(self, state: ProducerStateManager, index: AbortedTxnIndex) -> None:
        self.state = state
        self.index = index

    def __call__(self, fd: int, position: int, h: BatchHeader) -> None:
        if not h.is_control:
            self.state.observe(h)
            return
        marker = read_marker(fd, position, h) if h.producer_id >= 0 else None
        if marker is None:
            self.state.observe(h)
            return
        note_marker(self.state, self.index, h.producer_id, h.producer_epoch, marker.coordinator_epoch,
                    marker.control_type == ControlType.COMMIT, h.base_offset, h.max_timestamp)  # fmt: skip


def note_marker(
    state: ProducerStateManager,
    index: AbortedTxnIndex,
    producer_id: int,
    epoch: int,
    coordinator_epoch: int,
    commit: bool,
    offset: int,
    timestamp: int,
) -> AbortedTxn | None:
    """Apply a marker at ``offset`` to the producer state; an aborted transaction is indexed and returned."""
    done = state.complete_txn(producer_id, epoch, coordinator_epoch, commit, offset, timestamp)
    if done is None or not done.aborted:
        return None
    first_open = state.first_unstable_offset()
    entry = AbortedTxn(producer_id, done.first_offset, offset, offset + 1 if first_open is None else first_open)
    index.add(entry)
    return entry


def segment_end(segments: list[Segment], i: int) -> int | None:
    return segments[i + 1].base_offset if i + 1 < len(segments) else None


def load_txn_files(segments: list[Segment], expected: int) -> AbortedTxnIndex | str:
    """The index from the segments' .txnindex files, or why they are not trusted (they must hold exactly the
    ``expected`` entries the clean close's snapshot counted, each file well-formed and inside its segment)."""
    if expected < 0:
        return "the snapshot predates transactions"
    entries: list[AbortedTxn] = []
    for i, seg in enumerate(segments):
        got = read_entries(seg.txn_index_path, seg.base_offset, segment_end(segments, i))
        if isinstance(got, str):
            return f"{seg.txn_index_path.name}: {got}"
        entries.extend(got)
    if len(entries) != expected:
        return f"the files hold {len(entries)} entries, the snapshot counted {expected}"
    return AbortedTxnIndex(entries)


def write_txn_files(segments: list[Segment], index: AbortedTxnIndex, report: RecoveryReport) -> set[int]:
    """Make every segment's .txnindex match the rebuilt index (not synced here: the clean close syncs them
    before its snapshot counts them); returns the segments written, and -1 if the disk refused one (the
    next open then rebuilds them again)."""
    written: set[int] = set()
    for i, seg in enumerate(segments):
        entries = index.in_range(seg.base_offset, segment_end(segments, i))
        wanted = b"".join(encode_entry(e) for e in entries)
        try:
            found: bytes | None = seg.txn_index_path.read_bytes()
        except OSError:
            found = None
        if found == wanted or (found is None and not entries):
            written.add(seg.base_offset)  # right already (after a crash, maybe only in the page cache)
            continue
        try:
            write_entries(seg.txn_index_path, entries)
            written.add(seg.base_offset)
        except OSError as exc:
            report.events.append(f"cannot rewrite {seg.txn_index_path.name}: {exc.strerror or exc}")
            written.add(-1)
            continue
        why = "it was missing" if found is None else "it did not match the log"
        report.events.append(f"rebuilt {seg.txn_index_path.name} from the log's transaction markers "
                             f"({len(entries)} aborted transactions): {why}")  # fmt: skip
    return written


def restore_transaction_state(
    segments: list[Segment],
    snapshot: Snapshot | str | None,
    log_start: int,
    report: RecoveryReport,
    state: ProducerStateManager,
    aborted: AbortedTxnIndex,
) -> tuple[ProducerStateManager, AbortedTxnIndex, set[int]]:
    """The producer state and aborted-transaction index of a log just loaded, and the segments whose
    ``.txnindex`` was written. ``snapshot`` is None after an unclean shutdown (the recovery scan already fed
    ``state`` and ``aborted`` through `TxnReplay`); otherwise what the clean close left, or why it is unusable,
    in which case the log is scanned here."""
    rewrite_txn_files = True
    if snapshot is None:
        report.producer_state = "scanned with the log's recovery"
    else:
        log_end = segments[-1].next_offset
        why = snapshot if isinstance(snapshot, str) else None
        if not isinstance(snapshot, str):
            if snapshot.log_end_offset != log_end:
                why = f"the snapshot was taken at offset {snapshot.log_end_offset}, not {log_end}"
            else:
                loaded = load_txn_files(segments, snapshot.aborted_entries)
                if isinstance(loaded, str):
                    why = f"the aborted-transaction index is not trusted ({loaded})"
                else:
                    state, aborted, rewrite_txn_files = snapshot.state, loaded, False
                    report.producer_state = "snapshot"
        if why is not None:
            report.producer_state = f"scanned: {why}"
            replay = TxnReplay(state, aborted)
            for seg in segments:
                for pos, h in seg.iter_batches():
                    replay(seg.log_fd, pos, h)
    state.truncate_head(log_start)
    written = write_txn_files(segments, aborted, report) if rewrite_txn_files else set()
    return state, aborted, written
