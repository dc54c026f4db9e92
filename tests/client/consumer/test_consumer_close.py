"""Closing waits for what is in flight without spinning, and not a moment longer (the network thread's last
loop): a consumer with a long-polling fetch out, and an idempotent producer with nothing left to send."""

from __future__ import annotations

import time
import uuid

from groupstream import Consumer, Producer
from groupstream.client.admin import Admin, NewTopic
from support.brokers import BrokerProcess
from support.waiting import wait_until


def _topic(bs: str) -> str:
    name = f"close-{uuid.uuid4().hex[:8]}"
    with Admin({"bootstrap.servers": bs}) as admin:
        admin.create_topics([NewTopic(name, 2)])
        wait_until(lambda: admin.list_topics().get(name) is not None, 20, "the topic to appear")
    return name


def test_a_consumer_closes_without_spinning_on_its_long_poll(groupstream_broker: BrokerProcess) -> None:
    bs = groupstream_broker.bootstrap
    topic = _topic(bs)
    c = Consumer({"bootstrap.servers": bs, "auto.offset.reset": "earliest", "fetch.max.wait.ms": 1500})
    c.assign([(topic, 0), (topic, 1)])
    c.poll(0.5)  # the topic is empty: a fetch waits at the broker, up to 1.5 s
    wall, cpu = time.monotonic(), time.process_time()
    c.close()
    assert time.monotonic() - wall < 10
    assert time.process_time() - cpu < 0.5  # the network thread waited for it in select, not in a loop


def test_an_idempotent_producer_closes_as_soon_as_everything_is_delivered(groupstream_broker: BrokerProcess) -> None:
    bs = groupstream_broker.bootstrap
    topic = _topic(bs)
    with Producer({"bootstrap.servers": bs, "acks": "all", "enable.idempotence": True, "linger.ms": 5}) as p:
        for i in range(200):
            p.produce(topic, value=b"v%d" % i)
        assert p.flush(30) == 0
        start = time.monotonic()
    assert time.monotonic() - start < 5  # not the close timeout (delivery.timeout.ms, 120 s)
