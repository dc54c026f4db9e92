"""Metadata asked for by the application (``Consumer.describe_topics``), answered fresh (network thread).

The consumer's metadata cache answers from its last refresh, which is right for fetching (a stale leader costs a
retry) but not for a caller that must know what the cluster holds now: whether a topic still exists, and under
which topic id. So each lookup is a Metadata request of its own, sent on the consumer's connections; the answer
is read by a throwaway `MetadataCache` (one parser for every Metadata response) and never replaces the
consumer's cache. A request that gets no answer (a dropped connection) is sent again after
``retry.backoff.ms``, until the lookup's deadline.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from groupstream.client.errors import KafkaError
from groupstream.client.metadata import ClusterMetadata
from groupstream.client.net.metadata import MetadataCache
from groupstream.client.net.requests import ClientResponse, PollResult, UnsentRequest
from groupstream.protocol.error_codes import ErrorCode
from groupstream.protocol.messages import by_name

__all__ = ["TopicLookups"]

_METADATA = by_name("Metadata")

Done = Callable[[ClusterMetadata | None, BaseException | None], None]


@dataclass(slots=True)
class _Lookup:
    topics: tuple[str, ...] | None
    done: Done
    deadline_ms: int
    not_before_ms: int = 0
    in_flight: bool = False


class TopicLookups:
    def __init__(self, retry_backoff_ms: int) -> None:
        self._backoff_ms = retry_backoff_ms
        self._lookups: list[_Lookup] = []

    def lookup(self, topics: tuple[str, ...] | None, now_ms: int, timeout_ms: int, done: Done) -> None:
        """Metadata for ``topics`` (None: every topic), asked now; ``done(cluster, error)``."""
        self._lookups.append(_Lookup(topics, done, now_ms + timeout_ms))

    def poll(self, now_ms: int) -> PollResult:
        requests: list[UnsentRequest] = []
        delay: int | None = None
        for lookup in list(self._lookups):
            if lookup.in_flight:
                continue
            if now_ms >= lookup.deadline_ms:
                self._lookups.remove(lookup)
                lookup.done(None, KafkaError(ErrorCode.REQUEST_TIMED_OUT, "no broker answered the Metadata request"))
                continue
            if now_ms < lookup.not_before_ms:
                wait = lookup.not_before_ms - now_ms
                delay = wait if delay is None else min(delay, wait)
                continue
            lookup.in_flight = True
            requests.append(self._request(lookup))
        return PollResult(requests, next_poll_delay_ms=delay)

    def _request(self, lookup: _Lookup) -> UnsentRequest:
        def body(version: int) -> Any:
            R: Any = _METADATA.Request
            wanted: Any
            if lookup.topics is None:
                wanted = [] if version == 0 else None
            else:
                wanted = [R.MetadataRequestTopic(name=t) for t in lookup.topics]
            return R(topics=wanted, allow_auto_topic_creation=version < 4)  # never creates, where it can say so

        return UnsentRequest(_METADATA, body, lambda response: self._on_response(lookup, response))

    def _on_response(self, lookup: _Lookup, response: ClientResponse) -> None:
        lookup.in_flight = False
        body = response.body
        if response.error is not None or body is None or (response.version >= 13 and body.error_code):
            lookup.not_before_ms = response.received_ms + self._backoff_ms
            return
        self._lookups.remove(lookup)
        reader = MetadataCache()
        reader.apply(body, response.version, response.received_ms)
        lookup.done(reader.cluster, None)
