"""A full disk under our broker, for real: its data dir on a 20 MB tmpfs that a ballast file fills.

The fault as an operator meets it (issue 12, part 1): an idempotent acks=all producer of 1 KB records runs
until the disk refuses writes, the ballast is removed, more records are produced, the broker is stopped
(cleanly, or with kill -9) and started again. Before the fix, a short write left a torn batch past the
segment's end, the log rolled past it, and the restart cut the log there: the end offset went back by
3,000 acknowledged records. Now every acknowledged record must be read back exactly once, and while the
disk is full a producer must get KAFKA_STORAGE_ERROR (56) on a connection that stays open.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, Message, Producer

from broker.test_kill9 import TrackingProducer, create_topic, read_all, records_for
from groupstream import Consumer
from groupstream.assignment.types import TopicPartition
from groupstream.client.consumer.commit_manager import OffsetAndMetadata
from groupstream.client.errors import ClientError as KafkaClientError
from support.brokers import BrokerFactory, BrokerKind, BrokerProcess
from support.compat import check_read_equals_acked
from support.disk import SmallDisk, small_disk
from support.waiting import wait_until

pytestmark = [pytest.mark.broker_ours, pytest.mark.slow]

DISK = 20 * 1024 * 1024
BALLAST = 8 * 1024 * 1024
RECORD = 1000  # bytes of padding per value: about 1 KB a record
SETTINGS = {
    "log.segment.bytes": "1048576",
    "offsets.topic.num.partitions": "5",
    "group.initial.rebalance.delay.ms": "0",
}


def _probe_storage_error(bootstrap: str, topic: str, size: int) -> KafkaError | None:
    """One record of ``size`` bytes from a producer that does not retry: its delivery report carries the
    broker's error."""
    reports: list[KafkaError | None] = []

    def on_delivery(err: KafkaError | None, _msg: Message) -> None:
        reports.append(err)

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "retries": 0, "message.timeout.ms": 20_000,
                  "enable.idempotence": False})
    p.produce(topic, value=b"x" * size, on_delivery=on_delivery)
    p.flush(25)
    assert reports, "the probe record got no delivery report within 25 s"
    return reports[0]


def _fill_until_refused(tracker: TrackingProducer, topic: str, disk: SmallDisk) -> int:
    """Produce 200 records at a time until acknowledgements stop for 3 s with less than a segment free
    (the broker refuses and librdkafka keeps retrying); returns how many were sent."""
    sent = 0
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        for key, value in records_for(f"fill{sent:06d}", 200, pad=RECORD):
            tracker.produce(topic, key, value)
        sent += 200
        last, quiet_since = len(tracker.acked), time.monotonic()
        while len(tracker.acked) < sent:
            tracker.producer.poll(0.1)
            if len(tracker.acked) != last:
                last, quiet_since = len(tracker.acked), time.monotonic()
            elif time.monotonic() - quiet_since > 3.0 and disk.free_bytes() < 1024 * 1024:
                return sent
    raise AssertionError(f"the disk never filled: {disk.free_bytes()} bytes free, {len(tracker.acked)} acked")


