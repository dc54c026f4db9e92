"""A server TLS context from Kafka's ``ssl.*`` broker properties, through Python's ``ssl`` (OpenSSL).

- ``ssl.keystore.location``: the broker's certificate chain and private key. ``ssl.keystore.type`` PEM (chain and
  key in one file, the key encrypted with ``ssl.key.password`` or not) or PKCS12 (``ssl.keystore.password``,
  read with the ``cryptography`` package). Left unset, the type is recognised from the file's first bytes
  (Kafka's default, JKS, is Java's own format: convert it with ``keytool -importkeystore -deststoretype
  PKCS12``).
- ``ssl.truststore.location`` (PEM or PKCS12, ``ssl.truststore.password``): the CAs client certificates must
  chain to; the system's CAs when unset.
- ``ssl.client.auth``: ``none``, ``requested`` (a certificate, if sent, must be trusted) or ``required``.
- ``ssl.enabled.protocols`` (default ``TLSv1.2,TLSv1.3``) and ``ssl.cipher.suites`` (IANA names as Java uses,
  ``TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256``, or OpenSSL names). TLS 1.3 suites cannot be restricted through
  Python's ``ssl``: TLS 1.3 names are accepted and all TLS 1.3 suites stay enabled.

Every mistake is a `TlsConfigError` naming the property and the file.
"""

from __future__ import annotations

import os
import secrets
import ssl
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "CLIENT_AUTH",
    "PROTOCOLS",
    "TlsConfigError",
    "TlsSettings",
    "client_context",
    "iana_cipher_names",
    "server_context",
]

CLIENT_AUTH = ("none", "requested", "required")
PROTOCOLS = {
    "TLSv1": ssl.TLSVersion.TLSv1,
    "TLSv1.1": ssl.TLSVersion.TLSv1_1,
    "TLSv1.2": ssl.TLSVersion.TLSv1_2,
    "TLSv1.3": ssl.TLSVersion.TLSv1_3,
}


class TlsConfigError(ValueError):
    """A TLS property or file is wrong; the message names it."""


@dataclass(frozen=True, slots=True)
class TlsSettings:
    keystore_location: str | None = None
    keystore_type: str | None = None
    keystore_password: str | None = None
    key_password: str | None = None
    truststore_location: str | None = None
    truststore_type: str | None = None
    truststore_password: str | None = None
    client_auth: str = "none"
    enabled_protocols: tuple[str, ...] = ("TLSv1.2", "TLSv1.3")
    cipher_suites: tuple[str, ...] = ()

    def __repr__(self) -> str:  # never print passwords
        return (
            f"TlsSettings(keystore={self.keystore_location!r} ({self.keystore_type or 'auto'}), "
            f"truststore={self.truststore_location!r}, client_auth={self.client_auth}, "
            f"protocols={','.join(self.enabled_protocols)})"
        )


def _store_type(path: str, declared: str | None, prop: str) -> str:
    try:
        with open(path, "rb") as f:
            head = f.read(64)
    except OSError as e:
        raise TlsConfigError(f"{prop} {path!r} cannot be read: {e.strerror or e}") from None
    if head[:4] == b"\xfe\xed\xfe\xed" or (declared or "").upper() == "JKS":
        raise TlsConfigError(
            f"{prop} {path!r} is a Java KeyStore (JKS), which only Java reads: convert it with "
            f"keytool -importkeystore -srckeystore {path} -destkeystore store.p12 -deststoretype PKCS12, or use PEM"
        )
    if declared:
        kind = declared.upper()
        if kind not in ("PEM", "PKCS12"):
            raise TlsConfigError(f"{prop.replace('location', 'type')} must be PEM or PKCS12, got {declared!r}")
        return kind
    return "PEM" if head.lstrip().startswith(b"-----BEGIN") else "PKCS12"


def _load_pkcs12(path: str, password: str | None, prop: str) -> Any:
    try:
        from cryptography.hazmat.primitives.serialization import pkcs12
    except ImportError:
        raise TlsConfigError(
            f"{prop} {path!r} is PKCS12, which needs the cryptography package (pip install 'groupstream[security]'); "
            f"or use a PEM file"
        ) from None
    data = Path(path).read_bytes()
    try:
        return pkcs12.load_pkcs12(data, password.encode("utf-8") if password else None)
    except ValueError as e:
        raise TlsConfigError(f"{prop} {path!r} cannot be opened: wrong password or not PKCS12 ({e})") from None


