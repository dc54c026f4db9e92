"""The accumulator with a manual clock: linger and size triggers, draining, retries in order, expiry."""

from __future__ import annotations

from producer_kit import RECORD_SIZE, accumulator, add

from groupstream.client.producer.accumulator import RecordAccumulator
from groupstream.protocol.records import RecordBatch
from groupstream.protocol.records.batch_header import HEADER_SIZE

LEADERS = {("t", 0): 1, ("t", 1): 1, ("t", 2): 2, ("u", 0): 2}


def leader(topic: str, partition: int) -> int | None:
    return LEADERS.get((topic, partition))


def anything(_: object) -> bool:
    return True


def test_a_partial_batch_waits_for_linger() -> None:
    acc = accumulator(batch_size=1000, linger_ms=10)
    add(acc, "t", 0, 100)
    add(acc, "t", 0, 105)
    check = acc.ready(105, leader)
    assert check.nodes == set() and check.next_check_ms == 5  # linger counts from the batch's first record
    assert acc.ready(109, leader).nodes == set()
    assert acc.ready(110, leader).nodes == {1}


def test_a_full_batch_is_ready_at_once_and_a_new_one_starts() -> None:
    acc = accumulator(batch_size=3 * RECORD_SIZE, linger_ms=10_000)
    for _ in range(3):
        add(acc, "t", 0, 0)
    assert acc.ready(0, leader).nodes == {1}  # batch.size reached
    add(acc, "t", 0, 0)
    drained = acc.drain(0, [1], leader, 1_000_000, anything)
    (batch,) = drained[1]
    assert batch.record_count == 3 and len(RecordBatch(batch.close())) == 3
    assert acc.records == 1 and acc.ready(0, leader).nodes == set()


def test_a_second_batch_makes_the_first_sendable() -> None:
    acc = accumulator(batch_size=2 * RECORD_SIZE + 1, linger_ms=10_000)
    add(acc, "t", 0, 0)
    add(acc, "t", 0, 0)
    assert acc.ready(0, leader).nodes == set()  # 60 of 61 bytes: not full yet
    add(acc, "t", 0, 0)  # does not fit: a new batch, the first is sealed
    assert acc.ready(0, leader).nodes == {1}


def test_a_record_larger_than_batch_size_gets_a_batch_of_its_own() -> None:
    acc = accumulator(batch_size=10, linger_ms=10_000)
    add(acc, "t", 0, 0)
    assert acc.ready(0, leader).nodes == {1}
    (batch,) = acc.drain(0, [1], leader, 1_000_000, anything)[1]
    assert batch.record_count == 1


def test_flush_and_close_make_everything_sendable() -> None:
    acc = accumulator(batch_size=1000, linger_ms=10_000)
    add(acc, "t", 0, 0)
    acc.begin_flush()
    assert acc.ready(0, leader).nodes == {1}
    acc.end_flush()
    assert acc.ready(0, leader).nodes == set()
    acc.begin_close()
    assert acc.ready(0, leader).nodes == {1}


def test_unknown_leaders_are_reported_by_topic() -> None:
    acc = accumulator(linger_ms=0)
    add(acc, "nowhere", 0, 0)
    add(acc, "t", 2, 0)
    check = acc.ready(0, leader)
    assert check.unknown_leaders == {"nowhere"} and check.nodes == {2}


def test_drain_takes_one_batch_per_partition_of_the_node_even_if_not_ready() -> None:
    acc = accumulator(batch_size=RECORD_SIZE, linger_ms=10_000)
    add(acc, "t", 0, 0)
    add(acc, "t", 0, 0)  # two full batches on t-0
    add(acc, "t", 1, 0)  # t-1: one full batch
    add(acc, "t", 2, 0)  # leader 2: not drained for node 1
    assert acc.ready(0, leader).nodes == {1, 2}
    drained = acc.drain(0, [1], leader, 1_000_000, anything)
    assert sorted(b.tp for b in drained[1]) == [("t", 0), ("t", 1)]
    assert acc.records == 2


def test_drain_respects_max_request_size_and_rotates_the_start() -> None:
    acc = accumulator(batch_size=RECORD_SIZE, linger_ms=0)
    for p in (0, 1):
        for _ in range(3):
            add(acc, "t", p, 0)
    assert acc.drain(0, [1], leader, 10**9, lambda b: False) == {}
    assert acc.records == 6  # may_send refused everything: nothing left its queue
    first = acc.drain(0, [1], leader, 1, anything)[1]  # one batch always goes, even above the limit
    second = acc.drain(0, [1], leader, 1, anything)[1]
    assert len(first) == len(second) == 1
    assert first[0].partition != second[0].partition  # the next drain starts at the next partition


