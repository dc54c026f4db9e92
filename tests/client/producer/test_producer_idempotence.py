"""Sequence bookkeeping: stamping, wrap-around, acknowledgements, and what the stamped bytes say."""

from __future__ import annotations

from groupstream.client.producer.batch import ProducerBatch
from groupstream.client.producer.encode import append_record
from groupstream.client.producer.idempotence import SEQUENCE_MODULUS, IdempotenceManager, add_sequence
from groupstream.protocol.records import RecordBatch, validate_batch


def batch(records: int, partition: int = 0) -> ProducerBatch:
    b = ProducerBatch("t", partition, 0, 0, 10**6)
    for i in range(records):
        assert append_record(b.buf, 1_000 + i, None, b"v%d" % i, None, b.capacity) == i
    b.seal()
    return b


def manager() -> IdempotenceManager:
    m = IdempotenceManager(retry_backoff_ms=100, retry_backoff_max_ms=1_000, in_flight_batches=lambda: 0)
    m._set_producer(42, 3)
    return m


def test_sequences_advance_by_record_count_per_partition() -> None:
    m = manager()
    a, b, c = batch(3), batch(2), batch(5, partition=1)
    for x in (a, b, c):
        m.assign(x)
    assert (a.base_sequence, b.base_sequence, c.base_sequence) == (0, 3, 0)
    assert m.next_sequence(("t", 0)) == 5 and m.next_sequence(("t", 1)) == 5


def test_stamping_rewrites_the_header_and_keeps_the_crc_valid() -> None:
    m = manager()
    b = batch(3)
    m.assign(b)
    data = bytes(b.data or b"")
    header = validate_batch(data, deep=True)  # CRC recomputed over the new producer fields
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (42, 3, 0)
    b.stamp(42, 4, 17)  # an epoch bump renumbers the same bytes
    again = RecordBatch(bytes(b.data or b""))
    assert again.validate_crc() and (again.producer_epoch, again.base_sequence) == (4, 17)
    assert [r.value for r in again.records()] == [b"v0", b"v1", b"v2"]


def test_sequences_wrap_from_int32_max_to_zero() -> None:
    assert add_sequence(SEQUENCE_MODULUS - 2, 3) == 1
    m = manager()
    m._partition(("t", 0)).next_sequence = SEQUENCE_MODULUS - 1
    b = batch(2)
    m.assign(b)
    assert b.base_sequence == SEQUENCE_MODULUS - 1 and m.next_sequence(("t", 0)) == 1
    m.acknowledged(b)
    assert m.last_acknowledged(("t", 0)) == 0


def test_next_unacknowledged_follows_the_last_acknowledgement() -> None:
    m = manager()
    a, b = batch(2), batch(2)
    m.assign(a)
    m.assign(b)
    assert m.is_next_unacknowledged(a) and not m.is_next_unacknowledged(b)
    m.acknowledged(a)
    assert m.is_next_unacknowledged(b)


def test_a_new_epoch_resets_every_partition() -> None:
    m = manager()
    m.assign(batch(4))
    m.assign(batch(4, partition=1))
    renumbered: list[bool] = []
    m.on_new_epoch = lambda: renumbered.append(True)
    m.request_bump("test")
    assert not m.ready
    m._set_producer(42, 4)
    assert m.ready and renumbered == [True]
    assert m.next_sequence(("t", 0)) == 0 and m.next_sequence(("t", 1)) == 0


def test_the_epoch_at_its_maximum_asks_for_a_new_id() -> None:
    m = IdempotenceManager(retry_backoff_ms=1, retry_backoff_max_ms=1, in_flight_batches=lambda: 0)
    m._set_producer(42, 32767)
    m.request_bump("test")
    (req,) = m.poll(0).unsent_requests
    assert req.body_for(4).producer_id == -1


def test_no_bump_while_batches_are_in_flight() -> None:
    out = [2]
    m = IdempotenceManager(retry_backoff_ms=1, retry_backoff_max_ms=1, in_flight_batches=lambda: out[0])
    m._set_producer(1, 0)
    m.request_bump("test")
    assert not m.poll(0).unsent_requests
    out[0] = 0
    assert len(m.poll(0).unsent_requests) == 1
    assert not m.poll(0).unsent_requests  # one at a time
