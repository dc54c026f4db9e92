"""The sender request manager with a manual clock and no threads: requests out, responses in, by hand."""

from __future__ import annotations

from typing import Any

import pytest
from producer_kit import INIT, PRODUCE, RECORD_SIZE, add, batches_in, produce_response, reply, rig

from groupstream.client.errors import KafkaError
from groupstream.client.producer.errors import ProducerTimeoutError
from groupstream.protocol.error_codes import ErrorCode

E = ErrorCode
FULL = RECORD_SIZE  # batch_size=RECORD_SIZE: every record is a full batch of its own


def test_nothing_goes_before_the_producer_id_then_batches_are_stamped_in_order() -> None:
    r = rig(batch_size=2 * FULL)
    for _ in range(4):
        add(r.acc, "t", 0, 0)  # two full batches of two records
    (init,) = r.poll(0)
    assert init.api is INIT
    body = init.body_for(4)
    assert (body.transactional_id, body.producer_id, body.producer_epoch) == (None, -1, -1)
    assert not r.sender.poll(0).unsent_requests  # still waiting for the id
    reply(init, INIT.Response(error_code=0, producer_id=7, producer_epoch=3), 0)
    reqs = r.poll(0)
    assert [batches_in(q) for q in reqs] == [
        [("t", 0, 0, 2)],
        [("t", 0, 2, 2)],
    ]  # pipelined, sequences 0 and 2
    first = reqs[0].body_for(12)
    assert first.acks == -1 and first.transactional_id is None
    assert r.sender.in_flight(("t", 0)) == 2
    for q, base in zip(reqs, (100, 102), strict=True):
        reply(q, produce_response(q, base=base), 5)
    assert [(d.base_offset, d.error) for d in r.done] == [(100, None), (102, None)]
    assert r.idem is not None and r.idem.last_acknowledged(("t", 0)) == 3


def test_one_request_per_node_carries_one_batch_per_partition() -> None:
    r = rig({"t": [1, 1, 2]}, idempotent=False, batch_size=FULL)
    for p in (0, 1, 2):
        add(r.acc, "t", p, 0)
    reqs = r.poll(0)
    by_node = {q.node_id: sorted((t, p) for t, p, _, _ in batches_in(q)) for q in reqs}
    assert by_node == {1: [("t", 0), ("t", 1)], 2: [("t", 2)]}
    assert all(q.body_for(12).acks == -1 and q.expect_response for q in reqs)


def test_in_flight_requests_per_node_are_limited() -> None:
    r = rig(idempotent=False, batch_size=FULL, max_in_flight=2)
    for _ in range(4):
        add(r.acc, "t", 0, 0)
    reqs = r.poll(0)
    assert len(reqs) == 2
    assert r.poll(0) == []
    reply(reqs[0], produce_response(reqs[0]), 1)
    assert len(r.poll(1)) == 1


def test_without_idempotence_max_in_flight_one_keeps_partitions_in_order() -> None:
    r = rig({"t": [1, 1]}, idempotent=False, batch_size=FULL, max_in_flight=1)
    add(r.acc, "t", 0, 0)
    add(r.acc, "t", 0, 0)
    (q,) = r.poll(0)
    assert r.poll(0) == []
    reply(q, produce_response(q), 1)
    assert len(r.poll(1)) == 1