def _load_keystore(ctx: ssl.SSLContext, s: TlsSettings) -> None:
    path = s.keystore_location
    if not path:
        raise TlsConfigError("an SSL or SASL_SSL listener needs ssl.keystore.location (the broker's certificate and key)")
    kind = _store_type(path, s.keystore_type, "ssl.keystore.location")
    if kind == "PEM":
        try:
            ctx.load_cert_chain(path, password=s.key_password or None)
        except ssl.SSLError as e:
            detail = e.reason or (e.args[1] if len(e.args) > 1 else str(e))
            raise TlsConfigError(
                f"ssl.keystore.location {path!r} (PEM) cannot be loaded: it must hold the certificate chain and the "
                f"private key, the key encrypted with ssl.key.password if it is encrypted (OpenSSL: {detail})"
            ) from None
        except OSError as e:
            raise TlsConfigError(f"ssl.keystore.location {path!r} cannot be read: {e.strerror or e}") from None
        return
    from cryptography.hazmat.primitives.serialization import BestAvailableEncryption, Encoding, PrivateFormat

    store = _load_pkcs12(path, s.keystore_password or s.key_password, "ssl.keystore.location")
    if store.key is None or store.cert is None:
        raise TlsConfigError(f"ssl.keystore.location {path!r} has no private key with its certificate")
    # ssl loads a chain only from a file: write one the broker alone can read, with the key encrypted under a
    # one-time password, and remove it once loaded; the key is never on disk in the clear.
    one_time = secrets.token_bytes(32)
    pem = store.key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, BestAvailableEncryption(one_time))
    pem += store.cert.certificate.public_bytes(Encoding.PEM)
    for extra in store.additional_certs:
        pem += extra.certificate.public_bytes(Encoding.PEM)
    with tempfile.TemporaryDirectory(prefix="groupstream-keystore-") as tmp:
        chain = os.path.join(tmp, "chain.pem")
        fd = os.open(chain, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(pem)
        ctx.load_cert_chain(chain, password=one_time)


def _load_truststore(ctx: ssl.SSLContext, s: TlsSettings, purpose: ssl.Purpose = ssl.Purpose.CLIENT_AUTH) -> None:
    path = s.truststore_location
    if not path:
        ctx.load_default_certs(purpose)
        return
    kind = _store_type(path, s.truststore_type, "ssl.truststore.location")
    if kind == "PEM":
        try:
            ctx.load_verify_locations(cafile=path)
        except (ssl.SSLError, OSError) as e:
            raise TlsConfigError(f"ssl.truststore.location {path!r} (PEM) has no usable CA certificate: {e}") from None
        return
    from cryptography.hazmat.primitives.serialization import Encoding

    store = _load_pkcs12(path, s.truststore_password, "ssl.truststore.location")
    certs = ([store.cert] if store.cert is not None else []) + list(store.additional_certs)
    if not certs:
        raise TlsConfigError(f"ssl.truststore.location {path!r} holds no certificate")
    ctx.load_verify_locations(cadata="".join(c.certificate.public_bytes(Encoding.PEM).decode("ascii") for c in certs))


def _protocol_range(names: Sequence[str]) -> tuple[ssl.TLSVersion, ssl.TLSVersion]:
    versions = []
    for name in names:
        v = PROTOCOLS.get(name)
        if v is None:
            raise TlsConfigError(f"ssl.enabled.protocols: unknown protocol {name!r} (known: {', '.join(PROTOCOLS)})")
        versions.append(v)
    if not versions:
        raise TlsConfigError("ssl.enabled.protocols is empty")
    order = list(PROTOCOLS.values())
    lo, hi = min(versions, key=order.index), max(versions, key=order.index)
    if len(set(versions)) != order.index(hi) - order.index(lo) + 1:
        raise TlsConfigError(
            f"ssl.enabled.protocols must be a contiguous range of versions (OpenSSL sets a minimum and a maximum), "
            f"got {', '.join(names)}"
        )
    return lo, hi


_KX = {"kx-ecdhe": "ECDHE", "kx-dhe": "DHE", "kx-rsa": "RSA", "kx-psk": "PSK", "kx-ecdhe-psk": "ECDHE_PSK",
       "kx-dhe-psk": "DHE_PSK", "kx-rsa-psk": "RSA_PSK"}  # fmt: skip
_AU = {"auth-rsa": "RSA", "auth-ecdsa": "ECDSA", "auth-dss": "DSS", "auth-psk": "PSK", "auth-null": "anon"}


def _iana_name(cipher: Any) -> str | None:
    """The IANA (Java) name of an OpenSSL TLS 1.2 cipher, from the fields OpenSSL reports."""
    name = str(cipher["name"])
    if cipher.get("protocol") == "TLSv1.3":
        return name  # TLS 1.3 names are the IANA names
    kx = _KX.get(str(cipher.get("kea")))
    au = _AU.get(str(cipher.get("auth")))
    sym = str(cipher.get("symmetric") or "")
    if kx is None or au is None or not sym:
        return None
    enc = sym.upper().replace("-", "_")  # aes-128-gcm -> AES_128_GCM, chacha20-poly1305 -> CHACHA20_POLY1305
    mac = name.rsplit("-", 1)[-1]  # the PRF hash of AEAD suites, the MAC of CBC ones
    if mac == "POLY1305":
        mac = "SHA256"
    if mac not in ("SHA", "SHA256", "SHA384"):
        return None
    prefix = kx if kx in ("RSA", "PSK") or kx.endswith("_PSK") else f"{kx}_{au}"
    return f"TLS_{prefix}_WITH_{enc}_{mac}"


def iana_cipher_names() -> dict[str, str]:
    """IANA name to OpenSSL name of every TLS 1.2 and 1.3 cipher this OpenSSL offers."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.set_ciphers("ALL:@SECLEVEL=0")
    out: dict[str, str] = {}
    for c in ctx.get_ciphers():
        iana = _iana_name(c)
        if iana is not None:
            out.setdefault(iana, str(c["name"]))
    return out


def _ciphers(ctx: ssl.SSLContext, suites: Sequence[str]) -> None:
    if not suites:
        return
    iana = iana_cipher_names()
    openssl_names = set(iana.values())
    tls12: list[str] = []
    for suite in suites:
        if suite.startswith("TLS_") and suite in iana and iana[suite] == suite:
            continue  # a TLS 1.3 suite: always enabled (see the module docstring)
        name = iana.get(suite) or (suite if suite in openssl_names else None)
        if name is None:
            raise TlsConfigError(
                f"ssl.cipher.suites: {suite!r} is not a cipher this OpenSSL offers (IANA names as "
                f"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, or OpenSSL names)"
            )
        tls12.append(name)
    if tls12:
        try:
            ctx.set_ciphers(":".join(tls12))
        except ssl.SSLError:
            raise TlsConfigError(f"ssl.cipher.suites: none of {', '.join(suites)} can be used") from None


def server_context(s: TlsSettings) -> ssl.SSLContext:
    """The context a TLS listener accepts with; TlsConfigError for a wrong property or file."""
    if s.client_auth not in CLIENT_AUTH:
        raise TlsConfigError(f"ssl.client.auth must be one of {', '.join(CLIENT_AUTH)}, got {s.client_auth!r}")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version, ctx.maximum_version = _protocol_range(s.enabled_protocols)
    if hasattr(ssl, "OP_NO_RENEGOTIATION"):
        ctx.options |= ssl.OP_NO_RENEGOTIATION  # client-initiated renegotiation only costs the server CPU
    _ciphers(ctx, s.cipher_suites)
    _load_keystore(ctx, s)
    if s.client_auth != "none":
        _load_truststore(ctx, s)
        ctx.verify_mode = ssl.CERT_REQUIRED if s.client_auth == "required" else ssl.CERT_OPTIONAL
    return ctx


def client_context(s: TlsSettings, check_hostname: bool, system_cas: bool = True) -> ssl.SSLContext:
    """The context a client connects with, from the same properties as the broker's (Java clients take the
    broker's names: ``ssl.truststore.*`` for the CAs the broker's certificate must chain to; ``ssl.keystore.*``
    for mutual TLS, when set). Without a truststore the system's CAs are trusted, unless ``system_cas`` is False
    (the caller loads CAs of its own, from librdkafka's ``ssl.ca.location``). TlsConfigError for a wrong
    property or file."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = check_hostname
    ctx.verify_mode = ssl.CERT_REQUIRED
    ctx.minimum_version, ctx.maximum_version = _protocol_range(s.enabled_protocols)
    _ciphers(ctx, s.cipher_suites)
    if s.truststore_location or system_cas:
        _load_truststore(ctx, s, ssl.Purpose.SERVER_AUTH)
    if s.keystore_location:
        _load_keystore(ctx, s)
    return ctx


def store_type(path: str, declared: str | None, prop: str) -> str:
    """PEM or PKCS12: ``declared`` (``ssl.*store.type``), else what the file's first bytes say; TlsConfigError
    for JKS (with how to convert it), another type or a file that cannot be read."""
    return _store_type(path, declared, prop)
