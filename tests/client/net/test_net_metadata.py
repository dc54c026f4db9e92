"""`MetadataCache` as a request manager with a manual clock: when it asks, what it learns, how it backs off."""

from __future__ import annotations

import uuid
from typing import Any

from groupstream.client.errors import KafkaError
from groupstream.client.net.metadata import MetadataCache
from groupstream.client.net.requests import ClientResponse, UnsentRequest
from groupstream.protocol.error_codes import ErrorCode
from groupstream.protocol.messages import by_name

METADATA = by_name("Metadata")
R: Any = METADATA.Response
TID = uuid.UUID("11111111-2222-3333-4444-555555555555")


def topic(name: str, leaders: list[int], error: int = 0, topic_id: uuid.UUID = TID) -> Any:
    P = R.MetadataResponseTopic.MetadataResponsePartition
    parts = [P(error_code=0, partition_index=i, leader_id=lead, replica_nodes=[lead], isr_nodes=[lead])
             for i, lead in enumerate(leaders)]  # fmt: skip
    return R.MetadataResponseTopic(error_code=error, name=name, topic_id=topic_id, partitions=parts)


def response(*topics: Any, brokers: tuple[int, ...] = (1, 2)) -> Any:
    bs = [R.MetadataResponseBroker(node_id=b, host=f"h{b}", port=9000 + b) for b in brokers]
    return R(brokers=bs, cluster_id="c", controller_id=brokers[0], topics=list(topics))


def answer(
    req: UnsentRequest, body: Any, now_ms: int, version: int = 12, error: BaseException | None = None
) -> None:
    req.handler(ClientResponse(req, 1, version, None if error else body, error, now_ms))


def only_request(cache: MetadataCache, now_ms: int) -> UnsentRequest:
    result = cache.poll(now_ms)
    assert len(result.unsent_requests) == 1
    return result.unsent_requests[0]


def test_first_poll_asks_for_the_tracked_topics_and_waits_for_the_answer() -> None:
    cache = MetadataCache(max_age_ms=10_000, retry_backoff_ms=100)
    cache.add_topics(["b", "a"])
    req = only_request(cache, 0)
    body = req.body_for(12)
    assert [t.name for t in body.topics] == ["a", "b"]
    assert body.allow_auto_topic_creation is False
    assert cache.poll(1).unsent_requests == ()  # one at a time
    answer(req, response(topic("a", [1, 2]), topic("b", [2])), 5)
    assert cache.partition_count("a") == 2 and cache.partition_count("b") == 1
    assert cache.leader("a", 1) == 2 and cache.leader("b", 0) == 2
    assert cache.topic_id("a") == TID
    assert cache.available_partitions("a") == [0, 1]
    assert cache.broker(2) is not None and cache.broker(2).port == 9002  # type: ignore[union-attr]
    assert cache.version == 1
    # nothing more until the data is metadata.max.age.ms old
    result = cache.poll(6)
    assert result.unsent_requests == () and result.next_poll_delay_ms == 9_999
    assert len(cache.poll(10_005).unsent_requests) == 1


def test_v0_asks_for_all_topics_with_an_empty_list_and_v1_with_null() -> None:
    cache = MetadataCache()
    cache.want_all_topics()
    req = only_request(cache, 0)
    assert req.body_for(0).topics == []
    assert req.body_for(1).topics is None
    assert req.body_for(4).allow_auto_topic_creation is False
    assert req.body_for(3).allow_auto_topic_creation is True  # below v4 the field does not exist


def test_an_unknown_topic_is_recorded_and_asked_again_after_the_backoff() -> None:
    cache = MetadataCache(retry_backoff_ms=100)
    cache.add_topics(["gone"])
    answer(
        only_request(cache, 0), response(topic("gone", [], error=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)), 10
    )
    assert cache.partition_count("gone") is None
    assert cache.topic_errors["gone"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    result = cache.poll(50)
    assert result.unsent_requests == () and result.next_poll_delay_ms == 60
    assert len(cache.poll(110).unsent_requests) == 1


def test_a_topic_missing_from_the_answer_counts_as_unknown() -> None:
    cache = MetadataCache()
    cache.add_topics(["x"])
    answer(only_request(cache, 0), response(), 0)
    assert cache.topic_errors == {"x": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}


def test_a_partition_without_leader_keeps_refreshing() -> None:
    cache = MetadataCache(retry_backoff_ms=100)
    cache.add_topics(["t"])
    answer(only_request(cache, 0), response(topic("t", [1, -1])), 0)
    assert cache.leader("t", 1) is None and cache.available_partitions("t") == [0]
    assert cache.update_requested
    answer(only_request(cache, 100), response(topic("t", [1, 2])), 100)
    assert cache.leader("t", 1) == 2 and not cache.update_requested


def test_a_failed_request_is_retried_after_the_backoff() -> None:
    cache = MetadataCache(retry_backoff_ms=250)
    req = only_request(cache, 0)
    answer(req, None, 40, error=KafkaError(ErrorCode.NETWORK_EXCEPTION, "gone"))
    assert cache.poll(100).next_poll_delay_ms == 190
    assert len(cache.poll(290).unsent_requests) == 1


def test_an_update_requested_while_one_is_out_is_not_lost() -> None:
    cache = MetadataCache(retry_backoff_ms=0)
    cache.add_topics(["t"])
    req = only_request(cache, 0)
    cache.request_update()  # a leader moved while the request was out
    answer(req, response(topic("t", [1])), 5)
    assert cache.update_requested
    assert len(cache.poll(5).unsent_requests) == 1


def test_adding_a_known_topic_does_not_ask_again_and_a_new_one_does_after_the_backoff() -> None:
    cache = MetadataCache(max_age_ms=0, retry_backoff_ms=100)  # max age 0: no periodic refresh
    cache.add_topics(["t"])
    answer(only_request(cache, 0), response(topic("t", [1])), 0)
    cache.add_topics(["t"])
    assert cache.poll(1) == type(cache.poll(1))()  # nothing to do, no deadline
    cache.add_topics(["u"])
    assert cache.poll(1).next_poll_delay_ms == 99  # as Java: no two updates within retry.backoff.ms
    assert len(cache.poll(100).unsent_requests) == 1


def test_a_new_topic_asked_for_at_once_skips_the_backoff_but_not_after_an_answer_without_it() -> None:
    """A producer's record for a new topic waits for it: Java's requestUpdateForNewTopics asks at once."""
    cache = MetadataCache(max_age_ms=0, retry_backoff_ms=100)
    cache.add_topics(["t"])
    answer(only_request(cache, 0), response(topic("t", [1])), 0)
    cache.add_topics(["u"], at_once=True)
    req = only_request(cache, 1)
    assert [t.name for t in req.body_for(12).topics] == ["t", "u"]
    answer(req, response(topic("t", [1])), 2)  # "u" does not exist (yet): no request storm
    assert cache.topic_errors == {"u": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert cache.poll(3).next_poll_delay_ms == 99


def test_leaders_not_among_the_brokers_are_unknown() -> None:
    cache = MetadataCache()
    cache.add_topics(["t"])
    answer(only_request(cache, 0), response(topic("t", [7]), brokers=(1,)), 0)
    assert cache.leader("t", 0) is None


def test_zero_topic_id_means_none() -> None:
    cache = MetadataCache()
    cache.add_topics(["t"])
    answer(only_request(cache, 0), response(topic("t", [1], topic_id=uuid.UUID(int=0))), 0)
    assert cache.topic_id("t") is None
    cache.apply(response(topic("t", [1])), 9, 1)  # below v10 there are no topic ids at all
    assert cache.topic_id("t") is None
