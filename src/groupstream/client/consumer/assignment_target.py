"""The consumer's side of a rebalance: how partitions are given up and taken on (network thread).

A membership manager decides what the member owns and asks this target to carry a step out. Revoking removes
the partitions from the fetch buffer first (nothing of theirs is fetched or returned from then on), commits
their positions when auto commit is on, and only then runs ``on_partitions_revoked`` on the application thread,
inside ``poll``; the step is done when the callback returned, and the manager may then tell the coordinator.
Assigning adds the new partitions (positions come from the group's commits or ``auto.offset.reset``) and keeps
the others as they are, paused ones included (KIP-822; a partition an eager rebalance revoked while paused comes
back paused too), then runs ``on_partitions_assigned`` with the added
ones. Losing drops partitions without a commit and runs ``on_partitions_lost`` (``on_partitions_revoked`` for
a listener without it, as Kafka does). Without a listener the steps finish at once, on the network thread.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from groupstream.assignment.types import TopicPartition
from groupstream.client.consumer.commit_manager import OffsetAndMetadata
from groupstream.client.consumer.fetch_buffer import FetchBuffer
from groupstream.client.consumer.membership_api import StepDone
from groupstream.client.consumer.metrics import ConsumerMetrics
from groupstream.client.net.network_thread import monotonic_ms

__all__ = ["ConsumerAssignmentTarget"]

log = logging.getLogger("groupstream.client.consumer")

CommitFn = Callable[[dict[TopicPartition, OffsetAndMetadata], Callable[[BaseException | None], None]], None]


class ConsumerAssignmentTarget:
    def __init__(
        self,
        buffer: FetchBuffer,
        listener: Any,
        commit: CommitFn | None,
        on_network_thread: Callable[[Callable[[], None]], None],
        metrics: ConsumerMetrics | None = None,
    ) -> None:
        """``commit`` (None without auto commit) commits offsets and calls back on the network thread;
        ``on_network_thread(fn)`` runs ``fn`` there later (the listener runs on the application thread)."""
        self._buffer = buffer
        self._listener = listener
        self._commit = commit
        self._on_network_thread = on_network_thread
        self._paused_when_revoked: set[TopicPartition] = set()
        self._metrics = metrics

    def owned_partitions(self) -> frozenset[TopicPartition]:
        return self._buffer.assignment()

    def revoke(self, partitions: frozenset[TopicPartition], done: StepDone) -> None:
        # KIP-822: an eager rebalance revokes everything and may give a partition straight back; it comes back
        # paused if it was paused
        self._paused_when_revoked |= self._buffer.paused() & partitions
        if self._metrics is not None:
            self._metrics.rebalance_started(monotonic_ms())
        positions = self._buffer.remove(partitions)
        log.info("revoking %s", sorted(partitions))

        def committed(error: BaseException | None) -> None:
            if error is not None:
                log.warning("committing revoked partitions failed: %s", error)
            self._callback("on_partitions_revoked", partitions, done)

        if self._commit is not None and positions:
            self._commit({tp: OffsetAndMetadata(o) for tp, o in positions.items()}, committed)
        else:
            committed(None)

    def assign(self, assignment: frozenset[TopicPartition], added: frozenset[TopicPartition], done: StepDone) -> None:
        self._buffer.assign(assignment)
        if self._metrics is not None:
            self._metrics.rebalance_done(monotonic_ms())
        again_paused = sorted(self._paused_when_revoked & added)
        if again_paused:
            self._buffer.set_paused(again_paused, True)
        self._paused_when_revoked.clear()
        log.info("assigned %s (new: %s)", sorted(assignment), sorted(added))
        self._callback("on_partitions_assigned", added, done)

    def lose(self, partitions: frozenset[TopicPartition], done: StepDone) -> None:
        if self._metrics is not None:
            self._metrics.rebalance_started(monotonic_ms())
        self._buffer.remove(partitions)
        log.info("lost %s", sorted(partitions))
        name = "on_partitions_lost" if hasattr(self._listener, "on_partitions_lost") else "on_partitions_revoked"
        self._callback(name, partitions, done)

    def _callback(self, name: str, partitions: frozenset[TopicPartition], done: StepDone) -> None:
        method = getattr(self._listener, name, None) if self._listener is not None else None
        if method is None:
            done(None)
            return

        def run_on_application_thread() -> None:
            error: BaseException | None = None
            try:
                method(sorted(partitions))
            except Exception as e:  # reported by poll; the rebalance goes on, as in Kafka
                log.error("the rebalance listener's %s raised %r", name, e)
                self._buffer.add_error(e)
                error = e
            self._on_network_thread(lambda: done(error))

        self._buffer.add_task(run_on_application_thread)