def test_retries_go_back_in_send_order_before_newer_batches() -> None:
    acc = accumulator(batch_size=RECORD_SIZE, linger_ms=0)
    for _ in range(3):
        add(acc, "t", 0, 0)
    sent = []
    for order in range(3):
        (b,) = acc.drain(0, [1], leader, 10**9, anything)[1]
        b.drain_order = order
        sent.append(b)
    add(acc, "t", 0, 0)  # a new batch queued meanwhile
    acc.reenqueue(sent[2], 10, 100)
    acc.reenqueue(sent[0], 10, 100)
    acc.reenqueue(sent[1], 10, 100)
    assert [b.drain_order for b in acc.queued(("t", 0))] == [0, 1, 2, -1]
    check = acc.ready(50, leader)
    assert check.nodes == set() and check.next_check_ms == 60  # the head is backing off
    assert acc.drain(50, [1], leader, 10**9, anything) == {}
    assert acc.ready(110, leader).nodes == {1}
    (b,) = acc.drain(110, [1], leader, 10**9, anything)[1]
    assert b is sent[0]


def test_batches_past_the_delivery_timeout_expire() -> None:
    acc = accumulator(batch_size=RECORD_SIZE, linger_ms=10_000, delivery_timeout_ms=1_000)
    add(acc, "t", 0, 0)
    add(acc, "t", 0, 500)
    add(acc, "u", 0, 700)
    assert acc.next_expiry_ms(600) == 400
    assert acc.expire(999) == []
    expired = acc.expire(1_000)
    assert [(b.tp, b.created_ms) for b in expired] == [(("t", 0), 0)]
    assert [(b.tp, b.created_ms) for b in acc.expire(1_700)] == [(("t", 0), 500), (("u", 0), 700)]
    assert not acc.has_batches() and acc.records == 0


def test_abort_all_returns_everything() -> None:
    acc = accumulator()
    add(acc, "t", 0, 0)
    add(acc, "u", 0, 0)
    assert len(acc.abort_all()) == 2 and not acc.has_batches()


def test_draining_an_open_batch_seals_it_and_the_next_record_opens_another() -> None:
    acc = accumulator(batch_size=1000, linger_ms=0)
    first, _ = add(acc, "t", 0, 0)
    route = acc.routes["t"]
    assert route.open[0] is first and route.bufs[0] is first.buf
    (drained,) = acc.drain(0, [1], leader, 10**9, anything)[1]
    assert drained is first and first.sealed and not first.closed and route.open[0] is None
    second, index = add(acc, "t", 0, 1)
    assert second is not first and index == 0 and route.open[0] is second


def test_a_full_batch_grows_only_while_a_batch_ahead_of_it_waits() -> None:
    capacity = HEADER_SIZE + 2 * RECORD_SIZE
    most = HEADER_SIZE + 20 * RECORD_SIZE
    acc = RecordAccumulator(
        batch_size=capacity, linger_ms=10_000, compression=0, delivery_timeout_ms=10_000, max_capacity=most
    )
    taken: list[int] = []

    def take(n: int) -> bool:
        taken.append(n)
        return True

    for _ in range(2):
        add(acc, "t", 0, 0)
    route = acc.routes["t"]
    assert not acc.grow(route, 0, take)  # the open batch is next to go: nothing is gained by waiting
    add(acc, "t", 0, 0)  # a second batch; the first waits ahead of it
    add(acc, "t", 0, 0)
    second = route.open[0]
    assert second is not None and second.record_count == 2
    assert acc.grow(route, 0, take) and second.capacity == 2 * capacity  # doubled
    assert route.limits[0] == second.capacity and second.memory == taken[0] == capacity
    for _ in range(4):
        add(acc, "t", 0, 0)
    assert second.record_count == 6 and route.open[0] is second  # it took the records instead of a new batch
    assert acc.grow(route, 0, take) and second.capacity == 4 * capacity  # doubled again
    assert acc.grow(route, 0, take) and second.capacity == most  # up to the maximum
    assert not acc.grow(route, 0, take) and taken == [capacity, 2 * capacity, most - 4 * capacity]
    other = RecordAccumulator(
        batch_size=capacity, linger_ms=10_000, compression=0, delivery_timeout_ms=10_000, max_capacity=most
    )
    for _ in range(3):
        add(other, "t", 0, 0)  # a second batch behind the first
    assert not other.grow(other.routes["t"], 0, lambda n: False)  # buffer.memory has no room: no growth
    assert other.grow(other.routes["t"], 0, lambda n: True)


def test_outstanding_counts_queued_in_flight_and_handed_over_records_until_completed() -> None:
    acc = accumulator(batch_size=RECORD_SIZE, linger_ms=0)
    add(acc, "t", 0, 0)
    add(acc, "t", 0, 0)
    with acc.lock:
        acc.pending += 1  # a record waiting for its topic's metadata
    assert acc.outstanding() == 3
    (b,) = acc.drain(0, [1], leader, 10**9, anything)[1]
    assert acc.outstanding() == 3 and acc.records == 1  # in flight still counts
    acc.completed(b)
    assert acc.outstanding() == 2
