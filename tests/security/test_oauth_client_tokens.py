"""The client side of OAUTHBEARER without a network: the message our clients send parses with the broker's
parser (and is refused by nothing the broker checks), librdkafka's unsecured builder's tokens pass Kafka's unsecured
validator as ours implements it, callbacks are answered as confluent-kafka answers them, and the token cache asks
for a new token at 80% of the lifetime, on a manual clock."""

from __future__ import annotations

import pytest

from groupstream.security.oauth_client import (
    CallbackSource,
    OAuthConfigError,
    OAuthToken,
    OAuthTokenError,
    TokenCache,
    client_message,
    parse_token_response,
    parse_unsecured_config,
    token_subject,
    unsecured_token,
)
from groupstream.security.oauthbearer import UnsecuredValidator, parse_client_response

NOW_MS = 1_700_000_000_000


def test_the_message_parses_with_the_brokers_parser_and_the_unsecured_token_validates() -> None:
    config = parse_unsecured_config("principal=alice scope=read,write lifeSeconds=60 extension_traceId=abc")
    token = unsecured_token(config, NOW_MS)
    assert (token.principal, token.expires_at_ms, dict(token.extensions)) == ("alice", NOW_MS + 60_000, {"traceId": "abc"})
    parsed = parse_client_response(client_message(token))
    assert parsed.token == token.value and dict(parsed.extensions) == {"traceId": "abc"}
    valid = UnsecuredValidator().validate(parsed.token, NOW_MS + 1000)
    assert valid.principal_name == "alice" and token_subject(token.value) == "alice"
    with pytest.raises(Exception, match="expired"):
        UnsecuredValidator().validate(parsed.token, NOW_MS + 61_000)


@pytest.mark.parametrize(
    ("text", "says"),
    [("scope=x", "needs principal=NAME"), ("principal=a colour=red", "unknown key 'colour'"),
     ("principal=a lifeSeconds=soon", "lifeSeconds must be a number"), ("principal=a extension_auth=x", "'auth'")],
)  # fmt: skip
def test_unsecured_config_mistakes(text: str, says: str) -> None:
    with pytest.raises(OAuthConfigError, match=says):
        parse_unsecured_config(text)


def test_callback_answers_as_confluent_kafka_takes_them() -> None:
    jwt_for_bob = unsecured_token(parse_unsecured_config("principal=bob"), NOW_MS).value
    two = CallbackSource(lambda cfg: (jwt_for_bob, NOW_MS / 1000 + 10))(NOW_MS)
    assert (two.principal, two.expires_at_ms) == ("bob", NOW_MS + 10_000)  # the principal read from the token
    four = CallbackSource(lambda cfg: ("opaque", NOW_MS / 1000 + 10, "carol", {"k": "v"}))(NOW_MS)
    assert (four.principal, dict(four.extensions)) == ("carol", {"k": "v"})
    for answer, says in [("token", "must return"), (("", 1.0), "empty token"), (("t", NOW_MS / 1000 - 1), "expired"),
                         (("t", "soon"), "epoch seconds")]:  # fmt: skip
        with pytest.raises(OAuthTokenError, match=says):
            CallbackSource(lambda cfg, a=answer: a)(NOW_MS)


def test_token_endpoint_answers() -> None:
    token = parse_token_response(b'{"access_token": "abc", "expires_in": 300}', NOW_MS, {})
    assert token.expires_at_ms == NOW_MS + 300_000
    jwt = unsecured_token(parse_unsecured_config("principal=svc lifeSeconds=90"), NOW_MS).value
    assert parse_token_response(f'{{"access_token": "{jwt}"}}'.encode(), NOW_MS, {}).principal == "svc"
    for body, says in [(b"<html>", "did not answer JSON"), (b"{}", "no access_token"),
                       (b'{"access_token": "opaque"}', "neither expires_in")]:  # fmt: skip
        with pytest.raises(OAuthTokenError, match=says):
            parse_token_response(body, NOW_MS, {})


def test_the_cache_refreshes_at_80_percent_of_the_lifetime() -> None:
    clock = [NOW_MS]
    made: list[int] = []

    def source(now_ms: int) -> OAuthToken:
        made.append(now_ms)
        return OAuthToken(f"t{len(made)}", now_ms + 10_000, "alice", {}, now_ms)

    cache = TokenCache(source, lambda: clock[0])
    assert cache.current().value == "t1"
    clock[0] = NOW_MS + 7_999
    assert cache.current().value == "t1"
    clock[0] = NOW_MS + 8_000
    assert cache.current().value == "t2" and made == [NOW_MS, NOW_MS + 8_000]
    assert "t2" not in repr(cache.current())
