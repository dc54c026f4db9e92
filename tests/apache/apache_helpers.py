"""What the Apache Kafka test modules share: topics with every replica in sync (``support.cluster_topics``,
which the Spark tests on the cluster use too), and a feeder thread that keeps our idempotent producer writing
while nodes die and leaderships move. (The independent reader of what a topic holds, confluent-kafka, is
``support.compat.confluent_read``.)"""

from __future__ import annotations

import threading
from collections import Counter
from concurrent.futures import Future

from groupstream import Producer
from groupstream.client.producer import RecordMetadata
from support.cluster_topics import create_topic, filled_topic, unique
from support.compat import Acked

__all__ = ["Feeder", "create_topic", "filled_topic", "unique"]


class Feeder(threading.Thread):
    """Our idempotent ``acks=all`` Producer writing keyed, uniquely valued records, ``chunk`` every
    ``pace_s`` seconds, until ``stop()``; then it flushes. ``sent`` and the futures are in send order."""

    def __init__(self, bootstrap: str, topic: str, *, chunk: int = 100, pace_s: float = 0.05) -> None:
        super().__init__(name=f"feeder-{topic}", daemon=True)
        self.topic, self.chunk, self.pace_s = topic, chunk, pace_s
        self.producer = Producer(
            {"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5,
             "reconnect.backoff.max.ms": 500, "retry.backoff.max.ms": 500}
        )  # fmt: skip
        self.sent: list[tuple[bytes, bytes]] = []
        self.futures: list[Future[RecordMetadata]] = []
        self.done: list[RecordMetadata] = []  # appended by the producer's network thread as acks arrive
        self.failures: list[BaseException] = []
        self._stop_event = threading.Event()
        self.left_unflushed: int | None = None

    def _on_done(self, f: Future[RecordMetadata]) -> None:
        e = f.exception()
        if e is None:
            self.done.append(f.result())
        else:
            self.failures.append(e)

    def run(self) -> None:
        try:
            i = 0
            while not self._stop_event.is_set():
                for _ in range(self.chunk):
                    key, value = f"k{i % 53}".encode(), f"{self.topic}|{i:08d}".encode()
                    f = self.producer.produce(self.topic, value, key=key)
                    f.add_done_callback(self._on_done)
                    self.sent.append((key, value))
                    self.futures.append(f)
                    i += 1
                self._stop_event.wait(self.pace_s)  # the feed's pace, not a wait for a condition
            self.left_unflushed = self.producer.flush(120)
        except BaseException as e:
            self.failures.append(e)
        finally:
            self.producer.close(10)

    def stop(self, timeout: float = 150) -> None:
        self._stop_event.set()
        self.join(timeout)
        assert not self.is_alive(), "the feeder did not finish flushing"

    def acked_on(self, partition: int) -> int:
        return sum(1 for md in list(self.done) if md.partition == partition)

    def last_acked_offset(self, partition: int) -> int:
        return max((md.offset for md in list(self.done) if md.partition == partition), default=-1)

    def acked(self) -> list[Acked]:
        """Every record's acknowledgement, after ``stop()`` (all futures are done then)."""
        return [
            Acked(f.result(0).partition, f.result(0).offset, k, v)
            for f, (k, v) in zip(self.futures, self.sent, strict=True)
        ]

    def check_all_acknowledged(self) -> None:
        assert not self.failures, f"{len(self.failures)} records failed, e.g. {self.failures[:3]}"
        assert self.left_unflushed == 0, f"{self.left_unflushed} records not acknowledged after the flush"
        dup = [pos for pos, n in Counter((md.partition, md.offset) for md in self.done).items() if n > 1]
        assert not dup, f"positions acknowledged twice: {dup[:5]}"

