"""A Spark region instance's place in its consumer group: our consumer, subscribed, never fetching.

The streaming source of a region instance (see `region_reader`) needs to know which partitions the group gives
it, and the group must see a live member for as long as the query runs. This consumer joins the group,
pauses every partition it is given (Spark's tasks read the data, by exact ranges), and is polled by a thread of
its own, so rebalances are served and ``max.poll.interval.ms`` holds between micro-batches of any length. Its
rebalance callbacks run on that thread, inside ``poll``, and update the set the source reads.

Commits go through the same thread (the consumer is used by one application thread), carrying the member's
generation, so the group accepts them while it has members; they are what lag tools show.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Mapping

from groupstream.client.net.security import SECURITY_PROPERTIES
from groupstream.protocol.topic_partition import TopicPartition
from groupstream.spark.options import SourceOptions

__all__ = ["GroupMembership"]

log = logging.getLogger("groupstream.spark")

_POLL_TIMEOUT_S = 0.2
_CLIENT_PROPERTIES_KEPT = {
    "group.protocol", "group.instance.id", "group.remote.assignor", "partition.assignment.strategy",
    "session.timeout.ms", "heartbeat.interval.ms", "max.poll.interval.ms", "request.timeout.ms",
    "client.rack", "metadata.max.age.ms", *SECURITY_PROPERTIES,
}  # fmt: skip
"""Of the source's ``kafka.*`` options, those that shape the membership (fetch sizes do not: it never fetches),
and those it needs to reach a secured cluster."""


class GroupMembership:
    def __init__(self, options: SourceOptions, member: str) -> None:
        from groupstream import Consumer

        assert options.group_id is not None
        config: dict[str, str] = {
            "bootstrap.servers": options.bootstrap_servers,
            "group.id": options.group_id,
            "client.id": f"groupstream-region-{member}",
            "enable.auto.commit": "false",
            # a new member's committed offsets are irrelevant: it never fetches
            "auto.offset.reset": "earliest",
        }
        config.update({k: v for k, v in options.client_config.items() if k in _CLIENT_PROPERTIES_KEPT})
        self._consumer = Consumer(config)
        self._owned: frozenset[TopicPartition] = frozenset()
        self._lock = threading.Lock()
        self._commits: queue.SimpleQueue[dict[TopicPartition, int]] = queue.SimpleQueue()
        self._stop = threading.Event()
        self._error: BaseException | None = None
        if options.pattern is not None:
            self._consumer.subscribe(options.pattern.pattern, listener=self)
        else:
            self._consumer.subscribe(list(options.topics), listener=self)
        self._thread = threading.Thread(target=self._run, name=f"groupstream-region-{member}", daemon=True)
        self._thread.start()

    # --- the rebalance listener (runs on the membership thread, inside poll) -------------------------------

    def on_partitions_assigned(self, partitions: list[TopicPartition]) -> None:
        parts = frozenset(partitions)
        if parts:
            self._consumer.pause(partitions)
        with self._lock:
            self._owned = self._owned | parts
        log.info("region membership: assigned %s", sorted(parts))

    def on_partitions_revoked(self, partitions: list[TopicPartition]) -> None:
        parts = frozenset(partitions)
        with self._lock:
            self._owned = self._owned - parts
        log.info("region membership: revoked %s", sorted(parts))

    def on_partitions_lost(self, partitions: list[TopicPartition]) -> None:
        self.on_partitions_revoked(partitions)

    # --- what the source uses -----------------------------------------------------------------------------

    def owned(self) -> frozenset[TopicPartition]:
        if self._error is not None:
            raise RuntimeError(f"the region instance lost its group membership: {self._error}") from self._error
        with self._lock:
            return self._owned

    def commit(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Commit published offsets of partitions this instance owns (asynchronously, best effort)."""
        self._commits.put(dict(offsets))

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    # --- the membership thread ----------------------------------------------------------------------------

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                self._consumer.poll(_POLL_TIMEOUT_S)
                pending: dict[TopicPartition, int] = {}
                while not self._commits.empty():
                    pending.update(self._commits.get())
                with self._lock:
                    mine = {tp: o for tp, o in pending.items() if tp in self._owned}
                if mine:
                    try:
                        self._consumer.commit(mine, asynchronous=True)
                    except Exception as e:  # progress reporting must not stop the pipeline
                        log.warning("region membership: commit failed: %s", e)
        except BaseException as e:
            self._error = e
            log.error("region membership: the consumer failed: %s", e)
        finally:
            self._consumer.close()