def test_a_retriable_error_retries_in_order_one_batch_at_a_time_with_the_same_sequences() -> None:
    r = rig(batch_size=FULL)
    r.grant_producer_id(0)
    for _ in range(3):
        add(r.acc, "t", 0, 0)
    reqs = r.poll(0)
    assert [batches_in(q)[0][2] for q in reqs] == [0, 1, 2]
    # the leader moved: the first is refused, the later two are out of order behind it
    reply(reqs[0], produce_response(reqs[0], {("t", 0): E.NOT_LEADER_OR_FOLLOWER}), 10)
    assert r.meta.update_requested
    reply(reqs[2], produce_response(reqs[2], {("t", 0): E.OUT_OF_ORDER_SEQUENCE_NUMBER}), 11)
    reply(reqs[1], produce_response(reqs[1], {("t", 0): E.OUT_OF_ORDER_SEQUENCE_NUMBER}), 12)
    assert r.done == [] and r.idem is not None and not r.idem.bump_required
    add(r.acc, "t", 0, 12)  # a new record arrives meanwhile
    assert r.poll(50) == []  # retry.backoff.ms=100 from the failure at 10
    result = r.sender.poll(50)
    assert result.next_poll_delay_ms == 60
    (again,) = r.poll(110)
    assert batches_in(again) == [("t", 0, 0, 1)]
    assert r.poll(150) == []  # nothing else of t-0 while the resent batch is out
    reply(again, produce_response(again, base=40), 150)
    (second,) = r.poll(250)  # backoff of the second failure (attempt 1: 100 ms from 12)
    assert batches_in(second) == [("t", 0, 1, 1)]
    reply(second, produce_response(second, base=41), 250)
    (third,) = r.poll(250)
    assert batches_in(third) == [("t", 0, 2, 1)]
    reply(third, produce_response(third, base=42), 251)
    (new,) = r.poll(251)  # recovered: the new batch follows with the next sequence
    assert batches_in(new) == [("t", 0, 3, 1)]
    reply(new, produce_response(new, base=43), 252)
    assert [d.base_offset for d in r.done] == [40, 41, 42, 43]


def test_a_disconnection_retries_every_batch_of_the_request() -> None:
    r = rig({"t": [1, 1]}, idempotent=False, batch_size=FULL)
    add(r.acc, "t", 0, 0)
    add(r.acc, "t", 1, 0)
    (q,) = r.poll(0)
    reply(q, None, 5, error=KafkaError(E.NETWORK_EXCEPTION, "connection lost"))
    assert r.done == [] and r.acc.records == 2
    (again,) = r.poll(105)
    assert sorted(p for _, p, _, _ in batches_in(again)) == [0, 1]


def test_unknown_producer_id_bumps_the_epoch_and_renumbers_from_zero() -> None:
    r = rig(batch_size=FULL)
    r.grant_producer_id(0, pid=7, epoch=0)
    add(r.acc, "t", 0, 0)
    add(r.acc, "t", 0, 0)
    add(r.acc, "t", 1, 0)
    reqs = r.poll(0)
    assert len(reqs) == 2  # t-0 seq 0 with t-1 seq 0, then t-0 seq 1
    first_t0 = next(q for q in reqs if ("t", 0, 0, 1) in batches_in(q))
    second_t0 = next(q for q in reqs if ("t", 0, 1, 1) in batches_in(q))
    reply(first_t0, produce_response(first_t0, {("t", 0): E.UNKNOWN_PRODUCER_ID, ("t", 1): 0}, base=9), 10)
    assert r.idem is not None and r.idem.bump_required
    assert r.poll(200) == []  # a request is still out: no bump yet, and nothing new is sent
    reply(second_t0, produce_response(second_t0, {("t", 0): E.OUT_OF_ORDER_SEQUENCE_NUMBER}), 20)
    (init,) = r.poll(200)
    assert init.api is INIT
    assert (init.body_for(3).producer_id, init.body_for(3).producer_epoch) == (7, 0)  # KIP-360
    assert (init.body_for(2).producer_id, init.body_for(2).producer_epoch) == (-1, -1)  # older: a new id
    reply(init, INIT.Response(error_code=0, producer_id=7, producer_epoch=1), 200)
    assert r.idem.producer_epoch == 1 and r.idem.epoch_changes == 1
    (q1,) = r.poll(200)
    assert batches_in(q1) == [("t", 0, 0, 1)]  # renumbered: the new epoch starts at 0
    reply(q1, produce_response(q1, base=50), 201)
    (q2,) = r.poll(201)
    assert batches_in(q2) == [("t", 0, 1, 1)]
    reply(q2, produce_response(q2, base=51), 202)
    assert sorted((d.batch.partition, d.base_offset) for d in r.done) == [(0, 50), (0, 51), (1, 9)]
    assert all(d.batch.producer_epoch == 1 for d in r.done if d.batch.partition == 0)


