"""A region's control plane on a compacted topic: records are written with our idempotent producer (acks=all,
one partition, so everyone reads them in one order) and folded into a `ControlView` by a reader thread whose
consumer (assigned, no group) long-polls the topic from its start. Waiting for something (a merge to complete, every member to answer a
command) is waiting on the view's condition with a deadline, never a sleep.

Works against our broker or any Kafka cluster: it needs nothing but a topic.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from groupstream.client.admin import Admin, NewTopic
from groupstream.client.consumer.consumer import Consumer
from groupstream.client.errors import ClientError, KafkaError
from groupstream.client.producer import Producer
from groupstream.protocol.error_codes import ErrorCode
from groupstream.region.control_records import ControlRecord, decode, encode
from groupstream.region.control_view import ControlView

__all__ = ["CONTROL_TOPIC", "ControlPlane"]

CONTROL_TOPIC = "__groupstream_region"
_POLL_S = 0.2  # the reader's longest wait between looks at whether the plane is closing
log = logging.getLogger("groupstream.region")
_T = TypeVar("_T")


class ControlPlane:
    def __init__(self, bootstrap: str, region: str, *, topic: str = CONTROL_TOPIC,
                 client_config: Mapping[str, Any] | None = None) -> None:  # fmt: skip
        self.bootstrap = bootstrap
        self.topic = topic
        self.view = ControlView(region)
        self._config = {"bootstrap.servers": bootstrap, **(client_config or {})}
        self._cond = threading.Condition()
        self._producer: Producer | None = None
        self._consumer: Consumer | None = None
        self._reader: threading.Thread | None = None
        self._closed = False
        self.read_error: BaseException | None = None
        self.position = 0  # the offset after the last record folded into the view

    @property
    def region(self) -> str:
        return self.view.region

    def start(self) -> ControlPlane:
        with Admin(self._config) as admin:
            try:
                admin.create_topics([NewTopic(self.topic, 1, config={"cleanup.policy": "compact"})])
            except KafkaError as e:
                if e.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                    raise
        self._producer = Producer({**self._config, "acks": "all", "enable.idempotence": True, "linger.ms": 0})
        self._consumer = Consumer({**self._config, "client.id": "groupstream-region", "enable.auto.commit": False,
                                   "fetch.max.wait.ms": int(_POLL_S * 1000)})  # fmt: skip
        self._consumer.assign([(self.topic, 0)], offsets={(self.topic, 0): 0})
        self._reader = threading.Thread(target=self._read, name=f"region-{self.region}-reader", daemon=True)
        self._reader.start()
        return self

    def _read(self) -> None:
        consumer = self._consumer
        assert consumer is not None
        try:
            while not self._closed:
                for rec in consumer.poll(_POLL_S):
                    if rec.key is None:
                        continue
                    record = decode(rec.key, rec.value)
                    with self._cond:
                        if record is not None:
                            self.view.apply(record, rec.offset)
                        self.position = rec.offset + 1
                        self._cond.notify_all()
        except (ClientError, OSError) as e:
            if not self._closed:
                log.error("the region control plane reader stopped: %s", e)
                self.read_error = e
        finally:
            consumer.close(0)  # it commits nothing; its thread and sockets go with the reader
            with self._cond:
                self._cond.notify_all()

    def publish(self, record: ControlRecord, timeout_s: float = 30.0) -> int:
        """Write ``record``; return its offset once it is acknowledged (durable) and folded into the view, so
        whoever publishes reads their own write."""
        if self._producer is None:
            raise RuntimeError("the control plane is not started")
        key, value = encode(record)
        offset = int(self._producer.produce(self.topic, value, key, partition=0).result(timeout_s).offset)
        if self.wait_for(lambda _view: True if self.position > offset else None, timeout_s) is None:
            raise TimeoutError(f"the control plane did not read back its own record at offset {offset}")
        return offset

    def wait_for(self, condition: Callable[[ControlView], _T | None], timeout_s: float) -> _T | None:
        """The first non-None ``condition(view)`` within ``timeout_s``, else None."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while True:
                found = condition(self.view)
                if found is not None:
                    return found
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self.read_error is not None or self._closed:
                    return None
                self._cond.wait(remaining)

    def read(self, query: Callable[[ControlView], _T]) -> _T:
        """Look at the view consistently (under its lock)."""
        with self._cond:
            return query(self.view)

    def close(self) -> None:
        self._closed = True
        if self._producer is not None:
            self._producer.close(10)
        if self._reader is not None:
            self._reader.join(10)
        with self._cond:
            self._cond.notify_all()

    def __enter__(self) -> ControlPlane:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
