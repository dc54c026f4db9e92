"""What decides how soon a consumer's first records come and that no fetch holds others back: metadata for an
assignment asked at once, offset lookups retried when metadata arrives, and no lone fetch of caught-up
partitions while a partition of the same leader waits for buffer room. Pure objects, manual clock."""

from __future__ import annotations

from typing import Any

from groupstream.assignment.types import TopicPartition
from groupstream.client.consumer.config import ConsumerConfig
from groupstream.client.consumer.fetch_buffer import CompletedFetch, FetchBuffer
from groupstream.client.consumer.fetcher import Fetcher
from groupstream.client.consumer.offsets_manager import EARLIEST, OffsetsManager
from groupstream.client.consumer.records import ConsumerRecord
from groupstream.client.net.metadata import MetadataCache
from groupstream.client.net.requests import ClientResponse, UnsentRequest
from groupstream.protocol.messages import by_name

R: Any = by_name("Metadata").Response
A, B, C = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("u", 0)


def metadata_response(leaders: dict[str, list[int]]) -> Any:
    P = R.MetadataResponseTopic.MetadataResponsePartition
    topics = [R.MetadataResponseTopic(error_code=0, name=name, partitions=[
        P(error_code=0, partition_index=i, leader_id=lead, replica_nodes=[lead], isr_nodes=[lead])
        for i, lead in enumerate(ls)]) for name, ls in leaders.items()]  # fmt: skip
    brokers = [R.MetadataResponseBroker(node_id=n, host="h", port=9000 + n) for n in (1, 2)]
    return R(brokers=brokers, cluster_id="c", controller_id=1, topics=topics)


def answer(req: UnsentRequest, body: Any, now_ms: int) -> None:
    req.handler(ClientResponse(req, 1, 12, body, None, now_ms))


def test_topics_of_an_assignment_are_asked_for_without_waiting_out_the_backoff() -> None:
    cache = MetadataCache(retry_backoff_ms=100)
    first = cache.poll(0).unsent_requests[0]  # the client starts: brokers, no topics yet
    cache.set_topics({"t"})  # assign() while that request is out
    answer(first, metadata_response({}), 2)
    assert len(cache.poll(3).unsent_requests) == 1  # at once, as Java's requestUpdateForNewTopics
    cache.request_update()
    assert not cache.poll(4).unsent_requests  # other updates keep the backoff


def test_a_lookup_that_lacked_a_leader_retries_when_metadata_arrives() -> None:
    cache = MetadataCache(retry_backoff_ms=100)
    buffer = FetchBuffer()
    offsets = OffsetsManager(buffer, cache, None, "earliest", 0, 100, 30_000)
    found: list[Any] = []
    offsets.lookup({A: EARLIEST}, 0, 30_000, lambda f, e: found.append((f, e)))
    assert offsets.poll(0).unsent_requests == []  # no leader known yet
    answer(cache.poll(1).unsent_requests[0], metadata_response({"t": [1]}), 5)
    assert len(offsets.poll(6).unsent_requests) == 1  # not at 100: the metadata came


def test_caught_up_partitions_are_not_fetched_alone_while_one_of_their_leader_waits_for_room() -> None:
    cache = MetadataCache()
    cache.apply(metadata_response({"t": [1, 1], "u": [2]}), 12, 0)
    buffer = FetchBuffer()
    buffer.PREFETCH_FETCHES = 1  # A's one fetch of 20 records fills it here
    fetcher = Fetcher(ConsumerConfig.from_mapping({"bootstrap.servers": "h:9", "max.poll.records": 10}), buffer,
                      cache, lambda tp, o: None)  # fmt: skip
    buffer.assign([A, B, C])
    for tp in (A, B, C):
        buffer.seek(tp, 0)
    fetcher._log_end.update({A: 50, B: 7, C: 3})  # what the last fetch said
    buffer.seek(B, 7)
    buffer.seek(C, 3)
    buffer.fetchable(100)  # A's fetch: 20 records, more than max.poll.records
    buffer.fetch_done(CompletedFetch(A, 0, [ConsumerRecord("t", 0, o, 0, None, b"", ()) for o in range(20)], 20))
    buffer.fetch_failed(B)
    buffer.fetch_failed(C)
    nodes = [r.node_id for r in fetcher.poll(0).unsent_requests]
    assert nodes == [2]  # C (leader 2) is fetched; B, caught up, would wait alone at leader 1
    assert buffer.fetchable(10) == [(B, 7)]  # B was left for later, not marked in flight


