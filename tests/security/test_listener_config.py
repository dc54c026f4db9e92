"""Listeners and their security under Kafka's property names, and the TLS contexts built from them: what each
setting gives, and one clear ConfigError for each mistake."""

from __future__ import annotations

import re
import ssl
from pathlib import Path

import pytest
from tls_pki import PASSWORD, Pki

from groupstream.broker.config import BrokerConfig, ConfigError
from groupstream.cli.broker_cmd import build_config
from groupstream.cli.main import build_parser
from groupstream.security.config import SecurityProtocol
from groupstream.security.tls import TlsConfigError, TlsSettings, iana_cipher_names, server_context


def config(**props: str) -> BrokerConfig:
    c = BrokerConfig(data_dir=Path("unused"))
    c.apply(props)
    return c


def cli(*args: str) -> BrokerConfig:
    return build_config(build_parser().parse_args(["broker", "--data-dir", "unused", *args]))


def test_default_is_one_plaintext_listener() -> None:
    (only,) = BrokerConfig(data_dir=Path("x"), host="127.0.0.1", port=9092).resolve_listeners()
    assert (only.name, only.protocol, only.host, only.port) == ("PLAINTEXT", SecurityProtocol.PLAINTEXT, "127.0.0.1", 9092)
    assert only.security is not None and only.security.tls is None and not only.security.mechanisms


def test_kafka_syntax_with_names_and_advertised_listeners() -> None:
    c = config(
        **{
            "listeners": "PLAINTEXT://127.0.0.1:9092,INTERNAL://0.0.0.0:9093,SASL_SSL://[::1]:9094",
            "listener.security.protocol.map": "INTERNAL:SASL_PLAINTEXT",
            "advertised.listeners": "INTERNAL://broker.internal:19093,SASL_SSL://public.example:443",
            "ssl.keystore.location": "/k.pem",
        }
    )
    plain, internal, secure = c.resolve_listeners()
    assert str(plain) == "PLAINTEXT://127.0.0.1:9092" and plain.advertised == ("127.0.0.1", 9092)
    assert internal.protocol is SecurityProtocol.SASL_PLAINTEXT and internal.advertised == ("broker.internal", 19093)
    assert secure.host == "::1" and str(secure) == "SASL_SSL://[::1]:9094"
    assert secure.advertised == ("public.example", 443)
    assert internal.security is not None and internal.security.mechanisms == ("SCRAM-SHA-256", "SCRAM-SHA-512")


def test_repeated_listen_flags_and_a_bare_hostport() -> None:
    c = cli("--listen", "127.0.0.1:0", "--listen", "SSL://127.0.0.1:0", "--advertised", "public:1234",
            "--set", "ssl.keystore.location=/k.pem")  # fmt: skip
    first, tls = c.resolve_listeners()
    assert first.protocol is SecurityProtocol.PLAINTEXT and first.advertised == ("public", 1234)
    assert tls.protocol is SecurityProtocol.SSL and tls.advertised == ("127.0.0.1", 0)
    assert (c.host, c.port) == ("127.0.0.1", 0)


