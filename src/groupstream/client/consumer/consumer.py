"""The Consumer: the application-side shell of seed 002's threading design.

A background network thread owns the connections, the subscription, the group membership (classic or KIP-848),
commits, offset lookups and fetches. The application thread talks to it through events and waits on futures;
the fetch buffer is the one structure both touch. ``poll`` runs what must run on the application thread first
(rebalance listener callbacks, commit callbacks), then returns buffered records of partitions that are still
owned and not paused, moving their positions. Heartbeats never wait for the application: a slow ``poll`` loop
only matters through ``max.poll.interval.ms``.

Blocking calls (``commit``, ``committed``, ``unsubscribe``, ``close``...) keep running callbacks while they wait,
so a call that needs a rebalance step to finish cannot deadlock on its own listener.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import Future
from types import TracebackType
from typing import Any

from groupstream.assignment.types import TopicPartition
from groupstream.client.consumer.commit_manager import CommitManager, OffsetAndMetadata
from groupstream.client.consumer.config import ConsumerConfig
from groupstream.client.consumer.consumer_core import ConsumerCore, NetworkCall
from groupstream.client.consumer.coordinator_locator import GroupCoordinatorLocator
from groupstream.client.consumer.errors import ConsumerClosedError, PartitionNotAssignedError
from groupstream.client.consumer.fetch_buffer import FetchBuffer
from groupstream.client.consumer.fetcher import Fetcher
from groupstream.client.consumer.membership_api import NO_GROUP_IDENTITY, GroupMetadata
from groupstream.client.consumer.metrics import ConsumerMetrics
from groupstream.client.consumer.offsets_manager import EARLIEST, LATEST, OffsetsManager
from groupstream.client.consumer.records import ConsumerRecord, ConsumerRecords
from groupstream.client.consumer.topic_lookup import TopicLookups
from groupstream.client.errors import ClientError
from groupstream.client.metadata import ClusterMetadata
from groupstream.client.net.metadata import MetadataCache
from groupstream.client.net.network_client import NetworkClient
from groupstream.client.net.network_thread import EventTimeoutError, NetworkThread, monotonic_ms
from groupstream.protocol.topic_partition import ByPartition

__all__ = ["Consumer", "WakeupError"]

log = logging.getLogger("groupstream.client.consumer")

Partitions = Iterable[TopicPartition | tuple[str, int]]
_WAIT_SLICE_S = 0.1
_POLL_NOTE_S = 0.01


class WakeupError(ClientError):
    """``wakeup()`` was called: a blocked ``poll`` returns by raising this (as Kafka's WakeupException)."""


def _tp(p: TopicPartition | tuple[str, int]) -> TopicPartition:
    return p if isinstance(p, TopicPartition) else TopicPartition(str(p[0]), int(p[1]))


class Consumer:
    """Consumes records from Kafka topics, alone (``assign``) or in a group (``subscribe``)."""

    def __init__(self, config: Mapping[str, Any] | None = None, **aliases: Any) -> None:
        self.config = ConsumerConfig.from_mapping({**(config or {}), **aliases})
        cfg = self.config
        net = cfg.network
        self._closed = False
        self._buffer = FetchBuffer()
        self._metadata = MetadataCache(max_age_ms=net.metadata_max_age_ms, retry_backoff_ms=net.retry_backoff_ms)
        locator = commits = None
        self._core: ConsumerCore
        if cfg.group_id is not None:
            locator = GroupCoordinatorLocator(cfg.group_id, self._metadata, net.retry_backoff_ms, net.retry_backoff_max_ms)
            commits = CommitManager(
                cfg.group_id,
                locator,
                lambda: self._core.identity(),
                lambda code, now: self._core.on_membership_error(code, now),
                lambda: self._core.left_group_error(),
                net.retry_backoff_ms,
            )
        self._commits = commits
        self._metrics = ConsumerMetrics(monotonic_ms)
        if commits is not None:
            commits.metrics = self._metrics
        self._offsets = OffsetsManager(self._buffer, self._metadata, commits, cfg.auto_offset_reset, cfg.isolation_level,
                                       net.retry_backoff_ms, cfg.default_api_timeout_ms)  # fmt: skip
        fetcher = Fetcher(cfg, self._buffer, self._metadata, self._offsets.out_of_range)
        fetcher.metrics = self._metrics
        self._metrics.lag = lambda: fetcher.lags(self._buffer.positions())
        self._core = ConsumerCore(cfg, self._buffer, self._metadata, locator, commits, self._post, self._metrics)
        managers: list[Any] = [self._core]
        if locator is not None and commits is not None:
            managers += [locator, commits]
        self._topic_lookups = TopicLookups(net.retry_backoff_ms)
        managers += [self._offsets, fetcher, self._topic_lookups]
        client = NetworkClient(net, self._metadata, monotonic_ms)
        self._thread = NetworkThread(client, managers, self._core.process, name=f"groupstream-consumer-{net.client_id}")
        self._buffer.on_room = self._thread.wakeup
        self._poll_noted = -1.0
        self._thread.start()
        self._key_deserializer = cfg.key_deserializer
        self._value_deserializer = cfg.value_deserializer

    # --- talking to the network thread ------------------------------------------------------------------------

    def _post(self, fn: Callable[[], None]) -> None:
        self._thread.add_event(fn)  # type: ignore[arg-type]  # a plain callable: ConsumerCore.process runs it

    def _call(self, fn: Callable[[int, Future[Any]], None], timeout_s: float | None = None) -> Any:
        """Run ``fn`` on the network thread and wait for the future it completes, running callbacks meanwhile."""
        self._check_open()
        timeout = self.config.default_api_timeout_ms / 1000 if timeout_s is None else timeout_s
        deadline_ms = monotonic_ms() + int(timeout * 1000)
        future = self._thread.submit(NetworkCall(fn, deadline_ms))
        future.add_done_callback(lambda _f: self._buffer.nudge())
        while not future.done():
            self._run_tasks()
            self._buffer.wait_tasks(1.0, future.done)
        self._run_tasks()
        try:
            return future.result()
        except EventTimeoutError:
            raise TimeoutError(f"the consumer did not complete this within {round(timeout, 3):g}s") from None

    @staticmethod
    def _settle(future: Future[Any]) -> Callable[[Any, BaseException | None], None]:
        def done(result: Any, error: BaseException | None) -> None:
            if future.done():
                return
            if error is not None:
                future.set_exception(error)
            else:
                future.set_result(result)

        return done

    def _run_tasks(self) -> None:
        for task in self._buffer.take_tasks():
            task()

    def _check_open(self) -> None:
        if self._closed:
            raise ConsumerClosedError("the consumer is closed")
        if not self._thread.alive:
            raise ConsumerClosedError(f"the consumer's network thread stopped: {self._thread.failure!r}")

    # --- subscription -----------------------------------------------------------------------------------------

    def subscribe(self, topics: Iterable[str] | str | re.Pattern[str], listener: Any = None) -> None:
        """Join ``group.id`` for ``topics`` (names), or for every topic matching a regular expression (a
        ``re.Pattern``, or a string starting with ``^`` as librdkafka reads it). ``listener`` may define
        ``on_partitions_revoked``, ``on_partitions_assigned`` and ``on_partitions_lost``; they are called with a
        sorted list of `TopicPartition` on this thread, inside ``poll``."""
        pattern: re.Pattern[str] | None = None
        names: frozenset[str] = frozenset()
        if isinstance(topics, re.Pattern):
            pattern = topics
        elif isinstance(topics, str) and topics.startswith("^"):
            pattern = re.compile(topics)
        else:
            items = [topics] if isinstance(topics, str) else list(topics)
            if not items or not all(isinstance(t, str) and t for t in items):
                raise ValueError(f"subscribe() takes topic names or a pattern, got {topics!r}")
            names = frozenset(items)

        def go(now: int, future: Future[Any]) -> None:
            self._core.subscribe(names, pattern, listener, now)
            future.set_result(None)

        self._call(go)

    def assign(self, partitions: Partitions, *, offsets: ByPartition[int] | None = None) -> None:
        """Own exactly ``partitions``, outside any group (positions: committed offsets of ``group.id`` if set,
        else ``auto.offset.reset``). ``offsets`` starts some of them there, as ``seek`` would, but with no offset
        lookup in between: with ``auto.offset.reset=none`` an assign followed by a seek could fail first."""
        parts = frozenset(_tp(p) for p in partitions)
        starts = {_tp(p): int(o) for p, o in (offsets or {}).items()}
        for tp, offset in starts.items():
            if tp not in parts:
                raise PartitionNotAssignedError(f"assign() was given an offset for {tp}, which it does not assign")
            if offset < 0:
                raise ValueError(f"assign() needs offsets >= 0, got {offset} for {tp}")

        def go(now: int, future: Future[Any]) -> None:
            self._core.assign(parts, now)
            for tp, offset in starts.items():
                self._buffer.seek(tp, offset)
            future.set_result(None)

        self._call(go)

    def unsubscribe(self) -> None:
        """Leave the group (revoking, so positions are committed with auto commit) or drop the assignment."""
        self._call(lambda now, f: self._core.unsubscribe(now, lambda e: self._settle(f)(None, e)))

    def group_metadata(self) -> GroupMetadata:
        """The member's group, generation, member id and instance id right now, for a transactional producer's
        ``send_offsets_to_transaction(offsets, consumer.group_metadata())`` (KIP-447)."""
        group_id = self.config.group_id
        if group_id is None:
            raise ValueError("group_metadata() needs group.id")
        instance = self.config.group_instance_id

        def go(now: int, f: Future[Any]) -> None:
            m = self._core.membership
            ident = m.commit_identity() if m is not None else NO_GROUP_IDENTITY
            f.set_result(
                GroupMetadata(group_id, ident.generation_or_epoch, ident.member_id, ident.group_instance_id or instance)
            )

        result: GroupMetadata = self._call(go)
        return result

    def assignment(self) -> list[TopicPartition]:
        return sorted(self._buffer.assignment())

    def subscription(self) -> list[str]:
        return sorted(self._core.topics)

    # --- records --------------------------------------------------------------------------------------------------

    def poll(self, timeout: float | None = 1.0) -> ConsumerRecords:
        """Records that arrived, waiting up to ``timeout`` seconds (None: until some arrive) for the first. Runs
        due rebalance and commit callbacks first; raises errors the consumer could not handle itself (a fenced
        static member, an offset out of range with ``auto.offset.reset=none``, a listener that raised)."""
        records: list[ConsumerRecord] = []
        max_records = self.config.max_poll_records

        def take() -> bool:
            nonlocal records
            records = self._buffer.drain(max_records)
            return bool(records)

        got = self._wait_for_records(timeout, take)
        self._metrics.polled(len(records), monotonic_ms())
        return ConsumerRecords(self._deserialize(records)) if got else ConsumerRecords([])

    def _wait_for_records(self, timeout: float | None, take: Callable[[], bool]) -> bool:
        """``poll``'s loop: run callbacks, raise pending errors, ``take()`` records; wait for some (at most
        ``timeout`` seconds, None: no limit) until it took any. Returns whether it did.

        The network thread hears of the call (``max.poll.interval.ms``, a rejoin): at once, unless it heard of
        one less than ``_POLL_NOTE_S`` ago, and always before this call waits. Each telling wakes it, and a
        loop of quick polls that find records at once would wake it once a call for nothing (a drain that
        makes room for a fetch wakes it anyway, see ``FetchBuffer.on_room``)."""
        self._check_open()
        now = time.monotonic()
        deadline = None if timeout is None else now + max(timeout, 0)
        noted = now - self._poll_noted >= _POLL_NOTE_S  # told in this call
        if noted:
            self._note_poll(now)
        while True:
            self._run_tasks()
            self._raise_pending()
            if take():
                return True
            if not noted:
                self._note_poll(now)
                noted = True
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                return False
            if self._buffer.wait(_WAIT_SLICE_S if remaining is None else min(remaining, 1.0)):
                raise WakeupError("wakeup() interrupted poll()")
            if not self._thread.alive:
                self._check_open()

    def _note_poll(self, now: float) -> None:
        self._poll_noted = now
        self._post(self._poll_called)

    def metrics(self) -> dict[str, float]:
        """The consumer's measurements by Kafka's metric names: ``records-lag-max`` (the largest lag among its
        partitions, from the log ends its fetches saw), ``records-consumed-rate`` and ``-total``,
        ``fetch-latency-avg``/``-max``, ``fetch-rate``, ``bytes-consumed-rate``, ``commit-latency-avg``/``-max``,
        ``rebalance-total``, ``rebalance-latency-avg``/``-max``, ``last-poll-seconds-ago``; rates and averages
        over the last minute."""
        return self._metrics.snapshot()

    def run_callbacks(self) -> None:
        """Run due rebalance and commit callbacks and count as a poll for ``max.poll.interval.ms``, without
        returning records: for an application that stopped consuming for a while (it drains, or waits for a
        coordinated reset) but must keep its group membership current."""
        self._check_open()
        self._post(self._poll_called)
        self._run_tasks()
        self._raise_pending()

    def _poll_called(self) -> None:
        membership = self._core.membership
        if membership is not None:
            membership.poll_called(self._core.now_ms)

    def poll_arrow(self, timeout: float | None = 1.0) -> Any:
        """Like ``poll``, as one ``pyarrow.RecordBatch`` with Spark's Kafka columns (key, value, topic,
        partition, offset, timestamp, timestampType, headers)."""
        from groupstream.client.consumer.arrow import COLUMNS_SUPPORTED, decode_fetch, join, records_to_arrow

        if self._key_deserializer is not None or self._value_deserializer is not None or not COLUMNS_SUPPORTED:
            return records_to_arrow(self.poll(timeout).to_list())
        parts: list[Any] = []
        max_records = self.config.max_poll_records

        def take() -> bool:
            nonlocal parts
            parts = self._buffer.drain_arrow(max_records, decode_fetch)
            return bool(parts)

        self._wait_for_records(timeout, take)
        rows = join(parts)
        self._metrics.polled(rows.num_rows, monotonic_ms())
        return rows

    def __iter__(self) -> Iterator[ConsumerRecord]:
        while not self._closed:
            yield from self.poll(1.0)

    def _deserialize(self, records: list[ConsumerRecord]) -> list[ConsumerRecord]:
        kd, vd = self._key_deserializer, self._value_deserializer
        if kd is None and vd is None:
            return records
        return [
            r._replace(key=kd(r.key) if kd else r.key, value=vd(r.value) if vd else r.value) for r in records
        ]

    def _raise_pending(self) -> None:
        error = self._buffer.take_error()
        if error is not None:
            raise error
        membership = self._core.membership
        fatal = membership.fatal_error() if membership is not None else None
        if fatal is not None:
            raise fatal
        refused = self._thread.client.fatal  # a refused authentication: no request can succeed
        if refused is not None:
            raise refused

    def wakeup(self) -> None:
        """Make a ``poll`` blocked on another thread raise `WakeupError`."""
        self._buffer.wakeup()

    # --- positions ------------------------------------------------------------------------------------------------

    def position(self, partition: TopicPartition | tuple[str, int], timeout: float | None = None) -> int:
        """The offset of the next record ``poll`` returns for ``partition`` (waiting for it to be known)."""
        tp = _tp(partition)
        self._require_assigned([tp])
        limit = self.config.default_api_timeout_ms / 1000 if timeout is None else timeout
        deadline = time.monotonic() + limit
        while True:
            self._run_tasks()
            position = self._buffer.position(tp)
            if position is not None:
                return position
            self._raise_pending()
            if time.monotonic() >= deadline:
                raise TimeoutError(f"the position of {tp} was not known within {limit:g}s")
            self._buffer.wait_position(tp, min(deadline - time.monotonic(), 1.0))

    def seek(self, partition: TopicPartition | tuple[str, int], offset: int) -> None:
        tp = _tp(partition)
        if offset < 0:
            raise ValueError(f"seek() needs an offset >= 0, got {offset}")
        self._require_assigned([tp])
        self._buffer.seek(tp, offset)

    def seek_to_beginning(self, partitions: Partitions | None = None) -> None:
        self._seek_to(partitions, EARLIEST)

    def seek_to_end(self, partitions: Partitions | None = None) -> None:
        self._seek_to(partitions, LATEST)

    def _seek_to(self, partitions: Partitions | None, spec: int) -> None:
        tps = self._buffer.assignment() if partitions is None else frozenset(_tp(p) for p in partitions)
        self._require_assigned(tps)
        found = self._lookup(dict.fromkeys(tps, spec))
        for tp, (offset, _ts) in found.items():
            self._buffer.seek(tp, offset)

    def _lookup(self, wanted: dict[TopicPartition, int], timeout: float | None = None) -> dict[TopicPartition, tuple[int, int]]:
        timeout_ms = self.config.default_api_timeout_ms if timeout is None else int(timeout * 1000)
        return self._call(lambda now, f: self._offsets.lookup(wanted, now, timeout_ms, self._settle(f)), timeout)  # type: ignore[no-any-return]

    def beginning_offsets(self, partitions: Partitions, timeout: float | None = None) -> dict[TopicPartition, int]:
        found = self._lookup(dict.fromkeys((_tp(p) for p in partitions), EARLIEST), timeout)
        return {tp: o for tp, (o, _ts) in sorted(found.items())}

    def end_offsets(self, partitions: Partitions, timeout: float | None = None) -> dict[TopicPartition, int]:
        found = self._lookup(dict.fromkeys((_tp(p) for p in partitions), LATEST), timeout)
        return {tp: o for tp, (o, _ts) in sorted(found.items())}

    def offsets_for_times(
        self, timestamps: ByPartition[int], timeout: float | None = None
    ) -> dict[TopicPartition, tuple[int, int] | None]:
        """For each partition, the earliest (offset, timestamp) whose timestamp is at or after the given one
        (ms), or None when no record is that late."""
        wanted = {_tp(p): int(ts) for p, ts in timestamps.items()}
        for tp, ts in wanted.items():
            if ts < 0:
                raise ValueError(f"offsets_for_times() needs timestamps >= 0, got {ts} for {tp}")
        found = self._lookup(wanted, timeout)
        return {tp: (found[tp] if tp in found and found[tp][0] >= 0 else None) for tp in sorted(wanted)}

    def describe_topics(self, topics: Iterable[str] | None = None, timeout: float | None = None) -> ClusterMetadata:
        """The cluster's brokers and ``topics`` (None: every topic) with their ids, partitions and leaders, asked
        of a broker now rather than read from the consumer's cache: for a caller that must know whether a topic
        still exists, and whether it is still the topic it was (its id). A topic that does not exist is in the
        answer with its error code (UNKNOWN_TOPIC_OR_PARTITION); none is created."""
        names = None if topics is None else tuple(sorted(set(topics)))
        timeout_ms = self.config.default_api_timeout_ms if timeout is None else int(timeout * 1000)
        return self._call(  # type: ignore[no-any-return]
            lambda now, f: self._topic_lookups.lookup(names, now, timeout_ms, self._settle(f)), timeout
        )

    # --- commits ---------------------------------------------------------------------------------------------------

    def commit(
        self,
        offsets: ByPartition[int | OffsetAndMetadata] | None = None,
        asynchronous: bool = False,
        callback: Callable[[BaseException | None, dict[TopicPartition, OffsetAndMetadata]], None] | None = None,
    ) -> dict[TopicPartition, OffsetAndMetadata] | None:
        """Commit ``offsets`` (the next offset to read, per partition; default: the current positions of
        every owned partition). Synchronous by default: returns what was committed or raises (a
        `CommitFailedError` says why the group refused). ``asynchronous=True`` returns at once;
        ``callback(error, offsets)`` runs on this thread in a later ``poll`` (or ``commit``/``close``)."""
        commits = self._require_group("commit")
        if offsets is None:
            chosen = {tp: OffsetAndMetadata(o) for tp, o in self._buffer.positions().items()}
        else:
            chosen = {
                _tp(p): o if isinstance(o, OffsetAndMetadata) else OffsetAndMetadata(int(o)) for p, o in offsets.items()
            }
        timeout_ms = self.config.default_api_timeout_ms
        if not asynchronous:
            result: dict[TopicPartition, OffsetAndMetadata] = self._call(
                lambda now, f: commits.commit(chosen, now, timeout_ms, self._settle(f))
            )
            if callback is not None:
                callback(None, result)
            return result

        def done(result: Any, error: BaseException | None) -> None:
            if callback is not None:
                self._buffer.add_task(lambda: callback(error, chosen))
            elif error is not None:
                log.warning("asynchronous commit failed: %s", error)

        self._check_open()
        self._post(lambda: commits.commit(chosen, self._core.now_ms, timeout_ms, done))
        return None

    def committed(self, partitions: Partitions, timeout: float | None = None) -> dict[TopicPartition, OffsetAndMetadata | None]:
        commits = self._require_group("committed")
        tps = frozenset(_tp(p) for p in partitions)
        timeout_ms = self.config.default_api_timeout_ms if timeout is None else int(timeout * 1000)
        found: dict[TopicPartition, OffsetAndMetadata] = self._call(
            lambda now, f: commits.fetch(tps, now, timeout_ms, self._settle(f)), timeout
        )
        return {tp: found.get(tp) for tp in sorted(tps)}

    def _require_group(self, what: str) -> CommitManager:
        if self._commits is None:
            raise ValueError(f"{what}() needs group.id: offsets are committed to a group")
        return self._commits

    # --- pause -------------------------------------------------------------------------------------------------------

    def pause(self, partitions: Partitions) -> None:
        """Stop fetching and returning records of ``partitions``; they stay paused across rebalances while they
        stay assigned (KIP-822)."""
        unknown = self._buffer.set_paused([_tp(p) for p in partitions], True)
        if unknown:
            raise PartitionNotAssignedError(f"pause(): not assigned: {', '.join(map(str, sorted(unknown)))}")

    def resume(self, partitions: Partitions) -> None:
        unknown = self._buffer.set_paused([_tp(p) for p in partitions], False)
        if unknown:
            raise PartitionNotAssignedError(f"resume(): not assigned: {', '.join(map(str, sorted(unknown)))}")

    def paused(self) -> list[TopicPartition]:
        return sorted(self._buffer.paused())

    def _require_assigned(self, partitions: Iterable[TopicPartition]) -> None:
        owned = self._buffer.assignment()
        missing = sorted(tp for tp in partitions if tp not in owned)
        if missing:
            raise PartitionNotAssignedError(f"not assigned to this consumer: {', '.join(map(str, missing))}")

    # --- closing -------------------------------------------------------------------------------------------------------

    def close(self, timeout: float | None = 30.0) -> None:
        """Commit positions (with auto commit), leave the group (running the revocation callback here), and stop,
        all within ``timeout`` seconds (None: 30, Kafka's default close timeout).

        The final commit and the LeaveGroup are best effort, as in Kafka: they may wait for an unreachable
        coordinator until the deadline, never past it, and what is not done by then is given up (logged). A
        consumer with nothing to commit and no group joined returns at once: requests that cannot be sent
        because no broker can be reached (metadata, FindCoordinator) are not waited for."""
        if self._closed:
            return
        deadline = time.monotonic() + (30.0 if timeout is None else max(0.0, timeout))

        def left() -> float:
            return max(0.0, deadline - time.monotonic())

        try:
            if self._thread.alive:
                try:
                    self._call(lambda now, f: self._core.final_commit(now, lambda e: self._settle(f)(None, e)), left())
                except Exception as e:  # closing goes on: the commit is best effort, as in Kafka
                    log.warning("the final commit on close failed: %s%s", e, self._unreachable_note())
                try:
                    self._call(lambda now, f: self._core.unsubscribe(now, lambda e: self._settle(f)(None, e)), left())
                except Exception as e:
                    log.warning("leaving the group on close failed: %s%s", e, self._unreachable_note())
        finally:
            self._closed = True
            self._thread.close(int(left() * 1000), ConsumerClosedError("the consumer closed"))
            self._buffer.wakeup()

    def _unreachable_note(self) -> str:
        why = self._thread.client.unreachable
        return f" ({why})" if why is not None else ""

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Consumer({self.config.network.client_id!r}, group={self.config.group_id!r}{', closed' if self._closed else ''})"
