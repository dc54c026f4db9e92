"""One member of a consistent region: the group consumer operator of seed 000 at work.

Two threads, as in the seed. The **event thread** owns the consumer: it polls (the consumer's rebalance
callbacks run inside that poll), feeds the operator core (`operator.GroupConsumerOperator`) what happens,
carries out the effects the core returns, and follows the controller's commands on the control plane. The
**process thread** takes messages from the bounded message queue (``100 x max.poll.records``), hands each to
the user's function, writes what it returns to the region's sink and records the offset in the offset
manager. Messages of partitions the member lost are removed from the queue before they are processed.

The consumer is reached through `RegionConsumer`, the few calls the operator needs (subscribe with a
rebalance listener, poll, seek, a synchronous commit, committed offsets, partitions of the topics), so the
member runs on our client against any Kafka cluster.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from groupstream.assignment.types import TopicPartition
from groupstream.region import operator as op
from groupstream.region.checkpoint_store import CheckpointStore
from groupstream.region.control_plane import ControlPlane
from groupstream.region.control_records import (
    Ack,
    Command,
    InitialOffsets,
    MemberRegistration,
    MergeContribution,
)
from groupstream.region.controller_runtime import RESET_REQUEST
from groupstream.region.file_sink import CheckpointedParquetSink
from groupstream.region.kafka_output import RegionSink
from groupstream.region.merge import MergeKey, merge_timeout_ms
from groupstream.region.operator_state import OperatorState

__all__ = ["MemberConfig", "RegionConsumer", "RegionMember", "RegionMisconfigured"]

log = logging.getLogger("groupstream.region")


class RegionMisconfigured(RuntimeError):
    """The group has members outside this region (seed 000: all members must be in one region)."""


class RegionConsumer(Protocol):
    """What the member needs of a consumer (our `groupstream.Consumer` provides it through an adapter)."""

    def subscribe(self, topics: list[str], on_revoked: Callable[[frozenset[TopicPartition]], None],
                  on_assigned: Callable[[frozenset[TopicPartition]], None]) -> None: ...  # fmt: skip

    def poll(self, timeout_s: float) -> list[Any]:
        """Records with ``topic``, ``partition``, ``offset``, ``key``, ``value``, ``timestamp``."""
        ...

    def serve(self) -> None:
        """Run due rebalance callbacks without taking records (while the operator does not poll)."""
        ...

    def seek(self, tp: TopicPartition, offset: int) -> None: ...

    def commit_sync(self, offsets: Mapping[TopicPartition, int]) -> None:
        """One synchronous commit; a reset commits partitions other members own too (brokers do not check)."""
        ...

    def committed(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]: ...

    def partitions_of(self, topics: Iterable[str]) -> frozenset[TopicPartition]: ...

    def start_offsets(self, partitions: Iterable[TopicPartition], position: str) -> dict[TopicPartition, int]:
        """Offsets by ``startPosition``: beginning, end, committed (beginning where none), or a timestamp."""
        ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class MemberConfig:
    member_id: str
    group: str
    topics: tuple[str, ...]
    region_index: int = 0
    start_position: str = "beginning"
    max_poll_records: int = 500
    reset_timeout_ms: int = 60_000
    max_poll_interval_ms: int = 300_000
    operator_driven: bool = False


class RegionMember:
    def __init__(self, config: MemberConfig, consumer: RegionConsumer, plane: ControlPlane, store: CheckpointStore,
                 sink: CheckpointedParquetSink | RegionSink,
                 process: Callable[[Any], Mapping[str, Any] | None]) -> None:  # fmt: skip
        self.config = config
        self.consumer = consumer
        self.plane = plane
        self.store = store
        self.sink = sink
        self.process = process
        self.core = op.GroupConsumerOperator(config.member_id)
        self._queue: collections.deque[Any] = collections.deque()
        self._capacity = 100 * config.max_poll_records
        self._lock = threading.Condition()
        self._busy = False  # the process thread holds a message it took from the queue
        self._epoch = 0  # bumped by every reset and queue drop: a message taken before it is not submitted
        self._polling = False
        self._stop = threading.Event()
        self._last_seq = 0
        self._pending_ack: Command | None = None
        self._reset_error: str | None = None  # why the reset being carried out failed
        self._error: BaseException | None = None
        self.events: list[str] = []  # what happened, for the operator's log and for tests

    # --- start ------------------------------------------------------------------------------------------

    def start(self) -> None:
        cfg = self.config
        plane = self.plane
        plane.publish(MemberRegistration(plane.region, cfg.group, cfg.member_id, cfg.region_index))
        index = plane.read(lambda v: v.group_region_index(cfg.group))
        if index != cfg.region_index:
            raise RegionMisconfigured(
                f"group {cfg.group!r} belongs to region index {index}, this member to {cfg.region_index}: every "
                "member of a group must be in the same consistent region"
            )
        initial = plane.read(lambda v: v.initial_offsets(cfg.group))
        if initial is None:
            mine = self.consumer.start_offsets(self.consumer.partitions_of(cfg.topics), cfg.start_position)
            plane.publish(InitialOffsets(plane.region, cfg.group, cfg.member_id, mine))
            initial = plane.read(lambda v: v.initial_offsets(cfg.group)) or mine  # the first in the log wins
        self._core(self.core.subscribe, initial)
        self._last_seq = plane.read(lambda v: v.command.seq if v.command is not None else 0)
        self.consumer.subscribe(list(cfg.topics), self._on_revoked, self._on_assigned)
        self._polling = True
        self._process_thread = threading.Thread(target=self._process_loop, name="region-process", daemon=True)
        self._process_thread.start()

    # --- the event thread -------------------------------------------------------------------------------

    def run(self, until: Callable[[], bool] = lambda: False) -> None:
        """The event thread's loop (call it on the thread that owns the consumer) until ``until()`` or stop.

        A member asked to leave (``until()``) in the middle of a cycle first follows the region until the cycle
        is over (`in_cycle`), at most twice the reset timeout: its drain committed offsets beyond its published
        output, and a checkpoint file it prepared is published or discarded only by the controller's next
        resume or reset. Leaving before, its prepared output would never be published while the region resumes
        its partitions after it."""
        leave_by: int | None = None
        while not self._stop.is_set():
            if until():
                if not self.in_cycle():
                    break
                if leave_by is None:
                    leave_by = _now() + 2 * self.config.reset_timeout_ms
                    self.events.append(f"leaving after the cycle under way ({self.core.state.value})")
                elif _now() >= leave_by:
                    self.events.append(f"leaving in the middle of a cycle ({self.core.state.value})")
                    break
            if self._error is not None:
                raise self._error
            self._follow_commands()
            if self._polling and len(self._queue) < self._capacity:
                records = self.consumer.poll(0.2)
                self._core(self.core.poll_returned)
                with self._lock:
                    live = self.core.offsets.partitions()
                    for r in records:
                        tp = TopicPartition(r.topic, r.partition)
                        if tp in live:
                            self._queue.append(r)
                    self._lock.notify_all()
            else:
                self.plane.wait_for(lambda v: v.command if v.command and v.command.seq > self._last_seq else None,
                                    0.2)  # fmt: skip
                self.consumer.serve()  # a rebalance while drained or resetting must still reach the core

    def in_cycle(self) -> bool:
        """Drained for a checkpoint, or holding prepared output, that the controller has not resolved yet."""
        return self.core.state in (OperatorState.DRAINING, OperatorState.DRAINED) or self.sink.has_prepared()

    def stop(self) -> None:
        self._stop.set()
        with self._lock:
            self._lock.notify_all()

    def close(self) -> None:
        self.stop()
        self.consumer.close()

    def _on_revoked(self, partitions: frozenset[TopicPartition]) -> None:
        self.events.append(f"revoked {sorted(partitions)} in {self.core.state.value}")
        self._core(self.core.on_partitions_revoked, partitions)

    def _on_assigned(self, partitions: frozenset[TopicPartition]) -> None:
        assignable = self.consumer.partitions_of(self.config.topics)
        missing = [tp for tp in assignable if tp not in self.core.initial_offsets]
        start = self.consumer.start_offsets(missing, self.config.start_position) if missing else {}
        self.events.append(f"assigned {sorted(partitions)} in {self.core.state.value}")
        self._core(self.core.on_partitions_assigned, partitions, assignable, start)

    def metrics_line(self) -> str:
        """The seed's operator metrics, Prometheus-style."""
        m, labels = self.core.metrics, f'member="{self.config.member_id}",group="{self.config.group}"'
        return (f"metrics groupstream_region_partitions_assigned{{{labels}}} {self.core.n_partitions_assigned} "
                f"groupstream_region_last_drain_ms{{{labels}}} {m.last_drain_ms} "
                f"groupstream_region_max_drain_ms{{{labels}}} {m.max_drain_ms}")  # fmt: skip

    # --- commands ---------------------------------------------------------------------------------------

    def _follow_commands(self) -> None:
        for command in self.plane.read(lambda v: v.commands_after(self._last_seq)):
            self._last_seq = command.seq
            self._on_command(command)

    def _on_command(self, c: Command) -> None:
        cfg = self.config
        if c.kind == "drain":
            self._pending_ack = c
            self._core(self.core.drain, _now(), cfg.operator_driven)
            if self.core.state is OperatorState.DRAINED:
                self._ack(c)
        elif c.kind == "checkpoint":
            assert c.checkpoint_id is not None
            try:
                # every member has drained (committed its share of the cut) before the controller asks for the
                # checkpoint: the committed offsets read now are the cut's, also for partitions others own
                committed = (self.consumer.committed(self.core.checkpoint_partitions)
                             if self.core.state is OperatorState.DRAINED else {})  # fmt: skip
                data = self.core.checkpoint(committed)
                self.store.save(c.checkpoint_id, cfg.member_id, data.to_json())
                self.sink.prepare(c.checkpoint_id)
            except Exception as e:  # the controller resets the region to the last complete checkpoint
                self.events.append(f"checkpoint {c.checkpoint_id} failed: {type(e).__name__}: {e}")
                self._ack(c, f"{type(e).__name__}: {e}")
                return
            self.events.append(f"checkpoint {c.checkpoint_id}: {dict(data.offset_manager)}")
            self.events.append(self.metrics_line())
            self._ack(c)
        elif c.kind == "resume":
            state = self.plane.read(lambda v: v.state)
            if state is not None and state.last_complete is not None:
                self.sink.commit(state.last_complete)
            self._core(self.core.resume)
        elif c.kind == "retire":
            assert c.checkpoint_id is not None
            self.store.retire(c.checkpoint_id)
        elif c.kind == "reset":
            self._reset(c)

    def _reset(self, c: Command) -> None:
        cfg = self.config
        self._reset_error = None
        with self._lock:
            # Everything read before the reset is read again after it: the queue goes now, with the sink's
            # buffer, so the process thread cannot take a stale message in between; one it holds already is
            # not submitted (the epoch moved).
            self._epoch += 1
            self._queue.clear()
            self.sink.reset(c.checkpoint_id)
        if c.checkpoint_id is None:
            self.events.append(f"reset to initial state, attempt {c.attempt}")
            self._core(self.core.reset_to_initial)
        else:
            files = self._checkpoint_files(c.checkpoint_id)
            # a member that joined after the checkpoint owned nothing at that cut: it contributes nothing, and
            # learns the cut from the others' files when the merge does not complete
            ckpt = files.pop(cfg.member_id, None) or op.OperatorCheckpoint(frozenset(), {}, {})
            key = MergeKey(c.checkpoint_id, c.attempt)
            self.events.append(f"reset to checkpoint {c.checkpoint_id}, attempt {c.attempt}")
            self._core(self.core.reset, ckpt, key, merge_timeout_ms(cfg.reset_timeout_ms, cfg.max_poll_interval_ms),
                       files)  # fmt: skip
        self._ack(c, self._reset_error)  # with an error, the controller tries the reset again

    def _checkpoint_files(self, checkpoint_id: int) -> dict[str, op.OperatorCheckpoint]:
        """Every member's checkpoint ``checkpoint_id`` in the shared store. This member's own must be read (it
        is what it contributes to the merge); another's that cannot be is left out, with a note: the fallback
        takes each partition from any file that has it."""
        files: dict[str, op.OperatorCheckpoint] = {}
        for member, raw in self.store.load_all(checkpoint_id).items():
            try:
                files[member] = op.OperatorCheckpoint.from_json(raw)
            except (ValueError, KeyError, TypeError) as e:
                if member == self.config.member_id:
                    raise
                self.events.append(f"checkpoint {checkpoint_id} of member {member} unreadable: {e}")
        return files

    def _ack(self, c: Command, error: str | None = None) -> None:
        self.plane.publish(Ack(self.plane.region, self.config.member_id, c.seq, c.kind, error))

    # --- effects ----------------------------------------------------------------------------------------

    def _core(self, call: Callable[..., list[op.Effect]], *args: Any) -> None:
        """Run one core event under the lock the process thread reads the offset manager with, then carry
        out its effects (outside the lock: they do I/O)."""
        with self._lock:
            effects = call(*args)
        for e in effects:
            self._do(e)

    def _do(self, e: op.Effect) -> None:
        cfg = self.config
        if isinstance(e, op.StopPolling):
            self._polling = False
        elif isinstance(e, op.StartPolling):
            self._polling = True
        elif isinstance(e, op.DropQueued):
            with self._lock:
                self._epoch += 1
                if e.partitions is None:
                    self._queue.clear()
                else:
                    kept = [r for r in self._queue if TopicPartition(r.topic, r.partition) not in e.partitions]
                    self._queue.clear()
                    self._queue.extend(kept)
        elif isinstance(e, op.Seek):
            for tp, offset in e.offsets.items():
                self.consumer.seek(tp, offset)
            self.events.append(f"seek {dict(sorted(e.offsets.items()))}")
        elif isinstance(e, op.AwaitQueueEmpty):
            with self._lock:
                self._lock.wait_for(lambda: (not self._queue and not self._busy) or self._stop.is_set())
            self._core(self.core.queue_empty)
        elif isinstance(e, op.Commit):
            try:
                self.consumer.commit_sync(e.offsets)
                error = None
            except Exception as exc:
                error = f"{type(exc).__name__}: {exc}"
            self._core(self.core.commit_done, error)
        elif isinstance(e, op.CommitCut):
            # the offsets of partitions other members own, too: the group's committed offsets go back to the cut
            try:
                self.consumer.commit_sync(e.offsets)
                error = None
                self.events.append(f"committed the cut {dict(sorted(e.offsets.items()))}")
            except Exception as exc:
                error = f"{type(exc).__name__}: {exc}"
            self._core(self.core.cut_committed, error)
        elif isinstance(e, op.ResetFailed):
            self.events.append(f"reset failed: {e.reason}")
            self._reset_error = e.reason
        elif isinstance(e, op.FetchCommitted):
            committed = self.consumer.committed(e.partitions)
            self._core(self.core.committed_fetched, _now(), committed)
            if self.core.state is OperatorState.DRAINED and self._pending_ack is not None:
                self._ack(self._pending_ack)
                self._pending_ack = None
        elif isinstance(e, op.TriggerReset):
            self.events.append(f"reset requested: {e.reason}")
            self.plane.publish(Ack(self.plane.region, cfg.member_id, self._last_seq, RESET_REQUEST, e.reason))
        elif isinstance(e, op.RefuseDrain):
            if self._pending_ack is not None:
                self._ack(self._pending_ack, e.reason)
                self._pending_ack = None
        elif isinstance(e, op.ContributeMerge):
            self.plane.publish(MergeContribution(self.plane.region, e.key.checkpoint_id, e.key.reset_attempt,
                                                 cfg.member_id, e.assignable, dict(e.offsets)))  # fmt: skip
        elif isinstance(e, op.AwaitMerge):
            merged = self.plane.wait_for(lambda v: v.merges.merged(e.key), e.timeout_ms / 1000)
            if merged is None:
                self.events.append(f"merge {e.key} incomplete after {e.timeout_ms} ms: the checkpoint files used")
            self._core(self.core.merge_done, e.key, merged)
        elif isinstance(e, op.Restart):
            raise RuntimeError(f"member {cfg.member_id} must restart: {e.reason}")

    # --- the process thread -----------------------------------------------------------------------------

    def _process_loop(self) -> None:
        try:
            while not self._stop.is_set():
                with self._lock:
                    self._lock.wait_for(lambda: bool(self._queue) or self._stop.is_set())
                    if self._stop.is_set():
                        return
                    record = self._queue.popleft()
                    self._busy = True
                    epoch = self._epoch
                try:
                    row = self.process(record)
                    with self._lock:
                        tp = TopicPartition(record.topic, record.partition)
                        # a message whose partition was taken away, or that a reset made stale, is not submitted
                        if epoch == self._epoch and tp in self.core.offsets.partitions():
                            if row is not None:
                                self.sink.write([row])
                            self.core.submitted(tp, record.offset)
                finally:
                    with self._lock:
                        self._busy = False
                        self._lock.notify_all()
        except BaseException as e:  # surfaces on the event thread
            self._error = e


def _now() -> int:
    return time.monotonic_ns() // 1_000_000