def test_listener_prefixed_properties_override_and_client_auth_rules() -> None:
    """As in Kafka 3.0+, ssl.client.auth applies to SSL listeners; a SASL_SSL listener only takes its prefixed one."""
    c = config(
        **{
            "listeners": "SSL://h:1,SASL_SSL://h:2,MTLS://h:3",
            "listener.security.protocol.map": "MTLS:SSL",
            "ssl.keystore.location": "/k.pem",
            "ssl.client.auth": "required",
            "listener.name.mtls.ssl.keystore.location": "/other.pem",
            "listener.name.sasl_ssl.sasl.enabled.mechanisms": "PLAIN",
            "listener.name.sasl_ssl.connections.max.reauth.ms": "60000",
        }
    )
    ssl_l, sasl_l, mtls_l = c.resolve_listeners()
    assert ssl_l.security and ssl_l.security.tls and ssl_l.security.tls.client_auth == "required"
    assert sasl_l.security and sasl_l.security.tls and sasl_l.security.tls.client_auth == "none"
    assert sasl_l.security.mechanisms == ("PLAIN",) and sasl_l.security.max_reauth_ms == 60000
    assert mtls_l.security and mtls_l.security.tls and mtls_l.security.tls.keystore_location == "/other.pem"
    c.security_properties["listener.name.sasl_ssl.ssl.client.auth"] = "requested"
    assert c.resolve_listeners()[1].security.tls.client_auth == "requested"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("props", "message"),
    [
        ({"listeners": "FOO://h:1"}, "listener name 'FOO' is neither a security protocol"),
        ({"listeners": "SSL://h:1,SSL://h:2", "ssl.keystore.location": "/k"}, "names listener SSL twice"),
        ({"listeners": "SSL://h:1"}, "needs ssl.keystore.location"),
        ({"listeners": "SASL_PLAINTEXT://h:1", "sasl.enabled.mechanisms": "GSSAPI"}, "GSSAPI not supported"),
        ({"listeners": "SASL_PLAINTEXT://h:1", "sasl.enabled.mechanisms": ""}, "sasl.enabled.mechanisms is empty"),
        ({"listeners": "h:99999"}, "port outside 0-65535"),
        ({"listeners": "PLAINTEXT://h:1", "advertised.listeners": "SSL://x:1"}, "not among the listeners"),
        ({"listeners": "PLAINTEXT://h:1", "listener.name.ssl.ssl.client.auth": "required"}, "names listener 'ssl'"),
        ({"listeners": "SSL://h:1", "ssl.keystore.location": "/k", "ssl.client.auth": "sometimes"}, "ssl.client.auth"),
        ({"listeners": "SSL://h:1", "ssl.keystore.location": "/k", "ssl.principal.mapping.rules": "RULE:x"},
         "ssl.principal.mapping.rules"),
        ({"listener.security.protocol.map": "A:NOPE"}, "'NOPE' is not a security protocol"),
        ({"connections.max.reauth.ms": "-1"}, "connections.max.reauth.ms must be at least 0"),
    ],
)  # fmt: skip
def test_mistakes_name_the_property(props: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        config(**props).resolve_listeners()


def test_unknown_security_properties_are_refused() -> None:
    with pytest.raises(ConfigError, match=re.escape("unknown broker property 'ssl.keystore.locaton'")):
        config(**{"ssl.keystore.locaton": "/k"})
    with pytest.raises(ConfigError, match=re.escape("unknown broker property 'listener.name.ssl.num.partitions'")):
        config(**{"listener.name.ssl.num.partitions": "3"})


def test_listen_and_listeners_property_together_is_a_mistake() -> None:
    with pytest.raises(ConfigError, match="both with --listen and with --set listeners"):
        cli("--listen", "h:1", "--set", "listeners=PLAINTEXT://h:2")


# --- TLS contexts ----------------------------------------------------------------------------------------------


def test_pem_keystore_plain_and_encrypted(pki: Pki) -> None:
    assert isinstance(server_context(TlsSettings(keystore_location=str(pki.broker.pem_keystore))), ssl.SSLContext)
    ctx = server_context(TlsSettings(keystore_location=str(pki.broker_encrypted_pem), key_password=PASSWORD))
    assert ctx.verify_mode == ssl.CERT_NONE
    with pytest.raises(TlsConfigError, match=re.escape("encrypted with ssl.key.password")):
        server_context(TlsSettings(keystore_location=str(pki.broker_encrypted_pem), key_password="wrong"))


def test_pkcs12_keystore_and_truststore(pki: Pki) -> None:
    ctx = server_context(
        TlsSettings(keystore_location=str(pki.broker.p12), keystore_password=PASSWORD,
                    truststore_location=str(pki.ca_p12), truststore_password=PASSWORD, client_auth="required")
    )  # fmt: skip
    assert ctx.verify_mode == ssl.CERT_REQUIRED
    assert [c["subject"] for c in ctx.get_ca_certs()] == [((("organizationName", "groupstream test"),),
                                                           (("commonName", "groupstream test CA"),))]  # fmt: skip
    with pytest.raises(TlsConfigError, match="wrong password or not PKCS12"):
        server_context(TlsSettings(keystore_location=str(pki.broker.p12), keystore_password="nope"))


def test_keystore_type_mistakes(pki: Pki, tmp_path: Path) -> None:
    jks = tmp_path / "broker.jks"
    jks.write_bytes(b"\xfe\xed\xfe\xed" + b"\0" * 60)
    with pytest.raises(TlsConfigError, match=r"Java KeyStore .* keytool -importkeystore"):
        server_context(TlsSettings(keystore_location=str(jks)))
    with pytest.raises(TlsConfigError, match="cannot be read"):
        server_context(TlsSettings(keystore_location=str(tmp_path / "missing.pem")))
    with pytest.raises(TlsConfigError, match=re.escape("ssl.keystore.type must be PEM or PKCS12")):
        server_context(TlsSettings(keystore_location=str(pki.broker.pem_keystore), keystore_type="BKS"))
    with pytest.raises(TlsConfigError, match="must hold the certificate chain and the private key"):
        server_context(TlsSettings(keystore_location=str(pki.ca)))  # a certificate without its key


def test_protocols_and_cipher_suites(pki: Pki) -> None:
    ks = str(pki.broker.pem_keystore)
    ctx = server_context(TlsSettings(keystore_location=ks, enabled_protocols=("TLSv1.3",)))
    assert ctx.minimum_version == ctx.maximum_version == ssl.TLSVersion.TLSv1_3
    with pytest.raises(TlsConfigError, match="contiguous"):
        server_context(TlsSettings(keystore_location=ks, enabled_protocols=("TLSv1.1", "TLSv1.3")))
    with pytest.raises(TlsConfigError, match="unknown protocol 'SSLv3'"):
        server_context(TlsSettings(keystore_location=ks, enabled_protocols=("SSLv3",)))
    ctx = server_context(TlsSettings(keystore_location=ks, cipher_suites=("TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
                                                                          "TLS_AES_128_GCM_SHA256")))  # fmt: skip
    tls12 = [c["name"] for c in ctx.get_ciphers() if c["protocol"] == "TLSv1.2"]
    assert tls12 == ["ECDHE-ECDSA-AES128-GCM-SHA256"]
    with pytest.raises(TlsConfigError, match="'TLS_NOT_A_CIPHER' is not a cipher"):
        server_context(TlsSettings(keystore_location=ks, cipher_suites=("TLS_NOT_A_CIPHER",)))


def test_iana_names_of_common_suites() -> None:
    names = iana_cipher_names()
    assert names["TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384"] == "ECDHE-RSA-AES256-GCM-SHA384"
    assert names["TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256"] == "ECDHE-RSA-CHACHA20-POLY1305"
    assert names["TLS_RSA_WITH_AES_128_CBC_SHA"] == "AES128-SHA"
    assert names["TLS_DHE_PSK_WITH_AES_128_GCM_SHA256"] == "DHE-PSK-AES128-GCM-SHA256"
