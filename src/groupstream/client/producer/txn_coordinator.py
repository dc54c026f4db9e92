"""How the transaction manager (``transactions``) reaches its coordinators: where the transaction coordinator
is, one request to a coordinator at a time (as Java's transaction manager), and when the next may go after a
retriable error. Coordinators are found with FindCoordinator and reached over a connection of their own, named
``COORDINATOR_NODE_BASE - node id`` as the consumer's group requests are, so that their requests never wait
behind the Produce requests on the broker's ordinary connection. Pure: the time comes with each call."""

from __future__ import annotations

from dataclasses import dataclass

from groupstream.client.consumer.coordinator_locator import COORDINATOR_NODE_BASE
from groupstream.client.net.config import exponential_backoff_ms
from groupstream.client.net.metadata import MetadataCache
from groupstream.client.net.requests import ClientResponse, Handler, UnsentRequest
from groupstream.client.producer.txn_requests import coordinator_in, find_coordinator
from groupstream.protocol.error_codes import ErrorCode

__all__ = ["CoordinatorLink"]


@dataclass(eq=False)
class CoordinatorLink:
    """The transaction coordinator's node (None: to be found), whether a request to a coordinator is in flight,
    and the retry clock: ``retry_at_ms`` and the attempts since the last success, for the exponential
    backoff of ``retry.backoff.ms`` (``backoff_ms``) up to ``retry.backoff.max.ms`` (``backoff_max_ms``)."""

    metadata: MetadataCache
    backoff_ms: int
    backoff_max_ms: int
    node: int | None = None
    in_flight: bool = False
    retry_at_ms: int = 0
    attempts: int = 0

    def find(self, key_type: int, key: str, handler: Handler) -> UnsentRequest:
        """FindCoordinator of ``key`` (a transactional id or a group); the request is in flight from now."""
        self.in_flight = True
        return find_coordinator(key_type, key, handler)

    def found(self, key: str, response: ClientResponse) -> tuple[int, int | None]:
        """``(error code, own node id or None)`` of ``key``'s coordinator in a FindCoordinator answer; a found
        coordinator becomes known to the metadata under its own node id."""
        code, found = coordinator_in(key, response)
        if found is None:
            return code, None
        node, host, port = found
        own = COORDINATOR_NODE_BASE - node  # a connection of its own, as the consumer's group requests
        self.metadata.add_broker(own, host, port)
        return ErrorCode.NONE, own

    def succeeded(self) -> None:
        """A coordinator did what was asked: the next error backs off from the start again."""
        self.attempts = 0

    def backoff(self, now_ms: int) -> None:
        """A retriable error: the next request waits the next step of the exponential backoff."""
        self.attempts += 1
        self.retry_at_ms = now_ms + exponential_backoff_ms(
            self.backoff_ms, self.backoff_max_ms, self.attempts
        )

    def retry_after(self, now_ms: int, delay_ms: int) -> None:
        """A short fixed wait instead of the backoff (a coordinator that will be ready in milliseconds)."""
        self.retry_at_ms = now_ms + delay_ms

    def lost(self, now_ms: int) -> None:
        """The transaction coordinator moved or cannot be reached: look it up again, after a backoff."""
        self.node = None
        self.backoff(now_ms)
