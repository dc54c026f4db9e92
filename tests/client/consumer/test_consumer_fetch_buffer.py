"""The fetch buffer's rules, without threads: which fetches are kept, what poll returns, positions, pauses."""

from __future__ import annotations

from groupstream.assignment.types import TopicPartition
from groupstream.client.consumer.fetch_buffer import CompletedFetch, FetchBuffer
from groupstream.client.consumer.records import ConsumerRecord

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
