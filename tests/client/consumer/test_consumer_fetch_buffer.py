"""The fetch buffer's rules: which fetches are kept, what poll returns (and decodes), positions, pauses."""

from __future__ import annotations

import struct
import threading
from typing import Any

import pytest

from groupstream.assignment.types import TopicPartition
from groupstream.client.consumer.fetch_buffer import CompletedFetch, FetchBuffer
from groupstream.client.consumer.records import ConsumerRecord
from groupstream.protocol.errors import PeerProtocolError
from groupstream.protocol.records import BatchBuilder, RecordBatch
from groupstream.protocol.records import record as record_module
from support.waiting import wait_until

A, B = TopicPartition("t", 0), TopicPartition("t", 1)


def recs(tp: TopicPartition, start: int, end: int) -> list[ConsumerRecord]:
    return [ConsumerRecord(tp.topic, tp.partition, o, 0, None, b"%d" % o, ()) for o in range(start, end)]


def fetched(buf: FetchBuffer, tp: TopicPartition, start: int, end: int, next_offset: int | None = None) -> bool:
    return buf.fetch_done(CompletedFetch(tp, start, recs(tp, start, end), end if next_offset is None else next_offset))


def test_fetchable_needs_a_position_and_marks_in_flight() -> None:
    buf = FetchBuffer()
    buf.assign([A, B])
    assert buf.fetchable(100) == []
    assert buf.missing_positions() == [A, B]
    assert buf.seek(A, 5)
    assert buf.fetchable(100) == [(A, 5)]
    assert buf.fetchable(100) == []  # in flight


def test_a_fetch_is_kept_only_at_the_fetch_position() -> None:
    buf = FetchBuffer()
    buf.assign([A])
    buf.seek(A, 0)
    buf.fetchable(100)
    buf.seek(A, 50)  # the application seeks while the fetch from 0 is in flight
    assert not fetched(buf, A, 0, 10)
    assert buf.drain(100) == []
    assert buf.fetchable(100) == [(A, 50)]
    assert fetched(buf, A, 50, 60)
    assert [r.offset for r in buf.drain(100)] == list(range(50, 60))
    assert buf.position(A) == 60


def test_drain_moves_positions_and_respects_max_records() -> None:
    buf = FetchBuffer()
    buf.assign([A, B])
    buf.seek(A, 0)
    buf.seek(B, 100)
    buf.fetchable(1000)
    fetched(buf, A, 0, 10, next_offset=12)  # trailing control records: the next fetch starts at 12
    fetched(buf, B, 100, 105)
    first = buf.drain(7)
    rest = buf.drain(100)
    assert len(first) == 7 and len(first) + len(rest) == 15
    assert buf.positions() == {A: 12, B: 105}
    for tp in (A, B):
        offsets = [r.offset for r in first + rest if r.partition == tp.partition]
        assert offsets == sorted(offsets)


def test_a_fetch_of_only_control_records_moves_a_position_with_nothing_buffered() -> None:
    """Else a reader waiting for its position to reach the end of a range that ends on a transaction marker
    would wait forever: no record is ever returned to move it."""
    buf = FetchBuffer()
    buf.assign([A, B])
    buf.seek(A, 10)
    buf.seek(B, 0)
    buf.fetchable(1000)
    assert fetched(buf, A, 10, 10, next_offset=12)  # the marker at 10 and 11, dropped by the fetcher
    assert buf.position(A) == 12 and buf.fetch_position(A) == 12
    fetched(buf, B, 0, 5)
    buf.fetchable(1000)
    assert fetched(buf, B, 5, 5, next_offset=7)  # records 0..4 still buffered: the position waits for them
    assert buf.position(B) == 0
    assert [r.offset for r in buf.drain(100)] == [0, 1, 2, 3, 4]
    assert buf.position(B) == 7
    assert not buf.has_work()


def test_paused_partitions_keep_their_records_but_poll_skips_them() -> None:
    buf = FetchBuffer()
    buf.assign([A, B])
    buf.seek(A, 0)
    buf.seek(B, 0)
    buf.fetchable(100)
    fetched(buf, A, 0, 5)
    fetched(buf, B, 0, 5)
    assert buf.set_paused([A], True) == []
    assert {r.partition for r in buf.drain(100)} == {1}
    assert buf.fetchable(100) == [(B, 5)]  # A is not fetched while paused
    buf.set_paused([A], False)
    assert [r.offset for r in buf.drain(100)] == [0, 1, 2, 3, 4]


