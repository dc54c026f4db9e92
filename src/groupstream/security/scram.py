"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka profiles them: pure, sans-IO.

Kafka's profile: the gs2 header is ``n`` or ``y`` (no channel binding, so no ``-PLUS`` mechanisms); an authzid,
when given, must equal the user name; passwords are hashed as their UTF-8 bytes (no SASLprep); a credential has
at least 4096 iterations (and at most 16384 when altered through the admin API); a failure is reported by the
transport (a SaslAuthenticate error), not by a server-final ``e=`` message. The ``tokenauth`` extension (delegation
tokens) is refused since we have no tokens; other extensions are ignored, as RFC 5802 asks.

librdkafka before 2.6.1 (Debian's kcat among its users) repeats its own nonce in front of the one the server sent
(librdkafka#4895). Kafka 3.8.1 to 3.9 accept that, Kafka 4 refuses it; we accept exactly that form besides the
right one, since it still echoes the server's nonce, which is what the check protects (CVE-2024-56128).

Unlike Kafka, an unknown user is not refused at the first message: the exchange goes on with a made-up salt (the
caller's ``unknown_user`` function) and fails at the proof like a wrong password, so that the answers do not tell
which users exist (RFC 5802 section 5.1). The messages that enter the authentication message are the bytes the
client sent, not re-serialised copies, as RFC 5802 defines them.

The server never sees a password: a credential keeps the salt, the iteration count and two keys derived from
the salted password (StoredKey to check the client's proof, ServerKey to prove the server knows it too).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

__all__ = [
    "MAX_ITERATIONS",
    "MIN_ITERATIONS",
    "ClientFinal",
    "ClientFirst",
    "ScramClient",
    "ScramCredential",
    "ScramError",
    "ScramMechanism",
    "ScramServer",
    "decode_saslname",
    "encode_saslname",
    "make_credential",
    "parse_client_final",
    "parse_client_first",
    "parse_server_final",
    "parse_server_first",
    "salt_password",
    "stand_in_credential",
]

MIN_ITERATIONS = 4096
"""Kafka's minimum for both mechanisms: a credential with fewer iterations is refused."""
MAX_ITERATIONS = 16384
"""Kafka's maximum for a credential set through AlterUserScramCredentials."""


class ScramError(Exception):
    """The exchange failed: a malformed message, a wrong proof, a message out of order.

    ``str(error)`` is for the broker's log (it may name the user); clients are told only that authentication
    failed, as Kafka does, so that an attacker learns nothing from the message.
    """


class ScramMechanism(Enum):
    """The two SCRAM mechanisms Kafka supports, with their ids in the SCRAM credential admin APIs."""

    SCRAM_SHA_256 = ("SCRAM-SHA-256", 1, "sha256")
    SCRAM_SHA_512 = ("SCRAM-SHA-512", 2, "sha512")

    def __init__(self, mechanism_name: str, type_id: int, hash_name: str) -> None:
        self.mechanism_name = mechanism_name
        self.type_id = type_id
        self.hash_name = hash_name
        self.digest_size = hashlib.new(hash_name).digest_size

    @classmethod
    def from_name(cls, name: str) -> ScramMechanism | None:
        for m in cls:
            if m.mechanism_name == name:
                return m
        return None

    @classmethod
    def from_type(cls, type_id: int) -> ScramMechanism | None:
        for m in cls:
            if m.type_id == type_id:
                return m
        return None

    def hmac(self, key: bytes, message: bytes) -> bytes:
        return hmac.new(key, message, self.hash_name).digest()

    def hash(self, data: bytes) -> bytes:
        return hashlib.new(self.hash_name, data).digest()


@dataclass(frozen=True, slots=True)
class ScramCredential:
    """What the server keeps for one user and mechanism; the password cannot be recovered from it."""

    salt: bytes
    iterations: int
    stored_key: bytes
    server_key: bytes


def salt_password(mechanism: ScramMechanism, password: str, salt: bytes, iterations: int) -> bytes:
    """Hi(password, salt, i) of RFC 5802: PBKDF2 with the mechanism's HMAC (OpenSSL's, through hashlib)."""
    return hashlib.pbkdf2_hmac(mechanism.hash_name, password.encode("utf-8"), salt, iterations)


def credential_from_salted_password(
    mechanism: ScramMechanism, salted_password: bytes, salt: bytes, iterations: int
) -> ScramCredential:
    """The stored form of a salted password (what AlterUserScramCredentials sends)."""
    client_key = mechanism.hmac(salted_password, b"Client Key")
    return ScramCredential(
        salt=salt,
        iterations=iterations,
        stored_key=mechanism.hash(client_key),
        server_key=mechanism.hmac(salted_password, b"Server Key"),
    )


def make_credential(mechanism: ScramMechanism, password: str, salt: bytes, iterations: int) -> ScramCredential:
    return credential_from_salted_password(
        mechanism, salt_password(mechanism, password, salt, iterations), salt, iterations
    )


def password_matches(mechanism: ScramMechanism, credential: ScramCredential, password: str) -> bool:
    """Whether ``password`` is the one ``credential`` was made from (how PLAIN checks a password against the
    SCRAM credentials). Costs one PBKDF2 of ``credential.iterations`` rounds."""
    salted = salt_password(mechanism, password, credential.salt, credential.iterations)
    stored_key = mechanism.hash(mechanism.hmac(salted, b"Client Key"))
    return hmac.compare_digest(stored_key, credential.stored_key)


def stand_in_credential(secret: bytes, mechanism: ScramMechanism, username: str) -> ScramCredential:
    """The credential a SCRAM exchange for an unknown user runs with: its salt is stable for the name (an
    attacker asking twice sees the same salt, as for a real user) and its keys match no password."""
    seed = mechanism.hmac(secret, b"stand-in\x00" + username.encode("utf-8"))
    return ScramCredential(
        salt=seed[:16],
        iterations=MIN_ITERATIONS,
        stored_key=mechanism.hmac(seed, b"stored"),
        server_key=mechanism.hmac(seed, b"server"),
    )


def _xor(a: bytes, b: bytes) -> bytes:
    return (int.from_bytes(a, "big") ^ int.from_bytes(b, "big")).to_bytes(len(a), "big")


# --- message syntax ------------------------------------------------------------------------------------------


def encode_saslname(username: str) -> str:
    """RFC 5802's saslname: ``=`` and ``,`` escaped as ``=3D`` and ``=2C``."""
    return username.replace("=", "=3D").replace(",", "=2C")


def decode_saslname(text: str) -> str:
    out: list[str] = []
    i = 0
    n = len(text)
    while i < n:
        c = text[i]
        if c == "=":
            code = text[i + 1 : i + 3]
            if code == "2C":
                out.append(",")
            elif code == "3D":
                out.append("=")
            else:
                raise ScramError(f"invalid escape {text[i : i + 3]!r} in a user name (only =2C and =3D are allowed)")
            i += 3
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _decode(data: bytes, what: str) -> str:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ScramError(f"the {what} is not UTF-8") from None
    if "\x00" in text:
        raise ScramError(f"the {what} contains a NUL character")
    return text


def _b64(text: str, what: str) -> bytes:
    try:
        return base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError):
        raise ScramError(f"{what} is not valid base64") from None


def _check_printable(nonce: str, what: str) -> None:
    if not nonce:
        raise ScramError(f"the {what} is empty")
    for c in nonce:
        if not "\x21" <= c <= "\x7e" or c == ",":
            raise ScramError(f"the {what} has a character outside printable ASCII: {c!r}")


def _attribute(part: str, name: str, what: str) -> str:
    if not part.startswith(name + "="):
        raise ScramError(f"the {what} does not have {name}= where expected (got {part[:20]!r})")
    return part[len(name) + 1 :]


def _extensions(parts: list[str], what: str) -> tuple[tuple[str, str], ...]:
    out: list[tuple[str, str]] = []
    for part in parts:
        key, sep, value = part.partition("=")
        if not sep or not key or not key.isascii() or not key.isalpha() or not value:
            raise ScramError(f"the {what} has a malformed extension {part[:40]!r}")
        out.append((key, value))
    return tuple(out)


@dataclass(frozen=True, slots=True)
class ClientFirst:
    """``gs2-header client-first-message-bare``; ``bare`` is kept verbatim for the authentication message."""

    gs2_header: str
    authzid: str
    username: str
    nonce: str
    extensions: tuple[tuple[str, str], ...]
    bare: str


def parse_client_first(data: bytes) -> ClientFirst:
    text = _decode(data, "client-first message")
    parts = text.split(",", 2)
    if len(parts) != 3:
        raise ScramError("the client-first message has no gs2 header (expected 'n,,n=USER,r=NONCE')")
    flag, authz_part, bare = parts
    if flag.startswith("p="):
        raise ScramError("the client asked for channel binding, which Kafka's SCRAM does not offer")
    if flag not in ("n", "y"):
        raise ScramError(f"the client-first message starts with {flag[:10]!r}, not the gs2 flag n or y")
    authzid = decode_saslname(_attribute(authz_part, "a", "gs2 header")) if authz_part else ""
    attrs = bare.split(",")
    if attrs[0].startswith("m="):
        raise ScramError("the client-first message has a mandatory extension (m=), which is not supported")
    if len(attrs) < 2:
        raise ScramError("the client-first message lacks n= or r=")
    username = decode_saslname(_attribute(attrs[0], "n", "client-first message"))
    if not username:
        raise ScramError("the client-first message has an empty user name")
    nonce = _attribute(attrs[1], "r", "client-first message")
    _check_printable(nonce, "client nonce")
    return ClientFirst(
        gs2_header=f"{flag},{authz_part},",
        authzid=authzid,
        username=username,
        nonce=nonce,
        extensions=_extensions(attrs[2:], "client-first message"),
        bare=bare,
    )


@dataclass(frozen=True, slots=True)
class ClientFinal:
    channel_binding: bytes
    nonce: str
    extensions: tuple[tuple[str, str], ...]
    proof: bytes
    without_proof: str


def parse_client_final(data: bytes) -> ClientFinal:
    text = _decode(data, "client-final message")
    attrs = text.split(",")
    if len(attrs) < 3:
        raise ScramError("the client-final message lacks c=, r= or p=")
    channel_binding = _b64(_attribute(attrs[0], "c", "client-final message"), "the channel binding (c=)")
    nonce = _attribute(attrs[1], "r", "client-final message")
    _check_printable(nonce, "nonce")
    proof = _b64(_attribute(attrs[-1], "p", "client-final message"), "the proof (p=)")
    return ClientFinal(
        channel_binding=channel_binding,
        nonce=nonce,
        extensions=_extensions(attrs[2:-1], "client-final message"),
        proof=proof,
        without_proof=",".join(attrs[:-1]),
    )


@dataclass(frozen=True, slots=True)
class ServerFirst:
    nonce: str
    salt: bytes
    iterations: int
    text: str


def parse_server_first(data: bytes) -> ServerFirst:
    text = _decode(data, "server-first message")
    attrs = text.split(",")
    if attrs[0].startswith("m="):
        raise ScramError("the server-first message has a mandatory extension (m=), which is not supported")
    if len(attrs) < 3:
        raise ScramError("the server-first message lacks r=, s= or i=")
    nonce = _attribute(attrs[0], "r", "server-first message")
    _check_printable(nonce, "server nonce")
    salt = _b64(_attribute(attrs[1], "s", "server-first message"), "the salt (s=)")
    count = _attribute(attrs[2], "i", "server-first message")
    if not count.isascii() or not count.isdigit() or len(count) > 9:
        raise ScramError(f"the iteration count {count[:12]!r} is not a positive number")
    _extensions(attrs[3:], "server-first message")
    return ServerFirst(nonce=nonce, salt=salt, iterations=int(count), text=text)


def parse_server_final(data: bytes) -> bytes:
    """The server signature of a ``v=`` message; ScramError for an ``e=`` message or bad syntax."""
    text = _decode(data, "server-final message")
    attrs = text.split(",")
    if attrs[0].startswith("e="):
        raise ScramError(f"the server refused the exchange: {attrs[0][2:]}")
    return _b64(_attribute(attrs[0], "v", "server-final message"), "the server signature (v=)")


# --- the exchange -------------------------------------------------------------------------------------------


class _State(Enum):
    CLIENT_FIRST = "expecting the client-first message"
    CLIENT_FINAL = "expecting the client-final message"
    COMPLETE = "complete"
    FAILED = "failed"


class ScramServer:
    """One SCRAM exchange, server side: the client-first message in, the server-first out; the client-final in,
    the server-final out. ``step`` takes each client message in turn; any failure raises ScramError and leaves
    the exchange failed for good.

    ``lookup(username)`` returns the user's credential for this mechanism or None; ``server_nonce`` is the
    caller's fresh random printable string (no commas); ``unknown_user(username)`` makes the stand-in
    credential used for a user that does not exist (a stable salt per name, a key no proof can match).
    """

    def __init__(
        self,
        mechanism: ScramMechanism,
        lookup: Callable[[str], ScramCredential | None],
        server_nonce: str,
        unknown_user: Callable[[str], ScramCredential],
    ) -> None:
        _check_printable(server_nonce, "server nonce")
        self.mechanism = mechanism
        self._lookup = lookup
        self._server_nonce = server_nonce
        self._unknown_user = unknown_user
        self._state = _State.CLIENT_FIRST
        self._first: ClientFirst | None = None
        self._server_first = ""
        self._credential: ScramCredential | None = None
        self._known = False
        self.username: str | None = None
        """The user being authenticated, once the client-first message named one (for logs)."""

    @property
    def complete(self) -> bool:
        return self._state is _State.COMPLETE

    def step(self, message: bytes) -> bytes:
        if self._state is _State.CLIENT_FIRST:
            handler = self._client_first
        elif self._state is _State.CLIENT_FINAL:
            handler = self._client_final
        else:
            raise ScramError(f"a SCRAM message arrived after the exchange was {self._state.value}")
        try:
            return handler(message)
        except ScramError:
            self._state = _State.FAILED
            self._credential = None
            raise

    def _client_first(self, message: bytes) -> bytes:
        first = parse_client_first(message)
        self._first = first
        self.username = first.username
        if first.authzid and first.authzid != first.username:
            raise ScramError(
                f"user {first.username!r} asked to act as {first.authzid!r}: the authorization id must be the user"
            )
        for key, value in first.extensions:
            if key == "tokenauth" and value.lower() == "true":
                raise ScramError("delegation tokens (tokenauth=true) are not supported")
        credential = self._lookup(first.username)
        self._known = credential is not None
        if credential is None:
            credential = self._unknown_user(first.username)
        elif credential.iterations < MIN_ITERATIONS:
            raise ScramError(
                f"the stored credential of {first.username!r} has {credential.iterations} iterations, "
                f"fewer than the minimum {MIN_ITERATIONS}"
            )
        self._credential = credential
        salt = base64.b64encode(credential.salt).decode("ascii")
        self._server_first = f"r={first.nonce}{self._server_nonce},s={salt},i={credential.iterations}"
        self._state = _State.CLIENT_FINAL
        return self._server_first.encode("ascii")

    def _client_final(self, message: bytes) -> bytes:
        first, credential = self._first, self._credential
        assert first is not None and credential is not None
        final = parse_client_final(message)
        if final.channel_binding != first.gs2_header.encode("utf-8"):
            raise ScramError("the channel binding (c=) does not repeat the gs2 header of the client-first message")
        expected = first.nonce + self._server_nonce
        if final.nonce != expected and final.nonce != first.nonce + expected:
            raise ScramError("the nonce of the client-final message is not the one the server sent")
        mech = self.mechanism
        if len(final.proof) != mech.digest_size:
            raise ScramError(f"the client proof has {len(final.proof)} bytes, not {mech.digest_size}")
        auth_message = f"{first.bare},{self._server_first},{final.without_proof}".encode()
        client_signature = mech.hmac(credential.stored_key, auth_message)
        client_key = _xor(final.proof, client_signature)
        proof_ok = hmac.compare_digest(mech.hash(client_key), credential.stored_key)
        if not self._known:
            raise ScramError(f"no {mech.mechanism_name} credential for user {first.username!r}")
        if not proof_ok:
            raise ScramError(f"wrong password for user {first.username!r} (the client proof does not match)")
        server_signature = mech.hmac(credential.server_key, auth_message)
        self._state = _State.COMPLETE
        self._credential = None
        return b"v=" + base64.b64encode(server_signature)


class ScramClient:
    """One SCRAM exchange, client side (our tests drive the server with it; the client slice will use it).

    ``first_message()``, then ``final_message(server_first)``, then ``check_server_final(server_final)``, which
    raises ScramError unless the server proved it holds the user's credential.
    """

    def __init__(self, mechanism: ScramMechanism, username: str, password: str, client_nonce: str) -> None:
        _check_printable(client_nonce, "client nonce")
        self.mechanism = mechanism
        self._password = password
        self._nonce = client_nonce
        self._bare = f"n={encode_saslname(username)},r={client_nonce}"
        self._server_signature: bytes | None = None

    def first_message(self) -> bytes:
        return f"n,,{self._bare}".encode()

    def final_message(self, server_first: bytes) -> bytes:
        sf = parse_server_first(server_first)
        if not sf.nonce.startswith(self._nonce) or sf.nonce == self._nonce:
            raise ScramError("the server nonce does not extend the client nonce")
        if sf.iterations < MIN_ITERATIONS:
            raise ScramError(f"the server asks for {sf.iterations} iterations, fewer than {MIN_ITERATIONS}")
        mech = self.mechanism
        salted = salt_password(mech, self._password, sf.salt, sf.iterations)
        client_key = mech.hmac(salted, b"Client Key")
        stored_key = mech.hash(client_key)
        without_proof = f"c=biws,r={sf.nonce}"
        auth_message = f"{self._bare},{sf.text},{without_proof}".encode()
        proof = _xor(client_key, mech.hmac(stored_key, auth_message))
        self._server_signature = mech.hmac(mech.hmac(salted, b"Server Key"), auth_message)
        return f"{without_proof},p={base64.b64encode(proof).decode('ascii')}".encode("ascii")

    def check_server_final(self, server_final: bytes) -> None:
        if self._server_signature is None:
            raise ScramError("the server-final message arrived before the server-first message")
        if not hmac.compare_digest(parse_server_final(server_final), self._server_signature):
            raise ScramError("the server's signature is wrong: it does not hold this user's credential")
