"""The client's security settings and the SASL steps of `NodeConnection`, sans-IO: the property reader's
checks, then SaslHandshake and SaslAuthenticate against our broker's own SCRAM and PLAIN verifiers driven through
the real codec (`WireBroker`), the fatal refusals, and KIP-368's re-authentication schedule on a manual clock."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from net_wire import WireBroker, all_versions, config

from groupstream.client.errors import ClientConfigError
from groupstream.client.net.config import NETWORK_PROPERTIES, NetworkConfig, PropertyReader
from groupstream.client.net.node_connection import ConnectionState, NodeConnection
from groupstream.client.net.security import SaslSettings, SecurityConfig, SecurityProtocol
from groupstream.protocol.error_codes import ErrorCode
from groupstream.protocol.messages import by_name
from groupstream.security.scram import (
    ScramError,
    ScramMechanism,
    ScramServer,
    make_credential,
    stand_in_credential,
)

API_VERSIONS = by_name("ApiVersions")
HANDSHAKE = by_name("SaslHandshake")
AUTHENTICATE = by_name("SaslAuthenticate")
USER, PASSWORD = "alice", "alice-secret"


def read(**props: Any) -> NetworkConfig:
    props = {"bootstrap.servers": "127.0.0.1:9092", **{k.replace("_", "."): v for k, v in props.items()}}
    return NetworkConfig.read(PropertyReader(props, NETWORK_PROPERTIES), "test")


# --- settings -----------------------------------------------------------------------------------------------------


def test_plaintext_is_the_default() -> None:
    assert read().security.protocol is SecurityProtocol.PLAINTEXT
    assert read().security.ssl_context is None


def test_unknown_protocol_and_mechanism_name_the_choices() -> None:
    with pytest.raises(ClientConfigError, match=re.escape("security.protocol must be one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL")):
        read(security_protocol="TLS")
    with pytest.raises(ClientConfigError, match=re.escape("sasl.mechanism must be one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512")):
        read(security_protocol="SASL_PLAINTEXT", sasl_mechanism="GSSAPI", sasl_username="a", sasl_password="b")


def test_sasl_needs_a_user_and_a_password() -> None:
    with pytest.raises(ClientConfigError, match=re.escape("needs sasl.username and sasl.password")):
        read(security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN", sasl_username="a")


def test_jaas_config_gives_user_and_password_for_its_mechanisms() -> None:
    jaas = f'org.apache.kafka.common.security.scram.ScramLoginModule required username="{USER}" password="{PASSWORD}";'
    sasl = read(security_protocol="SASL_PLAINTEXT", sasl_mechanism="SCRAM-SHA-512", sasl_jaas_config=jaas).security.sasl
    assert sasl == SaslSettings("SCRAM-SHA-512", USER, PASSWORD)
    assert PASSWORD not in repr(sasl)
    with pytest.raises(ClientConfigError, match=re.escape("ScramLoginModule does not serve sasl.mechanism=PLAIN")):
        read(security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN", sasl_jaas_config=jaas)
    with pytest.raises(ClientConfigError, match=re.escape("login module com.example.Other is not supported")):
        read(security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
             sasl_jaas_config='com.example.Other required username="a" password="b";')  # fmt: skip


def test_missing_ca_file_and_bad_identification_algorithm_are_named(tmp_path: Path) -> None:
    with pytest.raises(ClientConfigError, match=re.escape("ssl.ca.location: cannot read CA certificates from")):
        read(security_protocol="SSL", ssl_ca_location=str(tmp_path / "absent.pem"))
    with pytest.raises(ClientConfigError, match=re.escape("ssl.truststore.location: cannot read CA certificates")):
        read(security_protocol="SSL", ssl_truststore_location=str(tmp_path / "absent.pem"))
    with pytest.raises(ClientConfigError, match=re.escape("ssl.endpoint.identification.algorithm must be 'https'")):
        read(security_protocol="SSL", ssl_endpoint_identification_algorithm="dns")
    assert read(security_protocol="SSL", ssl_endpoint_identification_algorithm="").security.check_hostname is False


# --- the SASL steps -----------------------------------------------------------------------------------------------


def sasl_connection(mechanism: str, password: str = PASSWORD) -> tuple[NodeConnection, WireBroker]:
    security = SecurityConfig(SecurityProtocol.SASL_PLAINTEXT, sasl=SaslSettings(mechanism, USER, password))
    conn = NodeConnection(1, "h", 1, config(security=security), nonce=lambda: "clientnonce0123456789")
    broker = WireBroker(conn)
    conn.connect_started(0)
    conn.connect_established(0)
    req = broker.one_request()
    broker.reply(req, API_VERSIONS.Response(error_code=0, api_keys=all_versions()), 1)
    assert conn.state is ConnectionState.AUTHENTICATING
    return conn, broker


def authenticate_scram(conn: NodeConnection, broker: WireBroker, mechanism: ScramMechanism, lifetime_ms: int = 0) -> Any:
    hs = broker.one_request()
    assert hs.api is HANDSHAKE and hs.body.mechanism == mechanism.mechanism_name and hs.version == 1
    assert broker.reply(hs, HANDSHAKE.Response(error_code=0, mechanisms=["SCRAM-SHA-256", "SCRAM-SHA-512"]), 2).failure is None
    credential = make_credential(mechanism, PASSWORD, b"salt" * 4, 4096)
    server = ScramServer(mechanism, {USER: credential}.get, "servernonce",
                         lambda user: stand_in_credential(b"secret", mechanism, user))  # fmt: skip
    first = broker.one_request()
    assert first.api is AUTHENTICATE and first.version == 2
    r = broker.reply(first, AUTHENTICATE.Response(error_code=0, auth_bytes=server.step(bytes(first.body.auth_bytes))), 3)
    assert r.failure is None
    final = broker.one_request()
    try:
        server_final = server.step(bytes(final.body.auth_bytes))
    except ScramError as e:
        return broker.reply(final, AUTHENTICATE.Response(error_code=ErrorCode.SASL_AUTHENTICATION_FAILED,
                                                         error_message=str(e)), 4)  # fmt: skip
    return broker.reply(final, AUTHENTICATE.Response(error_code=0, auth_bytes=server_final,
                                                     session_lifetime_ms=lifetime_ms), 4)  # fmt: skip


@pytest.mark.parametrize("mechanism", list(ScramMechanism))
def test_scram_exchange_makes_the_connection_ready(mechanism: ScramMechanism) -> None:
    conn, broker = sasl_connection(mechanism.mechanism_name)
    assert not conn.can_send()
    result = authenticate_scram(conn, broker, mechanism)
    assert result.failure is None and conn.is_ready and conn.can_send()


def test_wrong_scram_password_is_fatal_and_names_user_mechanism_and_broker_message() -> None:
    conn, broker = sasl_connection("SCRAM-SHA-256", password="wrong")
    result = authenticate_scram(conn, broker, ScramMechanism.SCRAM_SHA_256)
    assert result.fatal
    assert result.failure is not None
    assert result.failure.startswith("authentication failed for user alice with SCRAM-SHA-256: wrong password")


def test_plain_sends_one_token() -> None:
    conn, broker = sasl_connection("PLAIN")
    hs = broker.one_request()
    broker.reply(hs, HANDSHAKE.Response(error_code=0, mechanisms=["PLAIN"]), 2)
    auth = broker.one_request()
    assert bytes(auth.body.auth_bytes) == f"\0{USER}\0{PASSWORD}".encode()
    assert broker.reply(auth, AUTHENTICATE.Response(error_code=0, auth_bytes=b""), 3).failure is None
    assert conn.is_ready


def test_a_mechanism_the_broker_does_not_enable_is_fatal() -> None:
    _conn, broker = sasl_connection("SCRAM-SHA-512")
    hs = broker.one_request()
    result = broker.reply(hs, HANDSHAKE.Response(error_code=ErrorCode.UNSUPPORTED_SASL_MECHANISM, mechanisms=["PLAIN"]), 2)
    assert result.fatal
    assert result.failure == ("authentication failed for user alice with SCRAM-SHA-512: the broker does not enable "
                              "SCRAM-SHA-512 (it enables PLAIN)")  # fmt: skip


def test_reauthenticates_at_85_percent_of_the_session_lifetime_holding_requests_back() -> None:
    conn, broker = sasl_connection("SCRAM-SHA-256")
    authenticate_scram(conn, broker, ScramMechanism.SCRAM_SHA_256, lifetime_ms=10_000)
    assert conn.session_lifetime_ms == 10_000
    assert conn.next_deadline_ms() == 4 + 8_500
    assert not conn.maybe_reauthenticate(4 + 8_499)
    assert conn.maybe_reauthenticate(4 + 8_500)
    assert conn.is_ready and not conn.can_send()  # new requests wait for the new session
    result = authenticate_scram(conn, broker, ScramMechanism.SCRAM_SHA_256, lifetime_ms=10_000)
    assert result.failure is None and conn.can_send() and conn.reauthentications == 1
