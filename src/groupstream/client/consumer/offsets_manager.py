"""Where each assigned partition starts, and ListOffsets lookups (network thread).

A partition without a position gets its group's committed offset (OffsetFetch, through the commit manager);
without one, or outside a group, or when a fetch finds the position out of range, ``auto.offset.reset`` decides:
earliest or latest by ListOffsets to the partition's leader, or, for ``none``, an error for the application.
``seek_to_beginning``, ``seek_to_end``, ``offsets_for_times``, ``beginning_offsets`` and ``end_offsets`` are
ListOffsets lookups too. A lookup's result only moves a position that nothing moved meanwhile (a ``seek``
that came later wins).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from groupstream.assignment.types import TopicPartition
from groupstream.client.consumer.commit_manager import CommitManager, OffsetAndMetadata
from groupstream.client.consumer.errors import NoOffsetForPartitionError, OffsetOutOfRangeError
from groupstream.client.consumer.fetch_buffer import FetchBuffer
from groupstream.client.errors import KafkaError
from groupstream.client.net.metadata import MetadataCache
from groupstream.client.net.requests import ClientResponse, PollResult, UnsentRequest
from groupstream.protocol.error_codes import ErrorCode
from groupstream.protocol.messages import by_name

__all__ = ["EARLIEST", "LATEST", "OffsetsManager"]

log = logging.getLogger("groupstream.client.consumer")

_LIST = by_name("ListOffsets")
EARLIEST, LATEST = -2, -1
_RETRIABLE = frozenset(
    {
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.OFFSET_NOT_AVAILABLE,
        ErrorCode.REQUEST_TIMED_OUT,
    }
)

Found = dict[TopicPartition, tuple[int, int]]
"""tp -> (offset, timestamp); offset -1 when no record has that timestamp or later."""


@dataclass(slots=True)
class _Lookup:
    wanted: dict[TopicPartition, int]  # tp -> timestamp spec
    done: Callable[[Found, BaseException | None], None]
    deadline_ms: int
    found: Found = field(default_factory=dict)
    in_flight: set[int] = field(default_factory=set)
    not_before_ms: int = 0
    waiting_for_metadata: int | None = None  # the metadata version seen when a leader was unknown


class OffsetsManager:
    def __init__(
        self,
        buffer: FetchBuffer,
        metadata: MetadataCache,
        commits: CommitManager | None,
        reset: str,
        isolation_level: int,
        retry_backoff_ms: int,
        api_timeout_ms: int,
    ) -> None:
        self._buffer = buffer
        self._metadata = metadata
        self._commits = commits
        self._reset = reset
        self._isolation = isolation_level
        self._backoff_ms = retry_backoff_ms
        self._timeout_ms = api_timeout_ms
        self._lookups: list[_Lookup] = []
        self._initializing: set[TopicPartition] = set()
        self.closed = False

    # --- lookups for other parts -------------------------------------------------------------------------

    def lookup(self, wanted: Mapping[TopicPartition, int], now_ms: int, timeout_ms: int,
               done: Callable[[Found, BaseException | None], None]) -> None:  # fmt: skip
        """ListOffsets for ``tp -> timestamp`` (EARLIEST, LATEST or ms); ``done(found, error)``."""
        if not wanted:
            done({}, None)
            return
        self._metadata.add_topics({tp.topic for tp in wanted})
        self._lookups.append(_Lookup(dict(wanted), done, now_ms + timeout_ms))

    def out_of_range(self, tp: TopicPartition, offset: int) -> None:
        """A fetch at ``offset`` found it outside the log: reset, or tell the application."""
        if self._reset == "none":
            self._buffer.add_error(OffsetOutOfRangeError(str(tp), f"offset {offset} is outside the log"))
            return
        spec = EARLIEST if self._reset == "earliest" else LATEST
        log.info("%s: offset %d is out of range; resetting to the %s offset", tp, offset, self._reset)
        self._reset_to(tp, spec, expected=offset)

    def _reset_to(self, tp: TopicPartition, spec: int, expected: int | None) -> None:
        self._reset_lookup({tp: spec}, expected)

    def _reset_lookup(self, specs: dict[TopicPartition, int], expected: int | None) -> None:
        """Move ``specs``' partitions to the offsets ListOffsets finds, in one lookup: a consumer's partitions
        get their positions from one response, so its first fetch asks for all of them (one lookup a
        partition made the first fetch carry those answered first, and the rest wait a round trip)."""

        def done(found: Found, error: BaseException | None) -> None:
            self._initializing.difference_update(specs)
            for tp in specs:
                offset = found.get(tp, (-1, -1))[0]
                if offset < 0:
                    continue
                if expected is None:
                    self._buffer.seek(tp, offset, only_unset=True)
                else:
                    self._buffer.seek(tp, offset, expected=expected)
            if error is not None:
                self._buffer.add_error(error)

        self._initializing.update(specs)
        self._lookups.append(_Lookup(dict(specs), done, 2**62))

    # --- the request manager -------------------------------------------------------------------------------

    def poll(self, now_ms: int) -> PollResult:
        if self.closed:
            return PollResult()
        self._initialize(now_ms)
        requests: list[UnsentRequest] = []
        delay: int | None = None
        for lookup in list(self._lookups):
            if lookup.in_flight:
                continue
            if now_ms >= lookup.deadline_ms:
                self._lookups.remove(lookup)
                lookup.done(lookup.found, KafkaError(ErrorCode.REQUEST_TIMED_OUT, "ListOffsets timed out"))
                continue
            waited = lookup.waiting_for_metadata
            if waited is not None and waited != self._metadata.version:
                lookup.not_before_ms = 0  # as Java: a lookup that lacked a leader retries when metadata arrives
            if now_ms < lookup.not_before_ms:
                wait = lookup.not_before_ms - now_ms
                delay = wait if delay is None else min(delay, wait)
                continue
            lookup.waiting_for_metadata = None
            by_node: dict[int, dict[TopicPartition, int]] = {}
            for tp, spec in lookup.wanted.items():
                if tp in lookup.found:
                    continue
                leader = self._metadata.leader(tp.topic, tp.partition)
                if leader is None or leader < 0:
                    self._metadata.request_update()
                    lookup.not_before_ms = now_ms + self._backoff_ms
                    lookup.waiting_for_metadata = self._metadata.version
                    delay = self._backoff_ms if delay is None else min(delay, self._backoff_ms)
                    continue
                by_node.setdefault(leader, {})[tp] = spec
            for node, specs in sorted(by_node.items()):
                lookup.in_flight.add(node)
                requests.append(self._request(lookup, node, specs))
        return PollResult(requests, next_poll_delay_ms=delay)

    def _initialize(self, now_ms: int) -> None:
        """Give partitions without a position their committed offset, or reset them."""
        missing = [tp for tp in self._buffer.missing_positions() if tp not in self._initializing]
        if not missing:
            return
        self._initializing.update(missing)
        if self._commits is None:
            self._reset_missing(missing, "there is no group to resume from")
            return

        def committed(result: Any, error: BaseException | None) -> None:
            if error is not None:
                self._initializing.difference_update(missing)  # asked again on the next poll
                log.debug("fetching committed offsets failed: %s", error)
                return
            offsets: Mapping[TopicPartition, OffsetAndMetadata] = result
            rest = []
            for tp in missing:
                om = offsets.get(tp)
                if om is not None:
                    self._buffer.seek(tp, om.offset, only_unset=True)
                    self._initializing.discard(tp)
                else:
                    rest.append(tp)
            if rest:
                self._reset_missing(rest, "no committed offset")

        self._commits.fetch(frozenset(missing), now_ms, self._timeout_ms, committed)

    def _reset_missing(self, partitions: list[TopicPartition], why: str) -> None:
        if self._reset == "none":
            self._initializing.difference_update(partitions)
            names = ", ".join(str(tp) for tp in sorted(partitions))
            self._buffer.add_error(NoOffsetForPartitionError(names, why))
            return
        spec = EARLIEST if self._reset == "earliest" else LATEST
        self._reset_lookup(dict.fromkeys(partitions, spec), expected=None)

    def _request(self, lookup: _Lookup, node: int, specs: dict[TopicPartition, int]) -> UnsentRequest:
        isolation = self._isolation

        def body(version: int) -> Any:
            R: Any = _LIST.Request
            T = R.ListOffsetsTopic
            topics: dict[str, list[Any]] = {}
            for tp, ts in sorted(specs.items()):
                topics.setdefault(tp.topic, []).append(T.ListOffsetsPartition(partition_index=tp.partition, timestamp=ts))
            return R(replica_id=-1, isolation_level=isolation, topics=[T(name=t, partitions=ps) for t, ps in topics.items()],
                     timeout_ms=30_000)  # fmt: skip

        return UnsentRequest(_LIST, body, lambda r: self._on_response(lookup, node, specs, r), node_id=node)

    def _on_response(self, lookup: _Lookup, node: int, specs: dict[TopicPartition, int], response: ClientResponse) -> None:
        lookup.in_flight.discard(node)
        now = response.received_ms
        if response.error is not None:
            lookup.not_before_ms = now + self._backoff_ms
            return
        failed: KafkaError | None = None
        for t in response.body.topics:
            for p in t.partitions:
                tp = TopicPartition(t.name, p.partition_index)
                if tp not in specs:
                    continue
                if p.error_code == ErrorCode.NONE:
                    offset = p.offset if response.version >= 1 else (p.old_style_offsets or [-1])[0]
                    lookup.found[tp] = (offset, p.timestamp if response.version >= 1 else -1)
                elif p.error_code in _RETRIABLE:
                    self._metadata.request_update()
                    lookup.not_before_ms = now + self._backoff_ms
                else:
                    failed = KafkaError(p.error_code, resource=str(tp))
        if failed is not None:
            self._lookups.remove(lookup)
            lookup.done(lookup.found, failed)
        elif all(tp in lookup.found for tp in lookup.wanted) and not lookup.in_flight:
            self._lookups.remove(lookup)
            lookup.done(lookup.found, None)
