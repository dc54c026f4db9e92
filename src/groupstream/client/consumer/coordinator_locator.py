"""FindCoordinator for the consumer's group (network thread): the `CoordinatorLocator` every manager that talks
to the coordinator shares, so a NOT_COORDINATOR seen by one (a commit, a heartbeat) makes all look again.

Group requests go to the coordinator over a connection of their own, as the Java client does (it names the
coordinator ``Integer.MAX_VALUE - node id``): a broker answers one connection's requests in order, so on the
connection that carries fetches a commit or a heartbeat would wait behind a long-polling Fetch
(``fetch.max.wait.ms``).
"""

from __future__ import annotations

import logging
from typing import Any

from groupstream.client.net.config import exponential_backoff_ms
from groupstream.client.net.metadata import MetadataCache
from groupstream.client.net.requests import ClientResponse, PollResult, UnsentRequest
from groupstream.protocol.error_codes import ErrorCode
from groupstream.protocol.messages import by_name

__all__ = ["GroupCoordinatorLocator"]

log = logging.getLogger("groupstream.client.consumer")

_FIND = by_name("FindCoordinator")
COORDINATOR_NODE_BASE = 2**31 - 1


class GroupCoordinatorLocator:
    def __init__(self, group_id: str, metadata: MetadataCache, backoff_ms: int, backoff_max_ms: int) -> None:
        self.group_id = group_id
        self._metadata = metadata
        self._backoff_ms = backoff_ms
        self._backoff_max_ms = backoff_max_ms
        self._node: int | None = None
        self._in_flight = False
        self._attempts = 0
        self._next_ms = 0

    def coordinator(self) -> int | None:
        return self._node

    def coordinator_lost(self, now_ms: int) -> None:
        if self._node is not None:
            log.info("group %s: coordinator %d lost; looking it up again", self.group_id, self._node)
        self._node = None
        self._next_ms = max(self._next_ms, now_ms + self._backoff_ms)

    def poll(self, now_ms: int) -> PollResult:
        if self._node is not None or self._in_flight:
            return PollResult()
        if now_ms < self._next_ms:
            return PollResult(next_poll_delay_ms=self._next_ms - now_ms)
        self._in_flight = True

        def body(version: int) -> Any:
            R: Any = _FIND.Request
            if version >= 4:
                return R(key_type=0, coordinator_keys=[self.group_id])
            return R(key=self.group_id, key_type=0)

        return PollResult([UnsentRequest(_FIND, body, self._on_response)])

    def _on_response(self, response: ClientResponse) -> None:
        self._in_flight = False
        now = response.received_ms
        found = None
        error: Any = response.error
        if error is None:
            body = response.body
            if response.version >= 4:
                entry = next((c for c in body.coordinators if c.key == self.group_id), None)
                if entry is not None and entry.error_code == ErrorCode.NONE:
                    found = (entry.node_id, entry.host, entry.port)
                else:
                    error = ErrorCode(entry.error_code).name if entry is not None else "no entry for the group"
            elif body.error_code == ErrorCode.NONE:
                found = (body.node_id, body.host, body.port)
            else:
                error = ErrorCode(body.error_code).name
        if found is None:
            self._attempts += 1
            self._next_ms = now + exponential_backoff_ms(self._backoff_ms, self._backoff_max_ms, self._attempts)
            log.debug("group %s: no coordinator yet (%s)", self.group_id, error)
            return
        node, host, port = found
        own = COORDINATOR_NODE_BASE - node
        self._metadata.add_broker(own, host, port)
        self._node = own
        self._attempts = 0
