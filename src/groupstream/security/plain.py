"""SASL PLAIN (RFC 4616) checked against the SCRAM credentials: pure.

Kafka's PLAIN compares against passwords written in the broker's JAAS file. We keep no passwords, so a PLAIN
password is hashed with the salt and iteration count of one of the user's SCRAM credentials and compared with its
stored key: one set of users for every mechanism, managed in one place. That costs one PBKDF2 per login (a few
milliseconds), which is why the broker runs `check_password` off its event loop.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from groupstream.security.scram import (
    ScramCredential,
    ScramMechanism,
    make_credential,
    password_matches,
)

__all__ = ["PlainError", "PlainLogin", "check_password", "parse_plain"]

INVALID = "Authentication failed: Invalid username or password"
"""What Kafka tells a client whose PLAIN login failed (the same for an unknown user and a wrong password)."""


class PlainError(Exception):
    """A malformed PLAIN message; ``client_message`` is what the client may be told."""

    def __init__(self, reason: str, client_message: str) -> None:
        super().__init__(reason)
        self.client_message = client_message


@dataclass(frozen=True, slots=True)
class PlainLogin:
    username: str
    password: str

    def __repr__(self) -> str:  # never print the password
        return f"PlainLogin(username={self.username!r})"


def parse_plain(token: bytes) -> PlainLogin:
    """``[authzid] NUL authcid NUL passwd``; as in Kafka, an authzid must be empty or the user name itself."""
    try:
        text = token.decode("utf-8")
    except UnicodeDecodeError:
        raise PlainError("the PLAIN message is not UTF-8", INVALID) from None
    parts = text.split("\x00")
    if len(parts) != 3:
        raise PlainError(
            f"the PLAIN message has {len(parts)} NUL-separated parts, not 3 (authzid, user, password)",
            f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(parts)}",
        )
    authzid, username, password = parts
    if not username:
        raise PlainError("the PLAIN message has an empty user name", "Authentication failed: username not specified")
    if not password:
        raise PlainError(
            f"the PLAIN message for user {username!r} has an empty password",
            "Authentication failed: password not specified",
        )
    if authzid and authzid != username:
        raise PlainError(
            f"user {username!r} asked to act as {authzid!r}: the authorization id must be the user",
            "Authentication failed: Client requested an authorization id that is different from username",
        )
    return PlainLogin(username, password)


_DUMMY = make_credential(ScramMechanism.SCRAM_SHA_256, "not a password", b"groupstream-dummy-salt", 4096)


def check_password(login: PlainLogin, credentials: Sequence[tuple[ScramMechanism, ScramCredential]]) -> bool:
    """Whether ``login.password`` is the user's, checked against the first of the user's credentials (all of
    a user's mechanisms are set from the same password). A user without credentials costs the same PBKDF2, so
    that the time taken does not tell whether the user exists."""
    if not credentials:
        password_matches(ScramMechanism.SCRAM_SHA_256, _DUMMY, login.password)
        return False
    mechanism, credential = credentials[0]
    return password_matches(mechanism, credential, login.password)
