"""The SCRAM state machines, without a network: RFC 7677's published exchange byte for byte, round trips of both
mechanisms, and every way a client can get the exchange wrong."""

from __future__ import annotations

import base64

import pytest

from groupstream.security.scram import (
    MIN_ITERATIONS,
    ScramClient,
    ScramCredential,
    ScramError,
    ScramMechanism,
    ScramServer,
    decode_saslname,
    encode_saslname,
    make_credential,
    parse_client_first,
    password_matches,
    stand_in_credential,
)

SHA256 = ScramMechanism.SCRAM_SHA_256
SHA512 = ScramMechanism.SCRAM_SHA_512
SECRET = b"k" * 32

# RFC 7677 section 3: user "user", password "pencil"
RFC_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC_CLIENT_NONCE = "rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
RFC_CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_FIRST = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
RFC_CLIENT_FINAL = (
    b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
)
RFC_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def server(
    users: dict[str, ScramCredential], mechanism: ScramMechanism = SHA256, nonce: str = "srvnonce"
) -> ScramServer:
    return ScramServer(mechanism, users.get, nonce, lambda user: stand_in_credential(SECRET, mechanism, user))


def exchange(srv: ScramServer, client: ScramClient) -> None:
    final = client.final_message(srv.step(client.first_message()))
    client.check_server_final(srv.step(final))


def test_rfc7677_exchange_byte_for_byte() -> None:
    users = {"user": make_credential(SHA256, "pencil", RFC_SALT, 4096)}
    srv = server(users, nonce=RFC_SERVER_NONCE)
    assert srv.step(RFC_CLIENT_FIRST) == RFC_SERVER_FIRST
    assert not srv.complete
    assert srv.step(RFC_CLIENT_FINAL) == RFC_SERVER_FINAL
    assert srv.complete and srv.username == "user"


def test_rfc7677_client_side_byte_for_byte() -> None:
    client = ScramClient(SHA256, "user", "pencil", RFC_CLIENT_NONCE)
    assert client.first_message() == RFC_CLIENT_FIRST
    assert client.final_message(RFC_SERVER_FIRST) == RFC_CLIENT_FINAL
    client.check_server_final(RFC_SERVER_FINAL)
    with pytest.raises(ScramError, match="signature is wrong"):
        client.check_server_final(b"v=" + base64.b64encode(b"\0" * 32))


@pytest.mark.parametrize("mechanism", list(ScramMechanism), ids=lambda m: m.mechanism_name)
@pytest.mark.parametrize("username", ["alice", "a,b=c", "ünïcode", "=2C"])
def test_round_trip(mechanism: ScramMechanism, username: str) -> None:
    cred = make_credential(mechanism, "p@ss,wörd=", b"salt-bytes-16..", MIN_ITERATIONS)
    srv = server({username: cred}, mechanism)
    exchange(srv, ScramClient(mechanism, username, "p@ss,wörd=", "clientnonce123"))
    assert srv.complete and srv.username == username


def test_wrong_password_fails_at_the_proof() -> None:
    srv = server({"alice": make_credential(SHA256, "right", b"s" * 16, 4096)})
    client = ScramClient(SHA256, "alice", "wrong", "cn")
    final = client.final_message(srv.step(client.first_message()))
    with pytest.raises(ScramError, match="wrong password for user 'alice'"):
        srv.step(final)
    with pytest.raises(ScramError, match="after the exchange was failed"):
        srv.step(final)


def test_unknown_user_looks_like_a_user_until_the_proof() -> None:
    """The server-first message of an unknown user has a stable salt and the minimum iterations, like a real
    user's; the exchange fails at the proof only."""
    firsts = []
    for _ in range(2):
        srv = server({})
        client = ScramClient(SHA256, "ghost", "whatever", "cn")
        server_first = srv.step(client.first_message())
        firsts.append(server_first)
        with pytest.raises(ScramError, match="no SCRAM-SHA-256 credential for user 'ghost'"):
            srv.step(client.final_message(server_first))
    assert firsts[0] == firsts[1]
    assert b",i=4096" in firsts[0]


