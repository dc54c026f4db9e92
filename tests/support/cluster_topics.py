"""Topics on a cluster of several nodes (Apache Kafka's, in the broker_apache tests): created and waited for
until every partition has a leader and all its replicas in sync, and filled by our Producer, which sends each
partition's records to that partition's leader."""

from __future__ import annotations

import uuid
from concurrent.futures import Future

from groupstream import Producer
from groupstream.client.admin import Admin, NewTopic
from groupstream.client.producer import RecordMetadata
from support.waiting import wait_until


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    """With the cluster's default replication factor (3), visible with leaders and full ISRs everywhere."""
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, partitions)])

        def ready() -> bool:
            t = admin.list_topics().get(topic)
            return (
                t is not None
                and t.partition_count == partitions
                and all(p.leader >= 0 and len(p.isr) == len(p.replicas) for p in t.partitions)
            )

        wait_until(ready, 30, f"topic {topic} with {partitions} led, in-sync partitions")


def leaders(bootstrap: str, topic: str) -> dict[int, int]:
    """Partition -> the node leading it now."""
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        return {p.partition: p.leader for p in admin.describe_topics([topic])[topic].partitions}


def produce_round_robin(
    bootstrap: str, topic: str, n: int, partitions: int, first: int = 0
) -> dict[tuple[int, int], tuple[bytes, bytes]]:
    """Records ``first`` .. ``first + n - 1`` (key ``k<i>``, value ``v<i>``) to partition ``i % partitions``,
    ``acks=all``; returns where each landed: (partition, offset) -> (key, value)."""
    sent: list[tuple[bytes, bytes, Future[RecordMetadata]]] = []
    with Producer({"bootstrap.servers": bootstrap, "acks": "all"}) as p:
        for i in range(first, first + n):
            key, value = b"k%d" % i, b"v%d" % i
            sent.append((key, value, p.produce(topic, value, key=key, partition=i % partitions)))
        assert p.flush(60) == 0, f"{topic}: records not acknowledged after 60 s"
    out = {}
    for key, value, f in sent:
        md = f.result(0)
        out[(md.partition, md.offset)] = (key, value)
    return out


def filled_topic(bootstrap: str, partitions: int, records: int) -> str:
    """A new topic (``create_topic``) holding ``records`` records round-robin over its partitions."""
    topic = unique("filled")
    create_topic(bootstrap, topic, partitions)
    produce_round_robin(bootstrap, topic, records, partitions)
    return topic
