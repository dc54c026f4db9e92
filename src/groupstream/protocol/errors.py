"""Typed protocol errors, split by who broke the rule (as h11 does)."""

from __future__ import annotations


class ProtocolError(Exception):
    """Base of every error the codec raises; decoders raise nothing else."""


class PeerProtocolError(ProtocolError):
    """The peer sent bytes that do not follow the protocol (truncated, malformed, oversized)."""


class LocalProtocolError(ProtocolError):
    """We were asked to encode something the protocol cannot carry at this version."""


class UnsupportedVersionError(PeerProtocolError):
    """A request names an API key or version this codec has no schema for."""

    def __init__(self, api_key: int, api_version: int) -> None:
        super().__init__(f"unsupported api key {api_key} version {api_version}")
        self.api_key = api_key
        self.api_version = api_version