def test_credential_of_the_other_mechanism_does_not_count() -> None:
    users = {"alice": make_credential(SHA512, "pw", b"s" * 16, 4096)}
    srv = ScramServer(SHA256, lambda u: None, "n", lambda u: stand_in_credential(SECRET, SHA256, u))
    client = ScramClient(SHA256, "alice", "pw", "cn")
    with pytest.raises(ScramError, match="no SCRAM-SHA-256 credential"):
        srv.step(client.final_message(srv.step(client.first_message())))
    assert users  # the SHA-512 credential exists, yet SHA-256 fails


def test_librdkafka_repeated_client_nonce_is_accepted() -> None:
    """librdkafka < 2.6.1 sends r=<client nonce><server r=> (librdkafka#4895): still echoes the server nonce."""
    cred = make_credential(SHA256, "pencil", RFC_SALT, 4096)
    srv = server({"user": cred}, nonce=RFC_SERVER_NONCE)
    srv.step(RFC_CLIENT_FIRST)
    nonce = RFC_CLIENT_NONCE + RFC_CLIENT_NONCE + RFC_SERVER_NONCE
    # the proof of that message, computed as such a client computes it
    bare, server_first, without_proof = "n=user,r=" + RFC_CLIENT_NONCE, RFC_SERVER_FIRST.decode(), f"c=biws,r={nonce}"
    from groupstream.security.scram import _xor, salt_password

    salted = salt_password(SHA256, "pencil", RFC_SALT, 4096)
    client_key = SHA256.hmac(salted, b"Client Key")
    auth = f"{bare},{server_first},{without_proof}".encode()
    proof = _xor(client_key, SHA256.hmac(SHA256.hash(client_key), auth))
    srv.step(f"{without_proof},p={base64.b64encode(proof).decode()}".encode())
    assert srv.complete


def _first_then(final: bytes, first: bytes = b"n,,n=alice,r=cn") -> str:
    srv = server({"alice": make_credential(SHA256, "pw", b"s" * 16, 4096)})
    srv.step(first)
    with pytest.raises(ScramError) as e:
        srv.step(final)
    return str(e.value)


PROOF = base64.b64encode(b"x" * 32).decode()


@pytest.mark.parametrize(
    ("final", "message"),
    [
        (f"c=biws,r=cnWRONG,p={PROOF}", "nonce of the client-final message"),
        (f"c=biws,r=cn,p={PROOF}", "nonce of the client-final message"),  # the client nonce alone
        (f"c=eSws,r=cnsrvnonce,p={PROOF}", "channel binding"),  # base64("y,,") after "n,,"
        ("c=biws,r=cnsrvnonce,p=AAAA", "has 3 bytes, not 32"),
        ("c=biws,r=cnsrvnonce,p=not*base64", "not valid base64"),
        ("c=biws,r=cnsrvnonce", "lacks c=, r= or p="),
        (f"r=cnsrvnonce,c=biws,p={PROOF}", "does not have c= where expected"),
        (f"c=biws,r=cnsrvnonce,p={PROOF},x=1", "does not have p= where expected"),
    ],
)
def test_bad_client_final(final: str, message: str) -> None:
    assert message in _first_then(final.encode())