def _fetch_answer(req: UnsentRequest, high_watermark: int, now_ms: int) -> None:
    """An empty answer (no records) for every partition of ``req``, with this log end."""
    F: Any = by_name("Fetch").Response
    topics = [F.FetchableTopicResponse(topic=t.topic, partitions=[
        F.FetchableTopicResponse.PartitionData(partition_index=p.partition, high_watermark=high_watermark,
                                               last_stable_offset=high_watermark, records=b"")
        for p in t.partitions]) for t in req.body.topics]  # fmt: skip
    answer(req, F(responses=topics), now_ms)


def _parts(req: UnsentRequest) -> list[int]:
    return [p.partition for t in req.body.topics for p in t.partitions]


def test_two_fetches_fly_per_leader_only_while_both_return_at_once() -> None:
    """Issue 14: with records left in every partition (by the last fetch's log end) an idle leader gets two
    fetches, halves of its partitions, and each is refilled while the other is in flight; a fetch that may
    wait at the broker (caught-up partitions, or log ends not known yet) goes only to an idle leader and flies
    alone: responses on a connection come in order, so nothing may queue behind one held for
    ``fetch.max.wait.ms``, and it must not hold back the next fetch of partitions that have records."""
    cache = MetadataCache()
    cache.apply(metadata_response({"t": [1, 1, 1, 1]}), 12, 0)
    parts = [TopicPartition("t", p) for p in range(4)]
    buffer = FetchBuffer()
    fetcher = Fetcher(ConsumerConfig.from_mapping({"bootstrap.servers": "h:9"}), buffer, cache, lambda tp, o: None)
    buffer.assign(parts)
    for tp in parts:
        buffer.seek(tp, 0)
    first = fetcher.poll(0).unsent_requests
    assert [_parts(r) for r in first] == [[0, 1, 2, 3]]  # no log end known: one fetch
    assert fetcher.poll(1).unsent_requests == []  # nothing behind it
    _fetch_answer(first[0], 100, 2)  # records left everywhere (positions 0, log end 100)
    halves = fetcher.poll(3).unsent_requests
    assert [_parts(r) for r in halves] == [[0, 1], [2, 3]]
    _fetch_answer(halves[0], 100, 4)
    refill = fetcher.poll(5).unsent_requests
    assert [_parts(r) for r in refill] == [[0, 1]]  # while [2, 3] is in flight
    assert fetcher.poll(6).unsent_requests == []  # two in flight: no third
    _fetch_answer(halves[1], 0, 7)  # 2 and 3 caught up (log end 0)
    assert fetcher.poll(8).unsent_requests == []  # it may be held at the broker: not while [0, 1] flies
    _fetch_answer(refill[0], 0, 9)  # 0 and 1 caught up too
    alone = fetcher.poll(10).unsent_requests
    assert [_parts(r) for r in alone] == [[0, 1, 2, 3]]  # to the idle node, alone
    assert fetcher.poll(11).unsent_requests == []  # nothing behind the fetch that may be held
    _fetch_answer(alone[0], 5, 12)  # records arrived meanwhile
    assert [_parts(r) for r in fetcher.poll(13).unsent_requests] == [[0, 1], [2, 3]]


def test_partitions_without_a_position_are_reset_by_one_lookup() -> None:
    """One ListOffsets for all of a leader's partitions to reset (one a partition made the first fetch carry
    only those answered first, and the rest wait a round trip)."""
    cache = MetadataCache()
    cache.apply(metadata_response({"t": [1, 1], "u": [1]}), 12, 0)
    buffer = FetchBuffer()
    offsets = OffsetsManager(buffer, cache, None, "earliest", 0, 100, 30_000)
    buffer.assign([A, B, C])
    requests = offsets.poll(0).unsent_requests
    assert [r.node_id for r in requests] == [1]
    assert offsets.poll(1).unsent_requests == []
