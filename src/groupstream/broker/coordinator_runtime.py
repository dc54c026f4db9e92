"""The asyncio side of the group coordinator: one pure shard per `__consumer_offsets` partition, single writer.

A group request goes to the shard of its group's partition. ``shard.handle`` returns a `CoordinatorResult`;
the runtime encodes its records into one batch, appends it to the partition and replays each record into the
shard, then answers the requests the result addresses once the partition is durable up to the end of that
append. This is the order of Kafka's ``CoordinatorRuntime`` (records are replayed when written, responses wait
for the write to be committed) and it matters: the next request the shard handles must see the state the
previous one produced, while nobody may be *told* about state that could still be lost. A result without
records also waits for every earlier write of its shard to be durable, so a read (OffsetFetch) never reports
a commit that a crash could take back.

A shard is LOADING while its partition is replayed (in chunks that yield to the event loop): its requests get
COORDINATOR_LOAD_IN_PROGRESS. ``unload`` (our failover on one node, also used after a failed write) answers
everything the shard holds with NOT_COORDINATOR and keeps answering so until ``reload``.

If an append fails, the requests of that result are answered with NOT_COORDINATOR (a storage error, as Kafka
maps KAFKA_STORAGE_ERROR) or UNKNOWN_SERVER_ERROR (a batch too large, as Kafka maps RECORD_LIST_TOO_LARGE),
and the shard is reloaded from its log: the in-memory state a handler may have built for records that were
never written must not survive. A failed flush is treated the same way. After a storage error the shard is
FAILED for a while before that reload (1 s, doubling up to 10 s while writes keep failing): a full disk would
otherwise have every retried commit reload the shard. While FAILED its requests get COORDINATOR_NOT_AVAILABLE;
a reload that writes successfully again ends the episode.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import logging
import time
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Protocol

from groupstream.broker import group_errors
from groupstream.broker.group_routing import partition_for
from groupstream.coordinator.request import ShardRequest
from groupstream.coordinator.result import (
    CancelTimer,
    CoordinatorRecord,
    CoordinatorResult,
    RequestToken,
    ScheduleTimer,
    TimerOp,
)
from groupstream.protocol.compiler import CompiledApi
from groupstream.protocol.error_codes import ErrorCode
from groupstream.protocol.errors import LocalProtocolError, PeerProtocolError
from groupstream.protocol.group_records import coordinator_records, encode_record
from groupstream.protocol.records import BatchBuilder
from groupstream.protocol.topic_partition import TopicPartition
from groupstream.storage.errors import (
    CorruptRangeError,
    LogWriteError,
    OffsetOutOfRange,
    RecordTooLargeError,
    StorageError,
)
from groupstream.storage.log import PartitionLog

if TYPE_CHECKING:
    from groupstream.broker.node import Broker

log = logging.getLogger("groupstream.broker.coordinator")

LOAD_CHUNK_BYTES = 256 * 1024


class Shard(Protocol):
    """What the runtime needs of a coordinator shard (`groupstream.coordinator.shard` is the real one)."""

    def replay(self, record: CoordinatorRecord) -> None: ...

    def handle(self, request: ShardRequest, now_ms: int, metadata: Any) -> CoordinatorResult: ...

    def on_timer(self, key: str, now_ms: int, metadata: Any) -> CoordinatorResult: ...

    def on_loaded(self, now_ms: int) -> CoordinatorResult | None: ...

    def unload(self) -> list[RequestToken]: ...

    def on_topics_deleted(self, topics: Collection[str], now_ms: int) -> CoordinatorResult: ...


ShardFactory = Callable[[int], Shard]
RecordEncoder = Callable[[Any], tuple[bytes, bytes | None]]
"""A shard's record to the key and value bytes of its topic (``__consumer_offsets`` by default)."""
RecordDecoder = Callable[[bytes | memoryview], Iterator[tuple[Any, Any]]]
"""A read of the topic to (record, decoded record or the `PeerProtocolError` saying why not)."""
ErrorResponder = Callable[[CompiledApi, int, Any, int], Any]
"""The whole response to a request failing with a code (for requests the shard cannot serve)."""


class ShardStatus(StrEnum):
    LOADING = "loading"
    ACTIVE = "active"
    UNLOADED = "unloaded"
    FAILED = "failed"  # the disk refused a write or flush; reloaded after a backoff


_FAILED_BACKOFF_S = (1.0, 2.0, 4.0, 8.0, 10.0)


@dataclass(slots=True)
class _Parked:
    future: asyncio.Future[Any]
    api: CompiledApi
    version: int
    body: Any
    partition: int