@pytest.mark.parametrize(
    ("first", "message"),
    [
        (b"p=tls-unique,,n=alice,r=cn", "channel binding"),
        (b"x,,n=alice,r=cn", "gs2 flag"),
        (b"n,,m=ext,n=alice,r=cn", "mandatory extension"),
        (b"n,a=bob,n=alice,r=cn", "asked to act as 'bob'"),
        (b"n,,n=alice,r=cn,tokenauth=true", "delegation tokens"),
        (b"n,,n=,r=cn", "empty user name"),
        (b"n,,n=al=ice,r=cn", "invalid escape"),
        (b"n,,n=alice,r=c n", "outside printable ASCII"),
        (b"n,,n=alice", "lacks n= or r="),
        (b"n,n=alice,r=cn", "gs2 header does not have a= where expected"),
        (b"n=alice,r=cn", "no gs2 header"),
        (b"n,,n=alice,r=cn,1bad=x", "malformed extension"),
        (b"\xff\xfe", "not UTF-8"),
        (b"n,,n=al\x00ice,r=cn", "NUL"),
    ],
)
def test_bad_client_first(first: bytes, message: str) -> None:
    srv = server({"alice": make_credential(SHA256, "pw", b"s" * 16, 4096)})
    with pytest.raises(ScramError, match=message):
        srv.step(first)
    assert not srv.complete


def test_authzid_equal_to_the_user_and_unknown_extensions_are_accepted() -> None:
    srv = server({"alice": make_credential(SHA256, "pw", b"s" * 16, 4096)})
    first = b"n,a=alice,n=alice,r=cn,future=1"
    server_first = srv.step(first)
    # a client with that gs2 header binds c= to it
    from groupstream.security.scram import _xor, salt_password

    sf = server_first.decode()
    nonce = sf.split(",")[0][2:]
    without_proof = f"c={base64.b64encode(b'n,a=alice,').decode()},r={nonce}"
    salted = salt_password(SHA256, "pw", b"s" * 16, 4096)
    ck = SHA256.hmac(salted, b"Client Key")
    auth = f"n=alice,r=cn,future=1,{sf},{without_proof}".encode()
    proof = _xor(ck, SHA256.hmac(SHA256.hash(ck), auth))
    srv.step(f"{without_proof},p={base64.b64encode(proof).decode()}".encode())
    assert srv.complete


def test_stored_credential_below_the_minimum_iterations_is_refused() -> None:
    srv = server({"alice": make_credential(SHA256, "pw", b"s" * 16, 1000)})
    with pytest.raises(ScramError, match="1000 iterations, fewer than the minimum 4096"):
        srv.step(b"n,,n=alice,r=cn")


def test_no_message_after_completion() -> None:
    srv = server({"alice": make_credential(SHA256, "pw", b"s" * 16, 4096)})
    exchange(srv, ScramClient(SHA256, "alice", "pw", "cn"))
    with pytest.raises(ScramError, match="after the exchange was complete"):
        srv.step(b"n,,n=alice,r=cn")


def test_client_refuses_a_server_that_lowers_iterations_or_drops_the_nonce() -> None:
    client = ScramClient(SHA256, "alice", "pw", "cn")
    with pytest.raises(ScramError, match="fewer than 4096"):
        client.final_message(b"r=cnXY,s=c2FsdA==,i=1024")
    with pytest.raises(ScramError, match="does not extend the client nonce"):
        client.final_message(b"r=zzXY,s=c2FsdA==,i=4096")
    with pytest.raises(ScramError, match="before the server-first"):
        client.check_server_final(b"v=AAAA")
    client.final_message(b"r=cnXY,s=c2FsdA==,i=4096")
    with pytest.raises(ScramError, match="server refused the exchange: invalid-proof"):
        client.check_server_final(b"e=invalid-proof")


def test_saslname_escaping() -> None:
    assert encode_saslname("a,b=c") == "a=2Cb=3Dc"
    assert decode_saslname("a=2Cb=3Dc") == "a,b=c"
    assert parse_client_first(b"n,,n=a=2Cb,r=x").username == "a,b"


def test_password_matches_checks_against_the_stored_key() -> None:
    cred = make_credential(SHA512, "secret", b"salt" * 4, 4096)
    assert password_matches(SHA512, cred, "secret")
    assert not password_matches(SHA512, cred, "Secret")
    assert cred.salt == b"salt" * 4 and len(cred.stored_key) == 64 and len(cred.server_key) == 64