@pytest.mark.parametrize("stop", ["sigterm", "kill9"])
def test_a_full_disk_loses_no_acknowledged_record(broker_factory: BrokerFactory, tmp_path: Path, stop: str) -> None:
    with small_disk(tmp_path, DISK) as disk:
        broker: BrokerProcess = broker_factory(
            BrokerKind.GROUPSTREAM, name="broker", data_dir=disk.path / "data", settings=SETTINGS
        )
        topic = "full"
        create_topic(broker.bootstrap, topic, 1)
        disk.add_ballast(BALLAST)
        tracker = TrackingProducer(broker.bootstrap, **{"linger.ms": 20})
        sent = _fill_until_refused(tracker, topic, disk)

        # While full: a non-retrying producer is told why, and the broker keeps its connections.
        # (larger than what is left, so that it cannot fit into the last, partly used page of a file)
        err = _probe_storage_error(broker.bootstrap, topic, min(disk.free_bytes() + 65536, 900_000))
        assert err is not None and err.code() == KafkaError.KAFKA_STORAGE_ERROR, f"while full, a produce got {err}"
        assert broker.running, broker.log_tail()

        # Space returns: the retried records and 3,000 more are acknowledged, without a restart.
        disk.remove_ballast()
        more = records_for("after", 3000, pad=RECORD)
        tracker.produce_all(topic, more, flush_timeout=120)
        assert not tracker.failed and not tracker.fatal, (tracker.failed[:3], tracker.fatal[:3])
        acked = list(tracker.acked)
        assert len(acked) == sent + 3000, f"{sent + 3000} produced, {len(acked)} acknowledged"
        tracker.close()

        broker.restart(kill=stop == "kill9")
        consumed, _ = read_all(broker.bootstrap, topic, 1, timeout=120)
        # The probe record may have been appended before its flush failed (KAFKA_STORAGE_ERROR is then
        # "not known durable"): it is not acknowledged, so the reader may find it; it is not ours to count.
        consumed = [c for c in consumed if c.value is None or not c.value.startswith(b"x" * 10)]
        fill = [r for i in range(0, sent, 200) for r in records_for(f"fill{i:06d}", 200, pad=RECORD)]
        check_read_equals_acked(fill + more, acked, consumed, 1, java_partitioner=False)
        text = broker.log_text()
        assert "KAFKA_STORAGE_ERROR" in text, broker.log_tail()
        assert "Traceback" not in text, broker.log_tail(200)


def test_commits_while_the_disk_is_full_get_an_error_and_resume_after(
    broker_factory: BrokerFactory, tmp_path: Path
) -> None:
    """OffsetCommit on a full disk: an error code (never a dropped connection), the shard is not reloaded
    on every attempt, and commits succeed again once space returns, without a restart."""
    with small_disk(tmp_path, 4 * 1024 * 1024) as disk:
        broker = broker_factory(BrokerKind.GROUPSTREAM, name="broker", data_dir=disk.path / "data",
                                settings={**SETTINGS, "offsets.topic.num.partitions": "1"})
        topic = "commits"
        create_topic(broker.bootstrap, topic, 1)
        # a commit gives up after 4 s of retrying a coordinator that cannot write (Kafka's default is 60 s)
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "g-full",
                             "enable.auto.commit": False, "default.api.timeout.ms": 4000})
        big = "m" * 4000  # a commit record larger than a tmpfs page: it cannot hide in a partly used one
        try:
            consumer.assign([(topic, 0)])
            consumer.commit(offsets={(topic, 0): OffsetAndMetadata(1, big)})
            disk.fill()
            errors: list[str] = []
            for i in range(2, 6):
                try:
                    consumer.commit(offsets={(topic, 0): OffsetAndMetadata(i, big)})
                except (KafkaClientError, TimeoutError) as e:  # refused, or retried until the API timeout
                    errors.append(str(e))
            assert errors, "no commit failed on a full disk: the test did not fill it"
            assert broker.running, broker.log_tail()
            disk.remove_ballast()

            def commit_succeeds() -> bool:
                try:
                    consumer.commit(offsets={(topic, 0): OffsetAndMetadata(100, big)})
                except (KafkaClientError, TimeoutError):
                    return False
                return True

            wait_until(commit_succeeds, 40, "a commit to succeed once space returned")
            assert consumer.committed([(topic, 0)])[TopicPartition(topic, 0)].offset == 100
        finally:
            consumer.close()
        text = broker.log_text()
        # one ERROR line per episode of failures, and the shard is reloaded after a backoff, not per attempt
        assert text.count("answering COORDINATOR_NOT_AVAILABLE and reloading") >= 1, broker.log_tail()
        loads = text.count("coordinator for __consumer_offsets-0 loaded")
        assert loads <= 8, f"the shard was loaded {loads} times for {len(errors)} failed commits\n{broker.log_tail()}"
        assert "Traceback" not in text, broker.log_tail(200)