def test_out_of_order_for_the_next_unacknowledged_batch_means_lost_state() -> None:
    r = rig(batch_size=FULL)
    r.grant_producer_id(0)
    add(r.acc, "t", 0, 0)
    (q,) = r.poll(0)
    reply(q, produce_response(q), 1)
    add(r.acc, "t", 0, 1)
    (q,) = r.poll(1)
    reply(q, produce_response(q, {("t", 0): E.OUT_OF_ORDER_SEQUENCE_NUMBER}), 2)
    assert r.idem is not None and r.idem.bump_required


def test_message_too_large_fails_that_batch_only_and_closes_the_sequence_gap() -> None:
    r = rig(batch_size=FULL)
    r.grant_producer_id(0)
    add(r.acc, "t", 0, 0)
    add(r.acc, "t", 1, 0)
    (q,) = r.poll(0)
    reply(q, produce_response(q, {("t", 0): E.MESSAGE_TOO_LARGE}, base=3), 1)
    by_partition = {d.batch.partition: d for d in r.done}
    err = by_partition[0].error
    assert isinstance(err, KafkaError) and err.code == E.MESSAGE_TOO_LARGE and "t-0" in str(err)
    assert by_partition[1].error is None and by_partition[1].base_offset == 3
    assert r.idem is not None and r.idem.bump_required  # later batches of t-0 would be out of order


def test_a_non_retriable_error_fails_the_batch() -> None:
    r = rig(idempotent=False, batch_size=FULL)
    add(r.acc, "t", 0, 0)
    (q,) = r.poll(0)
    reply(q, produce_response(q, {("t", 0): E.TOPIC_AUTHORIZATION_FAILED}), 1)
    (d,) = r.done
    assert isinstance(d.error, KafkaError) and d.error.code == E.TOPIC_AUTHORIZATION_FAILED


def test_retries_run_out() -> None:
    r = rig(idempotent=False, batch_size=FULL, retries=1)
    add(r.acc, "t", 0, 0)
    (q,) = r.poll(0)
    reply(q, produce_response(q, {("t", 0): E.NOT_ENOUGH_REPLICAS}), 1)
    (q,) = r.poll(200)
    reply(q, produce_response(q, {("t", 0): E.NOT_ENOUGH_REPLICAS}), 201)
    (d,) = r.done
    assert isinstance(d.error, KafkaError) and d.error.code == E.NOT_ENOUGH_REPLICAS


def test_queued_batches_expire_at_the_delivery_timeout() -> None:
    r = rig({"t": [-1]}, idempotent=False, linger_ms=0, delivery_timeout_ms=1_000)
    add(r.acc, "t", 0, 0)
    result = r.sender.poll(0)
    assert not result.unsent_requests and result.next_poll_delay_ms == 1_000
    assert r.meta.update_requested  # no leader: ask again
    r.sender.poll(1_000)
    (d,) = r.done
    assert isinstance(d.error, ProducerTimeoutError) and "delivery.timeout.ms=1000" in str(d.error)


def test_a_retriable_error_after_the_delivery_timeout_is_final() -> None:
    r = rig(idempotent=False, batch_size=FULL, delivery_timeout_ms=1_000)
    add(r.acc, "t", 0, 0)
    (q,) = r.poll(0)
    reply(q, None, 1_000, error=KafkaError(E.REQUEST_TIMED_OUT, "no answer"))
    (d,) = r.done
    assert isinstance(d.error, ProducerTimeoutError) and "no answer" in str(d.error)


def test_acks_zero_completes_when_sent_without_offsets() -> None:
    r = rig(idempotent=False, batch_size=FULL, acks=0)
    add(r.acc, "t", 0, 0)
    (q,) = r.poll(0)
    assert not q.expect_response and q.body_for(12).acks == 0
    reply(q, None, 0)
    (d,) = r.done
    assert (d.base_offset, d.error) == (-1, None)


