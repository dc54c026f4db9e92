"""Typed client errors, so callers (and the CLI) can tell "the broker said no" from "no broker answered"."""

from __future__ import annotations

from groupstream.protocol.error_codes import ErrorCode, describe, is_retriable


class ClientError(Exception):
    """Base of every error the client raises on purpose."""


class ClientConfigError(ClientError, ValueError):
    """A client configuration value is missing or invalid; the message names the property."""


class KafkaConnectionError(ClientError):
    """No usable connection: refused, timed out or closed. The message names host:port."""

    def __init__(self, address: str, reason: str) -> None:
        super().__init__(f"{address}: {reason}")
        self.address = address
        self.reason = reason


class KafkaProtocolError(ClientError):
    """The broker's answer could not be decoded or does not fit the request (the peer broke the protocol)."""


class UnsupportedVersionError(KafkaProtocolError):
    """The broker and this client share no version of an API."""


class KafkaError(ClientError):
    """A Kafka error code from the broker, with the resource it concerns when there is one.

    The code keeps Kafka's number so callers can branch on it (``e.code == ErrorCode.TOPIC_ALREADY_EXISTS``).
    """

    def __init__(self, code: int, message: str | None = None, *, resource: str | None = None) -> None:
        self.code = code
        self.resource = resource
        self.detail = message or describe(code)
        # "topic 'x' does not exist" already names its resource; a broker's generic message may not
        prefix = f"{resource}: " if resource and resource not in self.detail else ""
        super().__init__(f"{prefix}{self.detail} ({self.name})")

    @property
    def name(self) -> str:
        try:
            return ErrorCode(self.code).name
        except ValueError:
            return f"ERROR_{self.code}"

    @property
    def retriable(self) -> bool:
        return is_retriable(self.code)


def check(code: int, message: str | None = None, *, resource: str | None = None) -> None:
    """Raise KafkaError unless ``code`` is NONE."""
    if code != ErrorCode.NONE:
        raise KafkaError(code, message, resource=resource)
