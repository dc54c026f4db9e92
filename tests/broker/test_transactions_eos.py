"""Exactly once through our broker (issue 17): a consume-transform-produce loop with confluent-kafka's
transactional producer and ``send_offsets_to_transaction``, killed with -9 several times, and the broker killed
with -9 once while the loop runs: a read_committed reader of the output sees every input record exactly once.

The loop (a subprocess) reads its input partitions from the group's committed offsets (assign mode, so a
restarted loop does not wait for a rebalance), and per batch: begin, produce the transformed records, send the
input positions, commit. A new incarnation's init_transactions fences the killed one and aborts its open
transaction; any error ends the process and the test starts it again, as a supervisor would.

After the broker's kill, librdkafka 2.x's producer (seen with debug=eos) re-adds its partitions and the group's
offsets partition but never sends the TxnOffsetCommit of the open transaction: its coordinator request waits
for a broker state change that does not come and ignores its own timeout (librdkafka issues #5456 and #5511,
both open). The transaction is then ended by its timeout (10 s here): our coordinator aborts it with an epoch
bump, the producer is fenced, and the restarted loop goes on from the committed offsets, which is the
coordinator's timeout path at work.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from support.brokers import BrokerKind, BrokerProcess
from support.waiting import wait_until

pytestmark = [pytest.mark.broker_ours, pytest.mark.compat, pytest.mark.slow]

RECORDS = 600
PHASES = 4

LOOP = textwrap.dedent("""
    import sys
    from confluent_kafka import Consumer, Producer, TopicPartition, OFFSET_STORED
    bootstrap = sys.argv[1]
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "eos", "enable.auto.commit": False,
                         "isolation.level": "read_committed", "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition("eos-in", p, OFFSET_STORED) for p in range(2)])
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "eos-loop", "linger.ms": 5,
                         "transaction.timeout.ms": 10000, "message.timeout.ms": 10000})
    producer.init_transactions(60)
    while True:
        batch = [m for m in consumer.consume(num_messages=25, timeout=0.5) if m.error() is None]
        if not batch:
            continue
        producer.begin_transaction()
        for m in batch:
            producer.produce("eos-out", m.value().replace(b"in-", b"out-"))
        positions = consumer.position([TopicPartition("eos-in", p) for p in range(2)])
        producer.send_offsets_to_transaction([tp for tp in positions if tp.offset >= 0],
                                             consumer.consumer_group_metadata(), 60)
        producer.commit_transaction(60)
""")


def out_end(bootstrap: str) -> int:
    """The output's end offset (records of every transaction, committed or not, and markers)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "probe"})
    try:
        return int(c.get_watermark_offsets(TopicPartition("eos-out", 0), timeout=10)[1])
    finally:
        c.close()


def test_consume_transform_produce_exactly_once_through_kills(tmp_path: Path) -> None:
    script = tmp_path / "loop.py"
    script.write_text(LOOP)
    with BrokerProcess(BrokerKind.GROUPSTREAM, tmp_path / "broker") as broker:
        bs = broker.bootstrap
        admin = AdminClient({"bootstrap.servers": bs})
        for topic, n in (("eos-in", 2), ("eos-out", 1)):
            assert admin.create_topics([NewTopic(topic, n, 1)])[topic].result(30) is None
        feeder = Producer({"bootstrap.servers": bs, "enable.idempotence": True})
        log = (tmp_path / "loop.log").open("w")
        loop: subprocess.Popen[bytes] | None = None

        def running() -> subprocess.Popen[bytes]:
            """The loop process, started again whenever it has ended (killed, or exited on an error)."""
            nonlocal loop
            if loop is None or loop.poll() is not None:
                loop = subprocess.Popen([sys.executable, str(script), bs], stdout=log, stderr=log)
            return loop

        def explain() -> str:
            log.flush()
            return (tmp_path / "loop.log").read_text()[-3000:]

        try:
            # The input arrives in phases; as soon as the loop has started writing a phase's output, the loop
            # (phases 0, 2, 3) or the broker (phase 1) is killed with -9, in the middle of its transactions.
            per_phase = RECORDS // PHASES
            for phase in range(PHASES):
                before = out_end(bs)
                for i in range(phase * per_phase, (phase + 1) * per_phase):
                    feeder.produce("eos-in", f"in-{i}".encode(), partition=i % 2)
                assert feeder.flush(30) == 0
                wait_until(lambda b=before: running() is not None and out_end(bs) > b, 120,
                           f"the loop to write output of phase {phase}", explain=explain)  # fmt: skip
                if phase == 1:
                    broker.restart(kill=True)
                else:
                    proc = running()
                    proc.kill()
                    proc.wait()

            def all_read() -> bool:
                running()
                return len(read_committed(bs)) >= RECORDS

            wait_until(all_read, 180, f"{RECORDS} committed output records", explain=explain)
        finally:
            if loop is not None and loop.poll() is None:
                loop.kill()
                loop.wait()
            log.close()
        out = read_committed(bs)
        assert len(out) == RECORDS, f"{len(out)} records, {len(out) - len(set(out))} duplicates"
        assert sorted(out) == sorted(f"out-{i}".encode() for i in range(RECORDS))


def read_committed(bootstrap: str) -> list[bytes]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "eos-reader", "isolation.level": "read_committed",
                  "enable.auto.commit": False})  # fmt: skip
    try:
        c.assign([TopicPartition("eos-out", 0, 0)])
        _, high = c.get_watermark_offsets(TopicPartition("eos-out", 0), timeout=10)
        got: list[bytes] = []

        def done() -> bool:
            for m in c.consume(num_messages=500, timeout=0.2):
                if m.error() is None:
                    got.append(m.value() or b"")
            (pos,) = c.position([TopicPartition("eos-out", 0)])
            return pos.offset >= high

        wait_until(done, 30, "the reader to reach the last stable offset")
        return got
    finally:
        c.close()