@dataclass(slots=True)
class _Timer:
    handle: asyncio.TimerHandle
    deadline_ms: int


@dataclass(slots=True)
class _Host:
    partition: int
    plog: PartitionLog
    status: ShardStatus = ShardStatus.UNLOADED
    shard: Shard | None = None
    load_task: asyncio.Task[None] | None = None
    loaded: asyncio.Future[None] | None = None
    timers: dict[str, _Timer] = field(default_factory=dict)
    storage_failures: int = 0  # consecutive failed writes; reset by a successful one
    retry: asyncio.TimerHandle | None = None  # the reload after a storage failure


class CoordinatorRuntime:
    def __init__(self, broker: Broker, topic: str, num_partitions: int, shard_factory: ShardFactory,
                 metadata: Any = None, *, encode: RecordEncoder = encode_record,
                 decode: RecordDecoder = coordinator_records,
                 error_response: ErrorResponder = group_errors.error_response,
                 after_durable: Callable[[int, Any], None] | None = None) -> None:
        """The defaults are the group coordinator's; the transaction coordinator passes its own record codec,
        error answers, and ``after_durable(partition, result)``, called once a result's records are durable
        (with the responses), for the effects a result asks of the broker (its commit and abort markers)."""
        self._broker = broker
        self._encode_record = encode
        self._decode_records = decode
        self._error_response = error_response
        self._after_durable = after_durable
        self._group_records = encode is encode_record  # the rebalance metrics read group records
        self.topic = topic
        self.num_partitions = num_partitions
        self._factory = shard_factory
        self.metadata = metadata
        self._hosts = [_Host(p, broker.catalog.log(topic, p)) for p in range(num_partitions)]
        self._parked: dict[RequestToken, _Parked] = {}
        self._tokens = itertools.count(1)
        self._closed = False
        self.load_chunk_bytes = LOAD_CHUNK_BYTES

    # -- placement and state --------------------------------------------------------------------------

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.num_partitions)

    def status(self, partition: int) -> ShardStatus:
        return self._hosts[partition].status

    def shard(self, partition: int) -> Shard | None:
        """The live shard (tests and tools inspect it; only the runtime may call into it)."""
        return self._hosts[partition].shard

    def error_for(self, partition: int) -> ErrorCode:
        """What a request for ``partition`` gets while its shard does not serve: NONE when it does."""
        status = self._hosts[partition].status
        if status is ShardStatus.ACTIVE:
            return ErrorCode.NONE
        if status is ShardStatus.LOADING:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        if status is ShardStatus.FAILED:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        return ErrorCode.NOT_COORDINATOR

    def active_partitions(self) -> list[int]:
        return [h.partition for h in self._hosts if h.status is ShardStatus.ACTIVE]

    def pending_requests(self, partition: int | None = None) -> int:
        return sum(1 for p in self._parked.values() if partition is None or p.partition == partition)

    # -- lifecycle ------------------------------------------------------------------------------------

    def start(self) -> None:
        """Load every shard (on the running loop)."""
        for host in self._hosts:
            self._start_load(host)

    def reload(self, partition: int) -> asyncio.Future[None]:
        """Load an unloaded shard again; a future done once it serves (at once if it already does)."""
        if self._closed:
            raise RuntimeError("the coordinator runtime is closed")
        host = self._hosts[partition]
        if host.status in (ShardStatus.UNLOADED, ShardStatus.FAILED):
            self._cancel_retry(host)
            self._start_load(host)
        if host.status is ShardStatus.ACTIVE:
            done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            done.set_result(None)
            return done
        assert host.loaded is not None
        return host.loaded

    def unload(self, partition: int) -> None:
        """Stop serving ``partition``: everything parked or waiting for durability gets NOT_COORDINATOR, and so
        does every new request until ``reload``."""
        host = self._hosts[partition]
        self._cancel_retry(host)
        if host.status in (ShardStatus.UNLOADED, ShardStatus.FAILED):
            host.status = ShardStatus.UNLOADED
            return
        was = host.status
        host.status = ShardStatus.UNLOADED
        if host.load_task is not None:
            host.load_task.cancel()
            host.load_task = None
        if host.loaded is not None and not host.loaded.done():
            host.loaded.cancel()
        host.loaded = None
        for timer in host.timers.values():
            timer.handle.cancel()
        host.timers.clear()
        shard, host.shard = host.shard, None
        tokens: list[RequestToken] = []
        if shard is not None and was is ShardStatus.ACTIVE:
            try:
                tokens = list(shard.unload())
            except Exception:
                log.exception("unloading the coordinator shard of partition %d failed", partition)
        tokens.extend(t for t, p in self._parked.items() if p.partition == partition and t not in tokens)
        for token in tokens:
            self._answer_error(token, ErrorCode.NOT_COORDINATOR)
        log.log(logging.DEBUG if self._closed else logging.INFO,
                "coordinator for %s-%d unloaded (%d requests answered NOT_COORDINATOR)", self.topic, partition,
                len(tokens))

    def topics_deleted(self, topics: Collection[str]) -> None:
        """Tell every serving shard that ``topics`` are gone, so they drop the offsets committed for them. A
        shard that is loading or unloaded misses it, as a Kafka coordinator that is not yet leader does."""
        for host in self._hosts:
            shard = host.shard
            if host.status is not ShardStatus.ACTIVE or shard is None:
                continue
            try:
                result = shard.on_topics_deleted(topics, self._broker.now_ms())
            except Exception:
                log.exception("the coordinator for %s-%d failed to drop offsets of deleted topics", self.topic,
                              host.partition)
                continue
            self._apply(host, shard, result)

    async def close(self) -> None:
        self._closed = True
        for host in self._hosts:
            self.unload(host.partition)

    # -- loading ----------------------------------------------------------------------------------------

    def _start_load(self, host: _Host) -> None:
        if self._closed:
            return
        loop = asyncio.get_running_loop()
        host.status = ShardStatus.LOADING
        host.shard = self._factory(host.partition)
        host.loaded = loop.create_future()
        host.load_task = loop.create_task(self._load(host, host.shard), name=f"load-{self.topic}-{host.partition}")

    async def _load(self, host: _Host, shard: Shard) -> None:
        started = time.monotonic()
        plog = host.plog
        # We do not write while loading, but the transaction coordinator may append a marker to an
        # `__consumer_offsets` partition meanwhile: the load reads to the end as it is when it finishes (no
        # await between the last check and serving), so such a marker is replayed here.
        offset = plog.log_start_offset
        count = 0
        try:
            while offset < (end := plog.log_end_offset):
                try:
                    chunk = plog.read(offset, self.load_chunk_bytes, max_offset=end)
                except OffsetOutOfRange:
                    if plog.log_start_offset <= offset:
                        raise
                    offset = plog.log_start_offset
                    continue
                except CorruptRangeError as exc:
                    # Damaged bytes on disk: the records in them are gone whatever we do, and refusing the
                    # shard would also lose every group around them. Load the rest, and say what was skipped.
                    log.warning("coordinator for %s-%d skips unreadable offsets %d..%d while loading: %s",
                                self.topic, host.partition, exc.first_offset, exc.last_offset, exc)
                    if exc.next_offset <= offset:
                        raise
                    offset = exc.next_offset
                    continue
                if not chunk.records:
                    break
                count += self._replay_chunk(host.partition, shard, chunk.records)
                offset = chunk.next_offset
                await asyncio.sleep(0)
        except asyncio.CancelledError:
            raise
        except StorageError as exc:
            host.load_task = None
            self._storage_failed(host, f"loading failed: {exc}")
            return
        except Exception:
            log.exception("loading the coordinator for %s-%d failed; it stays unloaded", self.topic, host.partition)
            host.load_task = None
            self.unload(host.partition)
            return
        host.load_task = None
        loaded = host.loaded  # on_loaded's writes may fail and restart the load, with a new future
        host.status = ShardStatus.ACTIVE
        self._broker.metrics.coordinator_load.observe((time.monotonic() - started) * 1000)
        log.log(logging.INFO if count else logging.DEBUG, "coordinator for %s-%d loaded: %d records in %.0f ms",
                self.topic, host.partition, count, (time.monotonic() - started) * 1000)
        try:
            result = shard.on_loaded(self._broker.now_ms())
        except Exception:
            log.exception("on_loaded of the coordinator for %s-%d failed", self.topic, host.partition)
            result = None
        if result is not None:
            self._apply(host, shard, result)
        if loaded is not None and not loaded.done():
            loaded.set_result(None)

    def _replay_chunk(self, partition: int, shard: Shard, data: bytes) -> int:
        count = 0
        for rec, record in self._decode_records(data):
            if isinstance(record, PeerProtocolError):
                log.error("skipping an undecodable record at %s-%d offset %d: %s", self.topic, partition,
                          rec.offset, record)  # fmt: skip
                continue
            shard.replay(record)
            count += 1
        return count

    # -- requests ---------------------------------------------------------------------------------------

    def submit(self, partition: int, api: CompiledApi, version: int, body: Any, client_id: str,
               client_host: str) -> asyncio.Future[Any]:
        """Hand a request to the shard of ``partition``; the future holds the response body."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        host = self._hosts[partition]
        code = self.error_for(partition)
        if code != ErrorCode.NONE or host.shard is None:
            future.set_result(self._error_response(api, version, body, code or ErrorCode.NOT_COORDINATOR))
            return future
        shard = host.shard
        token = next(self._tokens)
        self._parked[token] = _Parked(future, api, version, body, partition)
        future.add_done_callback(functools.partial(self._forget_cancelled, token))
        request = ShardRequest(api.key, version, body, token, client_id, client_host)
        try:
            result = shard.handle(request, self._broker.now_ms(), self.metadata)
        except Exception:
            log.exception("the coordinator for %s-%d failed on %s v%d", self.topic, partition, api.name, version)
            self._answer_error(token, ErrorCode.UNKNOWN_SERVER_ERROR)
            return future
        self._apply(host, shard, result)
        return future

    def _forget_cancelled(self, token: RequestToken, future: asyncio.Future[Any]) -> None:
        if future.cancelled():  # the client went away; the shard may still answer the token, to no one
            self._parked.pop(token, None)

    def _answer(self, token: RequestToken, body: Any) -> None:
        parked = self._parked.pop(token, None)
        if parked is not None and not parked.future.done():
            parked.future.set_result(body)

    def _answer_error(self, token: RequestToken, code: int) -> None:
        parked = self._parked.get(token)
        if parked is not None:
            self._answer(token, self._error_response(parked.api, parked.version, parked.body, code))

    # -- results ----------------------------------------------------------------------------------------

    def _apply(self, host: _Host, shard: Shard, result: CoordinatorResult) -> None:
        plog = host.plog
        broker = self._broker
        if result.records:
            now = broker.now_ms()
            try:
                batch = self._encode(result.records, now)
                plog.append(batch, now)
            except LogWriteError as exc:
                for token, _ in result.responses:
                    self._answer_error(token, ErrorCode.NOT_COORDINATOR)
                self._storage_failed(host, f"writing {len(result.records)} records failed: {exc}")
                return
            except Exception as exc:
                # A batch we cannot encode or that is too large says nothing about the log: the request gets
                # UNKNOWN_SERVER_ERROR. Anything else is the disk: NOT_COORDINATOR sends clients to find the
                # coordinator again, which is what Kafka answers for KAFKA_STORAGE_ERROR.
                code = (
                    ErrorCode.UNKNOWN_SERVER_ERROR
                    if isinstance(exc, RecordTooLargeError | LocalProtocolError)
                    else ErrorCode.NOT_COORDINATOR
                )
                log.error("writing %d records to %s-%d failed (%s); answering %d requests with %s and reloading "
                          "the coordinator", len(result.records), self.topic, host.partition, exc,
                          len(result.responses), code.name)
                for token, _ in result.responses:
                    self._answer_error(token, code)
                self._restart(host)
                return
            host.storage_failures = 0
            for record in result.records:
                shard.replay(record)
            if self._group_records and getattr(result.records[0], "producer", None) is None:
                broker.metrics.coordinator_records(result.records)
            broker.purgatory.notify(TopicPartition(self.topic, host.partition), len(batch))
            broker.flusher.appended(plog, plog.config.flush_policy)
        self._apply_timers(host, shard, result.timers)
        if not result.responses and self._after_durable is None:
            return
        target = plog.log_end_offset
        if plog.flushed_offset >= target:
            self._durable(host, result)
            return
        waiter = broker.flusher.wait_flushed(plog, target)
        waiter.add_done_callback(functools.partial(self._after_flush, host, shard, result))

    def _encode(self, records: list[CoordinatorRecord], now_ms: int) -> bytearray:
        # A result of records written inside a transaction (TxnOffsetCommit) carries its producer: they go in
        # one transactional batch of that producer id and epoch, as Kafka writes them.
        producer: tuple[int, int] | None = getattr(records[0], "producer", None)
        if producer is None:
            builder = BatchBuilder()
        else:
            builder = BatchBuilder(producer_id=producer[0], producer_epoch=producer[1], base_sequence=0,
                                   transactional=True)  # fmt: skip
        for record in records:
            key, value = self._encode_record(getattr(record, "record", record) if producer else record)
            builder.append(now_ms, key, value)
        return bytearray(builder.build())

    def _durable(self, host: _Host, result: CoordinatorResult) -> None:
        self._deliver(result.responses)
        if self._after_durable is not None and host.status is ShardStatus.ACTIVE:
            try:
                self._after_durable(host.partition, result)
            except Exception:
                log.exception("the coordinator for %s-%d failed after a write", self.topic, host.partition)

    def _after_flush(self, host: _Host, shard: Shard, result: CoordinatorResult,
                     waiter: asyncio.Future[None]) -> None:
        if not waiter.cancelled() and waiter.exception() is None:
            self._durable(host, result)
            return
        for token, _ in result.responses:
            self._answer_error(token, ErrorCode.NOT_COORDINATOR)
        if host.shard is shard:
            self._storage_failed(host, f"flushing failed: {waiter.exception() if not waiter.cancelled() else 'cancelled'}")

    def _storage_failed(self, host: _Host, reason: str) -> None:
        """Unload the shard (its parked requests get NOT_COORDINATOR), refuse with COORDINATOR_NOT_AVAILABLE
        for a backoff, then reload it from its log."""
        self.unload(host.partition)
        if self._closed:
            return
        delay = _FAILED_BACKOFF_S[min(host.storage_failures, len(_FAILED_BACKOFF_S) - 1)]
        host.storage_failures += 1
        host.status = ShardStatus.FAILED
        host.retry = asyncio.get_running_loop().call_later(delay, self._retry_failed, host)
        level = logging.ERROR if host.storage_failures == 1 else logging.DEBUG
        log.log(level, "coordinator for %s-%d: %s; answering COORDINATOR_NOT_AVAILABLE and reloading in %.0f s "
                "(failure %d in a row)", self.topic, host.partition, reason, delay, host.storage_failures)

    def _retry_failed(self, host: _Host) -> None:
        host.retry = None
        if host.status is ShardStatus.FAILED and not self._closed:
            self._start_load(host)

    @staticmethod
    def _cancel_retry(host: _Host) -> None:
        if host.retry is not None:
            host.retry.cancel()
            host.retry = None

    def _deliver(self, responses: list[tuple[RequestToken, Any]]) -> None:
        for token, body in responses:
            self._answer(token, body)

    def _restart(self, host: _Host) -> None:
        self.unload(host.partition)
        if not self._closed:
            self.reload(host.partition)

    def call(self, partition: int, fn: Callable[[Shard, int], CoordinatorResult]) -> bool:
        """Run ``fn(shard, now_ms)`` on the serving shard of ``partition`` and apply the result it returns, as
        for a request (the broker reports back to a shard this way, e.g. that a transaction's markers are
        written); False, doing nothing, if the shard does not serve."""
        host = self._hosts[partition]
        shard = host.shard
        if host.status is not ShardStatus.ACTIVE or shard is None:
            return False
        try:
            result = fn(shard, self._broker.now_ms())
        except Exception:
            log.exception("the coordinator for %s-%d failed", self.topic, partition)
            return False
        self._apply(host, shard, result)
        return True

    # -- timers -----------------------------------------------------------------------------------------

    def _apply_timers(self, host: _Host, shard: Shard, ops: list[TimerOp]) -> None:
        if not ops:
            return
        loop = asyncio.get_running_loop()
        now = self._broker.now_ms()
        for op in ops:
            old = host.timers.pop(op.key, None)
            if old is not None:
                old.handle.cancel()
            if isinstance(op, ScheduleTimer):
                delay = max(op.deadline_ms - now, 0) / 1000.0
                handle = loop.call_later(delay, self._fire, host, shard, op.key, op.deadline_ms)
                host.timers[op.key] = _Timer(handle, op.deadline_ms)
            else:
                assert isinstance(op, CancelTimer)

    def _fire(self, host: _Host, shard: Shard, key: str, deadline_ms: int) -> None:
        if host.shard is not shard or host.status is not ShardStatus.ACTIVE:
            return
        timer = host.timers.get(key)
        if timer is None or timer.deadline_ms != deadline_ms:
            return
        del host.timers[key]
        # The loop's clock and the wall clock the deadline was set on may disagree by a hair; a timer never
        # fires "early" from the shard's point of view.
        now = max(self._broker.now_ms(), deadline_ms)
        try:
            result = shard.on_timer(key, now, self.metadata)
        except Exception:
            log.exception("timer %r of the coordinator for %s-%d failed", key, self.topic, host.partition)
            return
        self._apply(host, shard, result)

    def timer_keys(self, partition: int) -> dict[str, int]:
        """Scheduled timers of a shard and their deadlines (for tests and tools)."""
        return {k: t.deadline_ms for k, t in self._hosts[partition].timers.items()}