def test_topic_ids_allow_v13_and_names_answer_below() -> None:
    r = rig(idempotent=False, batch_size=FULL)
    add(r.acc, "t", 0, 0)
    (q,) = r.poll(0)
    assert q.max_version is None
    tid = r.meta.topic_id("t")
    v13 = q.body_for(13).topic_data[0]
    assert v13.topic_id == tid
    R: Any = PRODUCE.Response
    PR = R.TopicProduceResponse.PartitionProduceResponse
    body = R(
        responses=[
            R.TopicProduceResponse(
                topic_id=tid, partition_responses=[PR(index=0, error_code=0, base_offset=77)]
            )
        ]
    )
    reply(q, body, 1, version=13)
    assert r.done[0].base_offset == 77


def test_an_unrecoverable_init_producer_id_error_fails_everything() -> None:
    r = rig()
    add(r.acc, "t", 0, 0)
    (init,) = r.poll(0)
    reply(init, INIT.Response(error_code=E.CLUSTER_AUTHORIZATION_FAILED), 0)
    r.poll(1)
    (d,) = r.done
    assert isinstance(d.error, KafkaError) and d.error.code == E.CLUSTER_AUTHORIZATION_FAILED


def test_init_producer_id_is_retried_after_a_retriable_error() -> None:
    r = rig()
    add(r.acc, "t", 0, 0)
    (init,) = r.poll(0)
    reply(init, None, 10, error=KafkaError(E.NETWORK_EXCEPTION, "down"))
    assert r.idem is not None and r.idem.poll(50).next_poll_delay_ms == 60
    (again,) = r.idem.poll(110).unsent_requests
    assert again.api is INIT


def test_closing_fails_what_is_queued() -> None:
    r = rig(idempotent=False, linger_ms=10_000)
    add(r.acc, "t", 0, 0)
    r.sender.begin_close(0)
    assert r.sender.has_pending_work()
    (q,) = r.poll(0)  # closing: no linger
    r.sender.fail_pending(RuntimeError("closed"))
    reply(q, None, 1, error=KafkaError(E.NETWORK_EXCEPTION, "closing"))
    (d,) = r.done
    assert isinstance(d.error, KafkaError)  # in flight at close: failed, not retried
    assert not r.sender.has_pending_work()


@pytest.mark.parametrize("code", [E.UNKNOWN_PRODUCER_ID, E.OUT_OF_ORDER_SEQUENCE_NUMBER])
def test_answers_from_before_a_bump_do_not_bump_again(code: int) -> None:
    r = rig(batch_size=FULL)
    r.grant_producer_id(0, epoch=0)
    add(r.acc, "t", 0, 0)
    (q,) = r.poll(0)
    assert r.idem is not None
    r.idem._set_producer(7, 1)  # the epoch moved on while this request was out
    reply(q, produce_response(q, {("t", 0): code}), 1)
    assert not r.idem.bump_required and r.done == []


def test_each_batch_is_checksummed_once_on_its_way_out(monkeypatch: pytest.MonkeyPatch) -> None:
    from groupstream.client.producer import batch as batch_module

    sizes: list[int] = []
    real = batch_module.patch_crc

    def counting(buf: bytearray, pos: int, size: int) -> int:
        sizes.append(size)
        return real(buf, pos, size)

    monkeypatch.setattr(batch_module, "patch_crc", counting)
    for idempotent in (True, False):
        sizes.clear()
        r = rig({"t": [1, 1]}, idempotent=idempotent, batch_size=FULL)
        if idempotent:
            r.grant_producer_id(0)
        for p in (0, 1, 1):
            add(r.acc, "t", p, 0)
        batches = [b for q in r.poll(0) for b in batches_in(q)]
        assert len(batches) == 3 and len(sizes) == 3  # stamped and closed: one CRC each
