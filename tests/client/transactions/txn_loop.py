"""A consume-transform-produce loop (issue 17), run as a process the tests kill -9: reads ``input`` in group
``group`` (read_committed, no auto commit), writes each record's key and value upper-cased to ``output`` and
commits the input offsets with ``send_offsets_to_transaction`` in the same transaction, one transaction per
poll. ``client`` is ``ours`` (groupstream) or ``confluent`` (confluent-kafka). Prints ``committed N`` after each
commit; exits 0 once ``idle_s`` passed without a record while it had partitions assigned.

    python txn_loop.py BOOTSTRAP INPUT OUTPUT GROUP TRANSACTIONAL_ID CLIENT [IDLE_S]
"""

from __future__ import annotations

import sys
import time

# a restarted loop takes over its killed predecessor's membership at once (static membership), instead of
# waiting for its session to expire
MEMBER = {"group.instance.id": "txn-loop", "session.timeout.ms": 6000, "heartbeat.interval.ms": 1000}
PER_TRANSACTION = 50  # records per transaction: many transactions, so a kill lands in the middle of one


def transform(value: bytes | None) -> bytes:
    return (value or b"").upper()


def run_ours(bootstrap: str, src: str, dst: str, group: str, tid: str, idle_s: float) -> None:
    from groupstream import Consumer, Producer

    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "linger.ms": 5})
    producer.init_transactions(60)  # fences an older instance and ends its open transaction first
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "isolation.level": "read_committed",
         "enable.auto.commit": False, "auto.offset.reset": "earliest", **MEMBER,
         "max.poll.records": PER_TRANSACTION}
    )  # fmt: skip
    consumer.subscribe([src])
    last = time.monotonic()
    while time.monotonic() - last < idle_s:
        records = consumer.poll(0.5)
        if not records:
            if not consumer.assignment():
                last = time.monotonic()  # idle counts from the group's assignment on
            continue
        last = time.monotonic()
        producer.begin_transaction()
        positions: dict[tuple[str, int], int] = {}
        for r in records:
            producer.produce(dst, transform(r.value), key=r.key)
            positions[(r.topic, r.partition)] = r.offset + 1
        producer.send_offsets_to_transaction(positions, consumer.group_metadata(), 60)
        producer.commit_transaction(60)
        print(f"committed {len(records)}", flush=True)
    consumer.close()
    producer.close()


def run_confluent(bootstrap: str, src: str, dst: str, group: str, tid: str, idle_s: float) -> None:
    import confluent_kafka as ck

    producer = ck.Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "linger.ms": 5})
    producer.init_transactions(60)
    consumer = ck.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "isolation.level": "read_committed",
         "enable.auto.commit": False, "auto.offset.reset": "earliest", **MEMBER}
    )  # fmt: skip
    consumer.subscribe([src])
    last = time.monotonic()
    while time.monotonic() - last < idle_s:
        msgs = [m for m in consumer.consume(PER_TRANSACTION, 0.5) if m.error() is None]
        if not msgs:
            if not consumer.assignment():
                last = time.monotonic()  # idle counts from the group's assignment on
            continue
        last = time.monotonic()
        producer.begin_transaction()
        for m in msgs:
            producer.produce(dst, transform(m.value()), key=m.key())
        producer.send_offsets_to_transaction(
            consumer.position(consumer.assignment()), consumer.consumer_group_metadata(), 60
        )
        producer.commit_transaction(60)
        print(f"committed {len(msgs)}", flush=True)
    consumer.close()


def main() -> None:
    bootstrap, src, dst, group, tid, client = sys.argv[1:7]
    idle_s = float(sys.argv[7]) if len(sys.argv) > 7 else 5.0
    (run_ours if client == "ours" else run_confluent)(bootstrap, src, dst, group, tid, idle_s)


if __name__ == "__main__":
    main()
