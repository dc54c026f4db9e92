"""Our broker with listeners of its own beside the PLAINTEXT one the harness probes for readiness, and what the
secured-broker tests share."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from groupstream import Consumer, Producer
from groupstream.client.admin import Admin, NewTopic
from support.brokers import BrokerKind, BrokerProcess
from support.waiting import wait_until


class SecureBrokerProcess(BrokerProcess):
    def __init__(self, workdir: Path, listeners: list[str], **kwargs: Any) -> None:
        super().__init__(BrokerKind.GROUPSTREAM, workdir, **kwargs)
        self.listeners = listeners

    def command(self) -> list[str]:
        cmd = super().command()
        for listener in self.listeners:
            cmd += ["--listen", listener]
        return cmd


SECURE_SETTINGS = {
    "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
    "listener.name.ssl.ssl.client.auth": "required",
    "group.initial.rebalance.delay.ms": "0",
    "num.partitions": "3",
}
"""What the secured-broker tests share: every SASL mechanism, mutual TLS on the SSL listener (add the PKI's
``ssl.keystore.location`` and ``ssl.truststore.location``)."""


def our_clients_round_trip(conf: dict[str, Any], label: str, records: int, timeout_s: float) -> None:
    """Our Admin creates a topic, our Producer writes ``records`` values, our Consumer reads them all back in a
    group and commits, and the Admin lists the group: every client over the security settings of ``conf``."""
    topic, group = f"sec-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    with Admin(conf) as admin:
        assert admin.create_topics([NewTopic(topic, 3)])[topic].num_partitions == 3
    values = [f"{label}-{i}".encode() for i in range(records)]
    with Producer({**conf, "linger.ms": 5}) as producer:
        handles = [producer.produce(topic, v) for v in values]
        assert producer.flush(timeout_s) == 0
        assert all(h.result().offset >= 0 for h in handles)
    got: list[bytes] = []
    with Consumer({**conf, "group.id": group, "auto.offset.reset": "earliest"}) as consumer:
        consumer.subscribe([topic])

        def read_all() -> bool:
            got.extend(r.value for r in consumer.poll(0.5))
            return len(got) >= records

        wait_until(read_all, timeout_s, f"{records} records read back", interval_s=0)
        consumer.commit()
    assert sorted(got) == sorted(values)
    with Admin(conf) as admin:
        assert group in {g.group_id for g in admin.list_groups()}