def test_kip822_a_partition_that_stays_assigned_stays_paused_with_its_buffer() -> None:
    buf = FetchBuffer()
    buf.assign([A, B])
    buf.seek(A, 0)
    buf.fetchable(100)
    fetched(buf, A, 0, 3)
    buf.set_paused([A], True)
    buf.assign([A, TopicPartition("t", 2)])  # a rebalance: B goes, A stays
    assert buf.paused() == {A}
    assert buf.position(A) == 0
    buf.set_paused([A], False)
    assert [r.offset for r in buf.drain(100)] == [0, 1, 2]


def test_removed_partitions_return_positions_and_never_their_records() -> None:
    buf = FetchBuffer()
    buf.assign([A, B])
    buf.seek(A, 0)
    buf.fetchable(100)
    fetched(buf, A, 0, 10)
    assert [r.offset for r in buf.drain(4)] == [0, 1, 2, 3]
    assert buf.remove([A]) == {A: 4}
    assert buf.drain(100) == []
    assert buf.set_paused([A], True) == [A]  # no longer assigned
    assert not fetched(buf, A, 4, 10)


def test_seek_only_unset_and_expected_guard_resets() -> None:
    buf = FetchBuffer()
    buf.assign([A])
    assert buf.seek(A, 7, only_unset=True)
    assert not buf.seek(A, 0, only_unset=True)  # a committed offset found late does not undo a position
    assert not buf.seek(A, 0, expected=3)  # an out-of-range reset that a seek overtook
    assert buf.seek(A, 0, expected=7)
    assert buf.position(A) == 0


def test_tasks_and_errors_wake_a_waiting_poll() -> None:
    buf = FetchBuffer()
    ran: list[str] = []
    buf.add_task(lambda: ran.append("callback"))
    assert buf.has_work()
    for task in buf.take_tasks():
        task()
    assert ran == ["callback"]
    buf.add_error(ValueError("x"))
    assert isinstance(buf.take_error(), ValueError)
    buf.wakeup()
    assert buf.wait(5.0) is True  # woken, not timed out


def test_a_nudge_is_not_a_wakeup() -> None:
    buf = FetchBuffer()
    buf.nudge()  # a blocking call's result arrived: waiters look again, but poll must not raise
    assert buf.wait(0) is False  # looks at the flag at once: nothing to wait for
    finished = [False]
    buf.wait_tasks(5.0, lambda: not finished[0])  # returns at once: the call is done


# --- batches decoded by drain --------------------------------------------------------------------------------


