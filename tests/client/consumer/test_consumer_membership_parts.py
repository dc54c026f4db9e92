"""The small pieces of the KIP-848 member on their own: sent-fields tracking, the heartbeat schedule and the
metadata adapter that names topic ids."""

from __future__ import annotations

import uuid
from typing import Any

from groupstream.client.consumer.consumer_membership_metadata import MetadataTopicNames
from groupstream.client.consumer.heartbeat_fields import (
    CONSUMER_GROUP_HEARTBEAT,
    HeartbeatFieldTracker,
    Subscription,
    TopicIdPartition,
)
from groupstream.client.consumer.heartbeat_schedule import HeartbeatSchedule
from groupstream.client.net.metadata import MetadataCache
from groupstream.client.net.requests import ClientResponse
from groupstream.protocol.messages import by_name

MR: Any = by_name("Metadata").Response
T1 = uuid.UUID("00000000-0000-0000-0000-000000000001")
T2 = uuid.UUID("00000000-0000-0000-0000-000000000002")


def tracker(**kw: Any) -> HeartbeatFieldTracker:
    settings: dict[str, Any] = {
        "instance_id": None,
        "rack_id": None,
        "rebalance_timeout_ms": 5_000,
        "server_assignor": None,
    }
    settings.update(kw)
    return HeartbeatFieldTracker("g", **settings)


def test_first_heartbeat_is_full_then_only_changes_then_full_after_reset() -> None:
    t = tracker(instance_id="i", rack_id="r", server_assignor="range")
    sub = Subscription(frozenset({"b", "a"}))
    owned = frozenset({TopicIdPartition(T2, 1), TopicIdPartition(T1, 0), TopicIdPartition(T2, 0)})
    full = t.build("m", 3, sub, owned)
    assert (full.member_id, full.member_epoch, full.instance_id) == ("m", 3, "i")
    assert full.rack_id == "r" and full.rebalance_timeout_ms == 5_000 and full.server_assignor == "range"
    assert full.subscribed_topic_names == ("a", "b") and full.subscribed_topic_regex == ""
    body = full.body(1)
    CONSUMER_GROUP_HEARTBEAT.encode_request(body, 1)
    assert [(tp.topic_id, tp.partitions) for tp in body.topic_partitions] == [(T1, [0]), (T2, [0, 1])]

    same = t.build("m", 3, sub, owned)
    assert same.instance_id == "i"  # always: the coordinator finds static members by it
    assert (same.rack_id, same.rebalance_timeout_ms, same.server_assignor) == (None, -1, None)
    assert same.subscribed_topic_names is None and same.subscribed_topic_regex is None
    assert same.topic_partitions is None
    assert same.body(1).topic_partitions is None

    fewer = t.build("m", 4, sub, frozenset({TopicIdPartition(T1, 0)}))
    assert fewer.topic_partitions == (TopicIdPartition(T1, 0),) and fewer.subscribed_topic_names is None
    emptied = t.build("m", 4, sub, frozenset())
    assert emptied.topic_partitions == () and emptied.body(1).topic_partitions == []  # empty, not null

    t.reset()
    again = t.build("m", 4, sub, frozenset())
    assert again.rebalance_timeout_ms == 5_000 and again.subscribed_topic_names == ("a", "b")
    assert again.topic_partitions == () and again.rack_id == "r" and again.server_assignor == "range"


def test_regex_is_left_out_at_v0_and_leave_carries_only_identity() -> None:
    t = tracker(instance_id="i")
    fields = t.build("m", 0, Subscription(pattern="a.*"), frozenset())
    assert fields.body(1).subscribed_topic_regex == "a.*"
    v0 = fields.body(0)
    assert v0.subscribed_topic_regex is None
    CONSUMER_GROUP_HEARTBEAT.encode_request(v0, 0)
    leave = t.leave("m", -2)
    assert (leave.member_epoch, leave.instance_id) == (-2, "i")
    assert (
        leave.subscribed_topic_names is None
        and leave.topic_partitions is None
        and leave.rebalance_timeout_ms == -1
    )
    assert t.build("m", 0, Subscription(pattern="a.*"), frozenset()).subscribed_topic_regex == "a.*"  # reset


def test_schedule_interval_backoff_and_cap() -> None:
    s = HeartbeatSchedule(retry_backoff_ms=100, retry_backoff_max_ms=500)
    assert s.next_send_ms(urgent=False) == 0  # the first heartbeat goes out at once
    s.on_sent(1_000)
    s.on_success(1_010, 3_000)
    assert s.next_send_ms(urgent=False) == 4_010 and s.next_send_ms(urgent=True) == 0
    s.on_sent(4_010)
    assert s.next_send_ms(urgent=False) == 7_010
    for expected in (100, 200, 400, 500, 500):
        s.on_failure(10_000)
        assert s.next_send_ms(urgent=False) == 10_000 + expected
        assert s.next_send_ms(urgent=True) == 10_000 + expected  # urgency never skips a backoff
    s.on_success(20_000, 3_000)
    assert s.failures == 0 and s.next_send_ms(urgent=True) == 0
    s.on_failure(30_000)
    s.retry_now()
    assert s.next_send_ms(urgent=False) == 0


def test_schedule_jitter_scales_the_backoff() -> None:
    s = HeartbeatSchedule(retry_backoff_ms=100, retry_backoff_max_ms=1_000, jitter=lambda: 0.8)
    s.on_failure(0)
    assert s.next_send_ms(urgent=False) == 80


def test_metadata_names_topic_ids_and_asks_for_what_it_lacks() -> None:
    cache = MetadataCache()
    names = MetadataTopicNames(cache)
    assert names.topic_name(T1) is None
    P = MR.MetadataResponseTopic.MetadataResponsePartition
    body = MR(
        brokers=[MR.MetadataResponseBroker(node_id=1, host="h", port=1)],
        cluster_id="c",
        controller_id=1,
        topics=[
            MR.MetadataResponseTopic(
                error_code=0,
                name="a",
                topic_id=T1,
                partitions=[
                    P(error_code=0, partition_index=0, leader_id=1, replica_nodes=[1], isr_nodes=[1])
                ],
            )
        ],
    )
    version = names.version
    (first,) = cache.poll(0).unsent_requests  # the cache's own first request
    first.handler(ClientResponse(first, 1, 12, body, None, 0))
    assert names.version != version
    assert names.topic_name(T1) == "a" and names.topic_name(T2) is None
    assert not cache.update_requested
    names.request_update(frozenset({T2}), frozenset({"a", "b"}), None)
    assert cache.update_requested and cache.topics == frozenset({"a", "b"})
    names.request_update(frozenset({T2}), frozenset(), "x.*")
    metadata_all = cache.poll(10_000).unsent_requests
    assert (
        metadata_all and metadata_all[0].body_for(12).topics is None
    )  # every topic: the regex is the broker's
