"""A feed of unique records for fault tests: records keep arriving while processes come and go."""

from __future__ import annotations

import threading

from groupstream.client.producer import Producer


class Feed(threading.Thread):
    """Produces ``batch`` records every ``pace_s`` seconds, values ``value_format % i`` for i = 0, 1, ...,
    until ``stop_event`` is set; ``produced`` counts them (every one acknowledged)."""

    def __init__(self, bootstrap: str, topic: str, *, batch: int = 100, pace_s: float = 0.5,
                 value_format: bytes = b"r%07d") -> None:  # fmt: skip
        super().__init__(daemon=True)
        self.bootstrap, self.topic = bootstrap, topic
        self.batch, self.pace_s, self.value_format = batch, pace_s, value_format
        self.stop_event = threading.Event()
        self.produced = 0

    def run(self) -> None:
        with Producer({"bootstrap.servers": self.bootstrap}) as producer:
            while not self.stop_event.is_set():
                first = self.produced
                records = [(b"k%d" % i, self.value_format % i) for i in range(first, first + self.batch)]
                producer.produce_batch(self.topic, records).result(60)
                self.produced += len(records)
                self.stop_event.wait(self.pace_s)  # the feed's pace, not a wait for a condition

    def values(self) -> list[bytes]:
        return [self.value_format % i for i in range(self.produced)]
