"""What the runtime hands a shard: one decoded request, and a read-only view of the topics that exist."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol, TypeGuard, TypeVar, runtime_checkable

from groupstream.coordinator.result import RequestToken
from groupstream.protocol.compiler import CompiledApi

__all__ = [
    "ShardRequest",
    "TopicCatalogView",
    "TopicIdsView",
    "TopicsView",
    "body_as",
    "has_topic_ids",
    "is_catalog",
]

_Req = TypeVar("_Req")


@dataclass(frozen=True, slots=True)
class ShardRequest:
    """One request for groups on this shard.

    ``body`` is the decoded request (the compiled API's named tuple) at ``version``. Requests naming several
    groups (DeleteGroups, DescribeGroups, OffsetFetch v8+) arrive with only this shard's groups in them; the
    runtime concatenates the shards' group lists. ListGroups goes to every shard.
    """

    api_key: int
    version: int
    body: Any
    token: RequestToken
    client_id: str = ""
    client_host: str = ""


def body_as(api: CompiledApi[_Req, Any], req: ShardRequest) -> _Req:
    """``req``'s body typed as a request of ``api`` (``body = body_as(OFFSET_COMMIT, req)``), so that mypy checks
    the fields a handler reads; a request of another API is a TypeError (a routing mistake)."""
    if req.api_key != api.key:
        raise TypeError(f"a request of API key {req.api_key} is not a {api.name} request")
    body: _Req = req.body
    return body


class TopicsView(Protocol):
    """The broker's topics, as the coordinator needs them to validate commits."""

    def partition_count(self, topic: str) -> int | None:
        """The topic's partition count, or None when it does not exist."""
        ...


@runtime_checkable
class TopicIdsView(TopicsView, Protocol):
    """A view that also maps topic ids, needed by OffsetCommit/OffsetFetch v10 (topics named by id).

    A runtime whose view lacks this gets UNKNOWN_TOPIC_ID for every topic of a v10 request.
    """

    def topic_id(self, topic: str) -> uuid.UUID | None: ...

    def topic_name(self, topic_id: uuid.UUID) -> str | None: ...


@runtime_checkable
class TopicCatalogView(TopicIdsView, Protocol):
    """A view that also lists every topic: what the ``consumer`` protocol needs to resolve regular
    expressions on the broker. A runtime whose view lacks it answers ConsumerGroupHeartbeat with
    UNSUPPORTED_VERSION."""

    def topic_names(self) -> Iterable[str]: ...


_CONFORMS: dict[tuple[type, type], bool] = {}
"""(view class, protocol) -> whether the view's class provides the protocol: a memo, not state."""


def _conforms(view: object, protocol: type) -> bool:
    """``isinstance(view, protocol)``, asked once per view class. The runtime check of a Protocol walks its
    members on every call (about 9 us on Python 3.11, a third of a ``consumer`` heartbeat, and paid per
    topic by OffsetCommit/OffsetFetch v10); the runtime's views are classes whose methods are defined on
    the class, so the answer is the class's."""
    key = (type(view), protocol)
    known = _CONFORMS.get(key)
    if known is None:
        known = _CONFORMS[key] = isinstance(view, protocol)
    return known


def has_topic_ids(view: TopicsView) -> TypeGuard[TopicIdsView]:
    """Whether ``view`` maps topic ids (``isinstance(view, TopicIdsView)``, cheaply)."""
    return _conforms(view, TopicIdsView)


def is_catalog(view: TopicsView) -> TypeGuard[TopicCatalogView]:
    """Whether ``view`` also lists every topic (``isinstance(view, TopicCatalogView)``, cheaply)."""
    return _conforms(view, TopicCatalogView)