@pytest.fixture(params=["c", "python"])
def decoder(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every decoding test runs with the C decoder and with the pure-Python one."""
    if request.param == "python":
        monkeypatch.setattr(record_module, "_c_decode", None)
        monkeypatch.setattr(record_module, "_c_append_columns", None)
    return str(request.param)


def batch(base: int, n: int, *, headers: bool = False, corrupt: bool = False) -> RecordBatch:
    b = BatchBuilder(base_offset=base)
    for o in range(base, base + n):
        b.append(1_000 + o, b"k%d" % o if o % 2 else None, b"%d" % o, [("h", b"x")] if headers else [])
    raw = bytearray(b.build())
    if corrupt:  # one record more than the batch holds: decoding runs out of bytes
        struct.pack_into(">i", raw, 57, n + 1)
    return RecordBatch(bytes(raw))


def lazily_fetched(buf: FetchBuffer, tp: TopicPartition, start: int, batches: list[RecordBatch]) -> bool:
    pending = sum(len(b) for b in batches)
    return buf.fetch_done(CompletedFetch(tp, start, [], batches[-1].next_offset, batches=batches, pending=pending))


def test_batches_are_decoded_by_drain_as_far_as_it_needs(decoder: str) -> None:
    buf = FetchBuffer()
    buf.assign([A])
    buf.seek(A, 3)
    buf.fetchable(100)
    assert lazily_fetched(buf, A, 3, [batch(0, 5), batch(5, 5), batch(10, 5)])  # the fetch offset is inside
    first = buf.drain(4)
    assert [(r.offset, r.value, r.key) for r in first] == [(o, b"%d" % o, b"k%d" % o if o % 2 else None)
                                                             for o in range(3, 7)]  # fmt: skip
    assert buf.position(A) == 7
    fetch = buf._parts[A].fetches[0]
    assert fetch.batch_index == 2 and fetch.remaining() == 3 + 5  # the third batch is not decoded yet
    assert [r.offset for r in buf.drain(100)] == list(range(7, 15))
    assert buf.position(A) == 15 and not buf.has_work()


def test_a_batch_that_does_not_decode_ends_the_drain_and_is_raised_next(decoder: str) -> None:
    buf = FetchBuffer()
    buf.assign([A])
    buf.seek(A, 0)
    buf.fetchable(100)
    lazily_fetched(buf, A, 0, [batch(0, 5), batch(5, 5, corrupt=True), batch(10, 5)])
    assert [r.offset for r in buf.drain(100)] == [0, 1, 2, 3, 4]  # what came before it
    assert isinstance(buf.take_error(), PeerProtocolError)
    assert buf.position(A) == 5 and buf.fetch_position(A) == 5
    assert buf.drain(100) == []  # the rest of the fetch is dropped ...
    assert buf.fetchable(100) == [(A, 5)]  # ... and the partition fetched again from its position


def _arrow_fetched(headers: bool = False) -> FetchBuffer:
    """A buffer holding A from offset 2 (four lazy batches, one with headers) and B from 0 (three records)."""
    buf = FetchBuffer()
    buf.assign([A, B])
    buf.seek(A, 2)
    buf.seek(B, 0)
    buf.fetchable(100)
    lazily_fetched(buf, A, 2, [batch(0, 5), batch(5, 3, headers=headers), batch(8, 6), batch(14, 4)])
    fetched(buf, B, 0, 3)
    return buf


def _offsets(rows: Any) -> list[tuple[int, int]]:
    return list(zip(rows.column("partition").to_pylist(), rows.column("offset").to_pylist(), strict=True))


def test_drain_arrow_matches_the_records_and_moves_positions_exactly(decoder: str) -> None:
    """Slices of whole batches, at most ``max_records`` rows unless one batch alone is more; after each call
    every partition's position is one past the last row it returned; all rows equal the record path's."""
    import pyarrow as pa  # a dependency of the [spark] extra, which `make test` installs: never skipped

    from groupstream.client.consumer.arrow import decode_fetch, join, records_to_arrow

    expected_buf, buf = _arrow_fetched(headers=True), _arrow_fetched(headers=True)
    records: list[ConsumerRecord] = []
    while got := expected_buf.drain(100):
        records += got
    parts = []
    for take in (4, 7, 1, 3, 100, 100, 100):
        moved = buf.positions()
        rows = join(buf.drain_arrow(take, decode_fetch))
        a_rows = [o for tp, o in _offsets(rows) if tp == A.partition]
        assert rows.num_rows <= take or len(set(_offsets(rows))) == rows.num_rows <= 6  # one batch: the largest
        if a_rows:  # A's batches start at 2 (its fetch offset), 5, 8 and 14: none is cut
            assert a_rows[0] in (2, 5, 8, 14) and a_rows[-1] + 1 in (5, 8, 14, 18)
        for tp, offset in _offsets(rows):
            moved[TopicPartition("t", tp)] = offset + 1
        assert buf.positions() == moved
        parts.append(rows)
    assert buf.positions() == expected_buf.positions() == {A: 18, B: 3}
    got = pa.Table.from_batches(parts).sort_by([("partition", "ascending"), ("offset", "ascending")])
    expected = records_to_arrow(sorted(records, key=lambda r: (r.partition, r.offset)))
    assert got.equals(pa.Table.from_batches([expected]))
    assert len(records) == 16 + 3


def test_drain_arrow_decodes_a_fetch_once_and_hands_out_slices_of_it(decoder: str) -> None:
    """What a call costs follows its rows: one decode for the fetch, then zero-copy slices of it, as many
    whole batches as fit in ``max_records``; a first batch too big goes whole."""
    from groupstream.client.consumer import arrow

    decodes: list[TopicPartition] = []

    def decode(fetch: CompletedFetch) -> None:
        decodes.append(fetch.tp)
        arrow.decode_fetch(fetch)

    buf = FetchBuffer()
    buf.assign([A])
    buf.seek(A, 0)
    buf.fetchable(100)
    lazily_fetched(buf, A, 0, [batch(o, 3) for o in range(0, 18, 3)] + [batch(18, 9)])
    slices = [buf.drain_arrow(7, decode) for _ in range(4)]
    assert [[_offsets(p) for p in s] for s in slices] == [[[(0, o) for o in range(i, j)]]
                                                          for i, j in ((0, 6), (6, 12), (12, 18), (18, 27))]  # fmt: skip
    assert decodes == [A]
    data = {s[0].column("value").buffers()[2].address for s in slices}
    assert len(data) == 1  # every slice shares the one decoded value buffer
    assert buf.position(A) == 27 and not buf.has_work()


def test_a_seek_between_slices_drops_the_rest_and_a_pause_holds_it(decoder: str) -> None:
    from groupstream.client.consumer.arrow import decode_fetch, join

    buf = FetchBuffer()
    buf.assign([A])
    buf.seek(A, 0)
    buf.fetchable(100)
    lazily_fetched(buf, A, 0, [batch(o, 2) for o in range(0, 10, 2)])
    assert _offsets(join(buf.drain_arrow(4, decode_fetch))) == [(0, o) for o in range(4)]
    assert buf.set_paused([A], True) == []
    assert buf.drain_arrow(4, decode_fetch) == [] and buf.position(A) == 4
    buf.set_paused([A], False)
    assert _offsets(join(buf.drain_arrow(4, decode_fetch))) == [(0, o) for o in range(4, 8)]
    assert buf.seek(A, 2)  # the application goes back between slices: offsets 8 and 9 are not returned
    assert buf.drain_arrow(4, decode_fetch) == []
    assert buf.fetchable(100) == [(A, 2)]
    lazily_fetched(buf, A, 2, [batch(0, 10)])
    assert _offsets(join(buf.drain_arrow(100, decode_fetch))) == [(0, o) for o in range(2, 10)]
    assert buf.position(A) == 10


def test_poll_after_poll_arrow_goes_on_from_the_position(decoder: str) -> None:
    from groupstream.client.consumer.arrow import decode_fetch

    buf = FetchBuffer()
    buf.assign([A])
    buf.seek(A, 1)
    buf.fetchable(100)
    lazily_fetched(buf, A, 1, [batch(0, 3), batch(3, 4, headers=True), batch(7, 3)])
    assert _offsets(buf.drain_arrow(3, decode_fetch)[0]) == [(0, 1), (0, 2)]
    got = buf.drain(100)
    assert [(r.offset, r.key, r.value, r.timestamp, r.headers) for r in got] == [
        (o, b"k%d" % o if o % 2 else None, b"%d" % o, 1_000 + o, (("h", b"x"),) if o < 7 else ()) for o in range(3, 10)
    ]
    assert buf.position(A) == 10


def test_a_batch_that_does_not_decode_ends_drain_arrow_after_the_rows_before_it(decoder: str) -> None:
    from groupstream.client.consumer.arrow import decode_fetch, join

    buf = FetchBuffer()
    buf.assign([A])
    buf.seek(A, 0)
    buf.fetchable(100)
    lazily_fetched(buf, A, 0, [batch(0, 5), batch(5, 5, corrupt=True), batch(10, 5)])
    assert _offsets(join(buf.drain_arrow(100, decode_fetch))) == [(0, o) for o in range(5)]
    assert isinstance(buf.take_error(), PeerProtocolError)
    assert buf.position(A) == 5 and buf.fetch_position(A) == 5
    assert buf.drain_arrow(100, decode_fetch) == []
    assert buf.fetchable(100) == [(A, 5)]


@pytest.mark.parametrize("arrow", [False, True])
def test_drains_finish_a_partitions_fetch_before_moving_on(arrow: bool) -> None:
    """A drain starts where the last one left a fetch part-way (Java's "next in line" fetch), so partitions
    run dry one after another and each is fetched again while the next is drained."""
    from groupstream.client.consumer.arrow import decode_fetch, join

    buf = FetchBuffer()
    buf.assign([A, B])
    buf.seek(A, 0)
    buf.seek(B, 0)
    buf.fetchable(100)
    lazily_fetched(buf, A, 0, [batch(o, 2) for o in range(0, 10, 2)])
    lazily_fetched(buf, B, 0, [batch(o, 2) for o in range(0, 10, 2)])
    seen: list[int] = []
    for _ in range(6):
        if arrow:
            seen += join(buf.drain_arrow(4, decode_fetch)).column("partition").to_pylist()
        else:
            seen += [r.partition for r in buf.drain(4)]
    assert sorted(seen) == [0] * 10 + [1] * 10
    assert seen in ([0] * 10 + [1] * 10, [1] * 10 + [0] * 10)  # not interleaved


def test_a_drain_that_makes_room_wakes_the_network_thread_once() -> None:
    """``on_room`` runs when a drain leaves a full partition (two fetches, as many records as ``fetchable``
    asks for) fetchable again, so its next fetch goes out now; not while it stays full, nor while a fetch of
    it is in flight."""
    from groupstream.client.consumer.arrow import decode_fetch

    buf = FetchBuffer()
    woken: list[int] = []
    buf.on_room = lambda: woken.append(buf.position(A) or 0)
    buf.assign([A])
    buf.seek(A, 0)
    buf.fetchable(10)
    lazily_fetched(buf, A, 0, [batch(o, 2) for o in range(0, 10, 2)])
    assert buf.fetchable(10) == [(A, 10)]  # one fetch held: A is fetched again at once
    lazily_fetched(buf, A, 10, [batch(o, 2) for o in range(10, 18, 2)])
    assert buf.fetchable(10) == []  # two fetches, 18 records: full
    buf.drain_arrow(4, decode_fetch)  # 14 left
    buf.drain_arrow(4, decode_fetch)  # 10 left, in two fetches: still full
    assert woken == []
    buf.drain_arrow(4, decode_fetch)  # the first fetch's last 2: one fetch left
    assert woken == [10]
    assert buf.fetchable(10) == [(A, 18)]  # in flight from here on
    buf.drain(4)
    buf.drain(100)
    assert woken == [10] and buf.position(A) == 18


def test_hold_leaves_candidates_for_a_later_fetch() -> None:
    buf = FetchBuffer()
    buf.PREFETCH_FETCHES = 1  # one fetch of 10 records fills A here
    buf.assign([A, B])
    buf.seek(A, 0)
    buf.seek(B, 0)
    buf.fetchable(100)
    fetched(buf, A, 0, 10)
    buf.fetch_failed(B)
    seen: list[tuple[list[tuple[TopicPartition, int]], list[TopicPartition]]] = []

    def hold(candidates: list[tuple[TopicPartition, int]], full: list[TopicPartition]) -> set[TopicPartition]:
        seen.append((candidates, full))
        return {B}

    assert buf.fetchable(10, hold) == []  # A's buffer is full; B is held back
    assert seen == [([(B, 0)], [A])]
    assert buf.fetchable(10) == [(B, 0)]  # B was not marked in flight


def test_a_deferred_wakeup_wakes_a_waiting_poll_only_when_released() -> None:
    buf = FetchBuffer()
    buf.assign([A])
    buf.seek(A, 0)
    buf.fetchable(100)
    woke = threading.Event()
    waiter = threading.Thread(target=lambda: (buf.wait(30.0), woke.set()))
    waiter.start()
    try:
        # the waiter must be inside wait(), else it would find the records there and never need waking
        wait_until(lambda: bool(buf._cond._waiters), 10, "the poller to wait")  # type: ignore[attr-defined]
        buf.fetch_done(CompletedFetch(A, 0, recs(A, 0, 3), 3), defer_wakeup=True)
        assert not woke.wait(0.3)  # the network thread has not sent its next fetch yet
        buf.wake_pollers()
        assert woke.wait(10.0)
    finally:
        buf.wakeup()
        waiter.join(10.0)
