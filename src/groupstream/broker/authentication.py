"""SASL on one broker connection: `SaslSession`'s rules, plus what needs the event loop.

- PLAIN hashes the password (one PBKDF2, milliseconds) on a small thread pool, never on the loop; the answer
  waits its turn like any other response.
- A failed authentication is answered after ``connection.failed.authentication.delay.ms`` (Kafka's default
  100 ms), and the connection closes once that answer is sent: a client guessing passwords gets one guess per
  connection and per delay.
- After a SaslHandshake v0 the tokens travel as bare size-prefixed frames (Kafka before KIP-152): `RawTokens`
  cuts them, and hands back whatever follows the exchange.

The connection asks `admit` about each request; HANDSHAKE and AUTHENTICATE verdicts come back here.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Callable
from concurrent.futures import Executor
from typing import Any

from groupstream.protocol.connection import Request
from groupstream.protocol.errors import PeerProtocolError
from groupstream.protocol.framing import frame
from groupstream.security.config import ListenerSecurity
from groupstream.security.plain import check_password
from groupstream.security.sasl import (
    Authenticated,
    AuthFailed,
    Challenge,
    CheckPassword,
    CredentialSource,
    SaslSession,
    Verdict,
)
from groupstream.security.scram import ScramCredential, ScramMechanism, stand_in_credential

log = logging.getLogger("groupstream.broker.auth")

_I32 = 4


class SaslConnection:
    """The SASL state of one connection on a SASL_PLAINTEXT or SASL_SSL listener."""

    def __init__(
        self,
        security: ListenerSecurity,
        credentials: CredentialSource,
        secret: bytes,
        executor: Callable[[], Executor],
        failed_delay_ms: int,
        peer: str,
        listener: str,
        clock: Callable[[], int],
    ) -> None:
        """``clock``: wall-clock milliseconds, for session lifetimes (tests pass their own)."""
        def unknown_user(mechanism: ScramMechanism, user: str) -> ScramCredential:
            return stand_in_credential(secret, mechanism, user)

        self.session = SaslSession(
            security.mechanisms,
            security.max_reauth_ms,
            credentials,
            lambda: secrets.token_urlsafe(24),
            unknown_user,
            security.oauth,
        )
        self._executor = executor
        self._failed_delay_s = failed_delay_ms / 1000
        self._peer = peer
        self._listener = listener
        self._loop = asyncio.get_running_loop()
        self._clock = clock
        self.on_authenticated: Callable[[str], None] = lambda principal: None
        self.failure: str | None = None
        """Why authentication failed, once it has: the connection closes after sending the answer."""

    @property
    def authenticated(self) -> bool:
        return self.session.authenticated

    def admit(self, request: Request) -> Verdict:
        return self.session.admit(request.api.key, request.api.name, self._clock())

    # --- SaslHandshake ---------------------------------------------------------------------------------------

    def handshake(self, request: Request) -> Any:
        """The SaslHandshake response; `failure` is set when the connection must close after it."""
        result = self.session.handshake(request.body.mechanism, request.version)
        if result.failure is not None:
            self.failure = f"SASL handshake on {self._listener} refused: {result.failure}"
        return request.api.Response(error_code=result.error_code, mechanisms=list(result.mechanisms))

    # --- SaslAuthenticate ------------------------------------------------------------------------------------

    def authenticate(self, request: Request) -> Any:
        """The SaslAuthenticate response, or a future of it (a PLAIN check, a failure's delay); `failure` is set
        by the time it is ready when the connection must close after it."""
        R = request.api.Response
        outcome = self.session.authenticate(request.body.auth_bytes, request.version, self._clock())
        if not isinstance(outcome, CheckPassword):
            return self._answer(outcome, R)
        fut: asyncio.Future[Any] = self._loop.create_future()
        check = self._loop.run_in_executor(self._executor(), check_password, outcome.login, outcome.credentials)

        def checked(done: asyncio.Future[bool]) -> None:
            if fut.done():  # the connection closed meanwhile
                return
            ok = self._check_result(done)
            body = self._answer(self.session.password_checked(ok, self._clock()), R)
            if isinstance(body, asyncio.Future):
                body.add_done_callback(lambda b: _resolve(fut, b.result()))
            else:
                fut.set_result(body)

        check.add_done_callback(checked)
        return fut

    def _check_result(self, done: asyncio.Future[bool]) -> bool:
        exc = done.exception()
        if exc is not None:
            log.error("checking a PLAIN password from %s failed: %s", self._peer, exc)
            return False
        return bool(done.result())

    def _answer(self, outcome: Challenge | Authenticated | AuthFailed, R: Any) -> Any:
        if isinstance(outcome, Challenge):
            return R(error_code=0, error_message=None, auth_bytes=outcome.token, session_lifetime_ms=0)
        if isinstance(outcome, Authenticated):
            self._authenticated(outcome)
            return R(error_code=0, error_message=None, auth_bytes=outcome.token,
                     session_lifetime_ms=outcome.session_lifetime_ms)  # fmt: skip
        self.failure = self._failure_reason(outcome)
        body = R(error_code=58, error_message=outcome.client_message, auth_bytes=b"", session_lifetime_ms=0)
        return self._delayed(body)

    def _authenticated(self, outcome: Authenticated) -> None:
        session = self.session
        lifetime = f", session lifetime {outcome.session_lifetime_ms} ms" if outcome.session_lifetime_ms else ""
        log.debug(
            "%s %s on %s as %s with %s%s",
            self._peer,
            "re-authenticated" if outcome.reauthenticated else "authenticated",
            self._listener,
            outcome.principal,
            session.mechanism,
            lifetime,
        )
        self.on_authenticated(outcome.principal)

    def _failure_reason(self, failed: AuthFailed) -> str:
        what = "re-authentication" if self.session.reauthenticating else "authentication"
        return f"SASL {self.session.mechanism} {what} on {self._listener} failed: {failed.reason}"

    def _delayed(self, body: Any) -> Any:
        if self._failed_delay_s <= 0:
            return body
        fut: asyncio.Future[Any] = self._loop.create_future()
        self._loop.call_later(self._failed_delay_s, _resolve, fut, body)
        return fut

    # --- tokens after a SaslHandshake v0 ---------------------------------------------------------------------

    def raw_token(self, token: bytes, send: Callable[[list[bytes]], None], close: Callable[[str], None]) -> None:
        """One bare token: its reply is sent framed; a failure closes the connection after the delay, with no
        reply (there is no error frame before KIP-152)."""
        outcome = self.session.authenticate(token, 0, self._clock())
        if isinstance(outcome, CheckPassword):
            check = self._loop.run_in_executor(self._executor(), check_password, outcome.login, outcome.credentials)

            def checked(done: asyncio.Future[bool]) -> None:
                self._raw_outcome(self.session.password_checked(self._check_result(done), self._clock()), send, close)

            check.add_done_callback(checked)
            return
        self._raw_outcome(outcome, send, close)

    def _raw_outcome(
        self,
        outcome: Challenge | Authenticated | AuthFailed,
        send: Callable[[list[bytes]], None],
        close: Callable[[str], None],
    ) -> None:
        if isinstance(outcome, AuthFailed):
            self.failure = reason = self._failure_reason(outcome)
            self._loop.call_later(self._failed_delay_s, close, reason)
            return
        if isinstance(outcome, Authenticated):
            self._authenticated(outcome)
        send(frame([outcome.token]))


def _resolve(fut: asyncio.Future[Any], value: Any) -> None:
    if not fut.done():  # not cancelled by the connection closing meanwhile
        fut.set_result(value)


class RawTokens:
    """Cuts bare size-prefixed SASL tokens out of the byte stream (after a SaslHandshake v0)."""

    def __init__(self, limit: int) -> None:
        self._buf = bytearray()
        self._limit = limit

    def feed(self, data: bytes | memoryview) -> None:
        self._buf += data

    def next_token(self) -> bytes | None:
        buf = self._buf
        if len(buf) < _I32:
            return None
        size = int.from_bytes(buf[:_I32], "big", signed=True)
        if size < 0 or size > self._limit:
            raise PeerProtocolError(
                f"a SASL token of {size} bytes, over sasl.server.max.receive.size ({self._limit})"
            )
        if len(buf) < _I32 + size:
            return None
        token = bytes(buf[_I32 : _I32 + size])
        del buf[: _I32 + size]
        return token

    def rest(self) -> bytes:
        """What came after the last token taken (requests once the exchange is over)."""
        data = bytes(self._buf)
        self._buf.clear()
        return data

    @property
    def buffered(self) -> int:
        return len(self._buf)
