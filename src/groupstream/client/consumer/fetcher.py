"""The fetch request manager: Fetch requests for the partitions the buffer says may be fetched, one request
in flight per leader, and their responses checked batch by batch for the buffer (network thread), which
decodes the records when ``poll`` gets to them.

A partition is fetched again once ``poll`` has drained what it had (so a slow application holds at most one
fetch per partition in memory, as Kafka's consumer does). Records below the fetch offset (the start of the
first batch) and control records are dropped; with ``isolation.level=read_committed`` so are the records of
aborted transactions, using the aborted-transaction list the broker sends. Errors: an offset out of range goes
to the offsets manager (``auto.offset.reset``); a moved leader or unknown partition refreshes metadata and
retries; anything else is retried after the backoff.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable
from typing import Any

from groupstream.assignment.types import TopicPartition
from groupstream.client.consumer.config import ConsumerConfig
from groupstream.client.consumer.fetch_buffer import CompletedFetch, FetchBuffer
from groupstream.client.consumer.metrics import ConsumerMetrics
from groupstream.client.net.metadata import MetadataCache
from groupstream.client.net.requests import ClientResponse, PollResult, UnsentRequest
from groupstream.protocol.error_codes import ErrorCode
from groupstream.protocol.messages import by_name
from groupstream.protocol.records import RecordBatch, iter_record_batches
from groupstream.protocol.records.batch_header import CONTROL_BIT

__all__ = ["Fetcher"]

log = logging.getLogger("groupstream.client.consumer")

_FETCH = by_name("Fetch")
_MAX_FETCH_VERSION = 12  # v13+ names topics by id only
_FETCHES_PER_NODE = 2
_ABORT_MARKER = 0
_CONTROL_KEY = struct.Struct(">hh")
_REFRESH = frozenset(
    {
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.KAFKA_STORAGE_ERROR,
        ErrorCode.UNKNOWN_TOPIC_ID,
        ErrorCode.INCONSISTENT_TOPIC_ID,
    }
)


class Fetcher:
    def __init__(
        self,
        config: ConsumerConfig,
        buffer: FetchBuffer,
        metadata: MetadataCache,
        out_of_range: Callable[[TopicPartition, int], None],
    ) -> None:
        self._cfg = config
        self._buffer = buffer
        self._metadata = metadata
        self._out_of_range = out_of_range
        self._in_flight: dict[int, int] = {}  # fetches in flight by node
        self._unsure: set[int] = set()  # nodes with a fetch in flight that the broker may hold (see _poll)
        self._log_end: dict[TopicPartition, int] = {}  # the last fetch's high watermark (read_committed: LSO)
        self._retry_at_ms = 0
        self.closed = False
        self.metrics: ConsumerMetrics | None = None

    def poll(self, now_ms: int) -> PollResult:
        try:
            return self._poll(now_ms)
        finally:
            # records that arrived since the last poll are announced now, after the next fetches are made (and
            # just before the network thread sends them and sleeps): see FetchBuffer.fetch_done
            self._buffer.wake_pollers()

    def _poll(self, now_ms: int) -> PollResult:
        if self.closed or now_ms < self._retry_at_ms:
            return PollResult(next_poll_delay_ms=max(self._retry_at_ms - now_ms, 0) if not self.closed else None)
        by_node: dict[int, list[tuple[TopicPartition, int]]] = {}
        missing_leader = False
        for tp, position in self._buffer.fetchable(self._cfg.max_poll_records, self._hold):
            leader = self._metadata.leader(tp.topic, tp.partition)
            if leader is None or leader < 0 or not self._may_send(leader):
                self._buffer.fetch_failed(tp)
                missing_leader = missing_leader or leader is None or leader < 0
                continue
            by_node.setdefault(leader, []).append((tp, position))
        if missing_leader:
            self._metadata.add_topics({tp.topic for tp in self._buffer.assignment()})
            self._metadata.request_update()
        requests = []
        for node, parts in sorted(by_node.items()):
            if self._in_flight.get(node, 0) and not self._sure(parts):
                for tp, _ in parts:  # it may wait at the broker: only alone, not before others' next fetches
                    self._buffer.fetch_failed(tp)
                continue
            for group in self._split(node, parts):
                requests.append(self._request(node, group, now_ms, self._sure(group)))
        return PollResult(requests, next_poll_delay_ms=self._cfg.network.retry_backoff_ms if missing_leader else None)

    def _may_send(self, node: int) -> bool:
        """Up to two fetches in flight per node, so the broker prepares one while the application thread takes
        the other's records (one at a time left the connection idle for a round trip per fetch: 4-8 ms for
        6 MB here, most of a 1,000,000-record read). A second goes only behind a fetch that returns at once
        and only if it returns at once itself (see ``_sure``): a fetch of caught-up partitions waits at the
        broker for ``fetch.max.wait.ms``, and responses on a connection come in order, so nothing may queue
        behind it, and it is sent only to an idle node (else the next fetches of partitions with records
        would wait behind it: measured, half-second stalls in a 0.1 s read)."""
        flying = self._in_flight.get(node, 0)
        return flying == 0 or (flying < _FETCHES_PER_NODE and node not in self._unsure)

    def _sure(self, parts: list[tuple[TopicPartition, int]]) -> bool:
        """Whether a fetch of ``parts`` returns at once: one of them has records left by its last log end."""
        return any(position < self._log_end.get(tp, position) for tp, position in parts)

    def _split(self, node: int, parts: list[tuple[TopicPartition, int]]) -> list[list[tuple[TopicPartition, int]]]:
        """The fetches to send to an idle node: two halves when every partition has records left (so both
        return at once, and from then on one is refilled while the other is in flight), else one."""
        if self._in_flight.get(node, 0) or len(parts) < 2:
            return [parts]
        if not all(position < self._log_end.get(tp, position) for tp, position in parts):
            return [parts]
        half = (len(parts) + 1) // 2
        return [parts[:half], parts[half:]]

    def lags(self, positions: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
        """Each partition's lag: the log end its last fetch reported (read_committed: the last stable offset)
        minus ``positions``; partitions not fetched yet are left out."""
        ends = dict(self._log_end)
        return {tp: max(ends[tp] - pos, 0) for tp, pos in positions.items() if tp in ends}

    def _hold(self, candidates: list[tuple[TopicPartition, int]], full: list[TopicPartition]) -> set[TopicPartition]:
        """Partitions not to fetch yet: a leader's partitions that were all at the end of their log last time,
        while another of its partitions waits for room in the buffer. Fetched alone they would make a request
        the broker holds for ``fetch.max.wait.ms``, and with one fetch per leader in flight the waiting
        partition could not be fetched meanwhile: its next records would be held back by a fetch of nothing."""
        leader = self._metadata.leader
        waiting = {leader(tp.topic, tp.partition) for tp in full}
        by_node: dict[int | None, list[tuple[TopicPartition, int]]] = {}
        for tp, position in candidates:
            by_node.setdefault(leader(tp.topic, tp.partition), []).append((tp, position))
        held: set[TopicPartition] = set()
        for node, parts in by_node.items():
            if node in waiting and all(position >= self._log_end.get(tp, position + 1) for tp, position in parts):
                held.update(tp for tp, _ in parts)
        return held

    def _request(self, node: int, parts: list[tuple[TopicPartition, int]], now_ms: int, sure: bool) -> UnsentRequest:
        """A Fetch for ``parts``, counted in flight to ``node`` (``sure``: it returns at once, see ``_may_send``)."""
        self._in_flight[node] = self._in_flight.get(node, 0) + 1
        if not sure:
            self._unsure.add(node)
        cfg = self._cfg
        R: Any = _FETCH.Request
        T = R.FetchTopic
        topics: dict[str, list[Any]] = {}
        for tp, position in parts:
            topics.setdefault(tp.topic, []).append(
                T.FetchPartition(
                    partition=tp.partition,
                    fetch_offset=position,
                    partition_max_bytes=cfg.max_partition_fetch_bytes,
                )
            )
        body = R(
            replica_id=-1,
            max_wait_ms=cfg.fetch_max_wait_ms,
            min_bytes=cfg.fetch_min_bytes,
            max_bytes=cfg.fetch_max_bytes,
            isolation_level=cfg.isolation_level,
            session_id=0,
            session_epoch=-1,
            topics=[T(topic=t, partitions=ps) for t, ps in topics.items()],
            forgotten_topics_data=[],
        )
        positions = dict(parts)
        return UnsentRequest(
            _FETCH,
            body,
            lambda response: self._on_response(node, positions, response, now_ms, sure),
            node_id=node,
            max_version=_MAX_FETCH_VERSION,
            timeout_ms=cfg.network.request_timeout_ms + cfg.fetch_max_wait_ms,
        )

    def _on_response(
        self, node: int, positions: dict[TopicPartition, int], response: ClientResponse, sent_ms: int, sure: bool
    ) -> None:
        self._in_flight[node] -= 1
        if not sure:
            self._unsure.discard(node)
        if self.metrics is not None and response.body is not None:
            size = sum(len(pd.records or b"") for t in response.body.responses for pd in t.partitions)
            self.metrics.fetched(response.received_ms - sent_ms, size, response.received_ms)
        if response.error is not None or response.body is None:
            log.debug("fetch from node %d failed: %s", node, response.error)
            self._fail(positions, response.received_ms)
            return
        body = response.body
        if response.version >= 7 and body.error_code != ErrorCode.NONE:
            self._fail(positions, response.received_ms)
            return
        answered: set[TopicPartition] = set()
        for topic in body.responses:
            for pd in topic.partitions:
                tp = TopicPartition(topic.topic, pd.partition_index)
                offset = positions.get(tp)
                if offset is None:
                    continue
                answered.add(tp)
                self._partition(tp, offset, pd, response.received_ms, response.version)
        for tp in positions.keys() - answered:
            self._buffer.fetch_failed(tp)

    def _fail(self, positions: dict[TopicPartition, int], now_ms: int) -> None:
        for tp in positions:
            self._buffer.fetch_failed(tp)
        self._metadata.request_update()
        self._retry_at_ms = now_ms + self._cfg.network.retry_backoff_ms

    def _partition(self, tp: TopicPartition, offset: int, pd: Any, now_ms: int, version: int) -> None:
        code = pd.error_code
        if code == ErrorCode.NONE:
            stable = pd.last_stable_offset if version >= 4 else -1
            self._log_end[tp] = stable if self._cfg.isolation_level == 1 and stable >= 0 else pd.high_watermark
            try:
                fetch = self._scan(tp, offset, pd)
            except Exception as e:  # a corrupt batch: the application must hear of it, not skip it
                self._buffer.fetch_failed(tp)
                self._buffer.add_error(e)
                return
            self._buffer.fetch_done(fetch, defer_wakeup=True)
            return
        self._buffer.fetch_failed(tp)
        if code == ErrorCode.OFFSET_OUT_OF_RANGE:
            self._out_of_range(tp, offset)
        elif code in _REFRESH:
            self._metadata.request_update()
            self._retry_at_ms = now_ms + self._cfg.network.retry_backoff_ms
        else:
            log.warning("fetch of %s at %d failed with %s; retrying", tp, offset, ErrorCode(code).name)
            self._retry_at_ms = now_ms + self._cfg.network.retry_backoff_ms

    def _scan(self, tp: TopicPartition, offset: int, pd: Any) -> CompletedFetch:
        """The partition's complete batches from ``offset`` on, checked (framing, magic, CRC) but not decoded:
        data batches are kept for ``poll`` to decode; control batches and, with read_committed, the batches of
        aborted transactions are dropped."""
        batches: list[RecordBatch] = []
        pending = 0
        position = offset
        aborted = _AbortedTransactions(pd) if self._cfg.isolation_level == 1 else None
        for batch in iter_record_batches(pd.records or b"", check_crc=self._cfg.check_crcs):
            h = batch.header
            next_offset = h.base_offset + h.last_offset_delta + 1
            if next_offset <= position:
                continue
            if aborted is not None and aborted.skips(batch):
                position = next_offset
                continue
            if not h.attributes & CONTROL_BIT:
                batches.append(batch)
                pending += h.records_count
            position = next_offset
        return CompletedFetch(tp, offset, [], position, batches=batches, pending=pending)


class _AbortedTransactions:
    """Kafka's read_committed filter over one partition's fetched batches, in offset order."""

    def __init__(self, pd: Any) -> None:
        txns = sorted((int(t.first_offset), int(t.producer_id)) for t in (pd.aborted_transactions or ()))
        self._pending = txns
        self._active: set[int] = set()

    def skips(self, batch: RecordBatch) -> bool:
        last = batch.next_offset - 1
        while self._pending and self._pending[0][0] <= last:
            self._active.add(self._pending.pop(0)[1])
        if batch.is_control:
            records = batch.records()
            if records and records[0].key is not None and len(records[0].key) >= 4:
                _version, kind = _CONTROL_KEY.unpack_from(records[0].key)
                if kind == _ABORT_MARKER:
                    self._active.discard(batch.producer_id)
            return True
        return batch.is_transactional and batch.producer_id in self._active
