"""Fuzzing the SASL message parsers and state machines: whatever bytes a client sends, the answer is a challenge,
a success or our own error (ScramError, PlainError, AuthFailed), never another exception. Hypothesis prints the
failing input and how to replay it."""

from __future__ import annotations

import contextlib

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from groupstream.security.plain import PlainError, parse_plain
from groupstream.security.sasl import Authenticated, AuthFailed, Challenge, CheckPassword, SaslSession
from groupstream.security.scram import (
    ScramClient,
    ScramError,
    ScramMechanism,
    ScramServer,
    make_credential,
    parse_client_final,
    parse_client_first,
    parse_server_final,
    parse_server_first,
    stand_in_credential,
)

SHA256 = ScramMechanism.SCRAM_SHA_256
CRED = make_credential(SHA256, "pw", b"s" * 16, 4096)
FUZZ = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Messages close to valid ones find more paths than random bytes alone.
VALID = [
    b"n,,n=alice,r=cnonce",
    b"y,a=alice,n=alice,r=cnonce,ext=1",
    b"c=biws,r=cnoncesrv,p=" + b"A" * 44,
    b"r=cnoncesrv,s=c2FsdA==,i=4096",
    b"v=AAAA",
    b"\x00alice\x00pw",
]


@st.composite
def mutated(draw: st.DrawFn) -> bytes:
    data = bytearray(draw(st.sampled_from(VALID)))
    for _ in range(draw(st.integers(0, 6))):
        op = draw(st.sampled_from(["insert", "delete", "replace"]))
        pos = draw(st.integers(0, len(data)))
        byte = draw(st.sampled_from(b",=\x00\xff nrcpvsiae0Aa+/"))
        if op == "insert":
            data.insert(pos, byte)
        elif data:
            pos = min(pos, len(data) - 1)
            if op == "delete":
                del data[pos]
            else:
                data[pos] = byte
    return bytes(data)


messages = st.one_of(st.binary(max_size=200), mutated())


@FUZZ
@given(messages)
def test_parsers_raise_only_scram_error(data: bytes) -> None:
    for parse in (parse_client_first, parse_client_final, parse_server_first, parse_server_final):
        with contextlib.suppress(ScramError):
            parse(data)


@FUZZ
@given(messages)
def test_plain_parser_raises_only_plain_error(data: bytes) -> None:
    try:
        login = parse_plain(data)
    except PlainError as e:
        assert e.client_message
    else:
        assert login.username and login.password


@FUZZ
@given(first=messages, final=messages)
def test_scram_server_answers_any_pair_of_messages(first: bytes, final: bytes) -> None:
    srv = ScramServer(SHA256, {"alice": CRED}.get, "srv", lambda u: stand_in_credential(b"k", SHA256, u))
    try:
        srv.step(first)
        srv.step(final)
    except ScramError:
        assert not srv.complete
    else:
        raise AssertionError(f"a made-up exchange succeeded: {first!r} {final!r}")


class _Creds:
    def scram_credential(self, user: str, mechanism: ScramMechanism) -> object:
        return CRED if user == "alice" and mechanism is SHA256 else None

    def credentials_of(self, user: str) -> list[object]:
        return [(SHA256, CRED)] if user == "alice" else []


@FUZZ
@given(
    mechanism=st.sampled_from(["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]),
    tokens=st.lists(messages, min_size=1, max_size=4),
    version=st.integers(0, 2),
)
def test_sasl_session_never_authenticates_garbage(mechanism: str, tokens: list[bytes], version: int) -> None:
    session = SaslSession(["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"], 0, _Creds(), lambda: "nonce",  # type: ignore[arg-type]
                          lambda m, u: stand_in_credential(b"k", m, u))  # fmt: skip
    session.handshake(mechanism, 1)
    for token in tokens:
        outcome = session.authenticate(token, version, 0)
        if isinstance(outcome, CheckPassword):
            outcome = session.password_checked(outcome.login.password == "pw" and outcome.login.username == "alice", 0)
        if isinstance(outcome, Authenticated):
            # only PLAIN with alice's real password gets here from these inputs
            assert mechanism == "PLAIN" and token.split(b"\x00")[1:] == [b"alice", b"pw"]
            return
        if isinstance(outcome, AuthFailed):
            assert session.admit(3, "Metadata", 0).reason
            return
        assert isinstance(outcome, Challenge)


def test_a_real_client_still_gets_through_the_session() -> None:
    """The fuzz target is not vacuous: the same session accepts a correct exchange."""
    session = SaslSession(["SCRAM-SHA-256"], 0, _Creds(), lambda: "nonce",  # type: ignore[arg-type]
                          lambda m, u: stand_in_credential(b"k", m, u))  # fmt: skip
    session.handshake("SCRAM-SHA-256", 1)
    client = ScramClient(SHA256, "alice", "pw", "cn")
    first = session.authenticate(client.first_message(), 1, 0)
    assert isinstance(first, Challenge)
    done = session.authenticate(client.final_message(first.token), 1, 0)
    assert isinstance(done, Authenticated) and done.principal == "User:alice"
