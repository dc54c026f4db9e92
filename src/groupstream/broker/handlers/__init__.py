"""Request handlers, one module per API family, registered by API name.

A handler takes ``(broker, request)`` and returns the response body, an ``asyncio.Future`` of it, or
`NO_RESPONSE`. ApiVersions advertises exactly the keys registered here, at the versions their schemas hold.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from groupstream.protocol.connection import Request
from groupstream.protocol.messages import by_name

if TYPE_CHECKING:
    from groupstream.broker.node import Broker

Handler = Callable[["Broker", Request], Any]

HANDLERS: dict[int, Handler] = {}


def handles(api_name: str) -> Callable[[Handler], Handler]:
    def register(fn: Handler) -> Handler:
        key = by_name(api_name).key
        if key in HANDLERS:
            raise RuntimeError(f"two handlers for {api_name}")
        HANDLERS[key] = fn
        return fn

    return register


def load_all() -> dict[int, Handler]:
    """Import every handler module so that each registers itself."""
    from groupstream.broker.handlers import (  # noqa: F401
        acls,
        api_versions,
        configs,
        describe_producers,
        fetch,
        groups,
        leaders,
        list_offsets,
        metadata,
        produce,
        producer_id,
        records,
        topics,
        transactions,
        write_txn_markers,
    )

    return HANDLERS
