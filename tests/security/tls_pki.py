"""Certificates made at test time with the ``cryptography`` package: a CA, a broker certificate for 127.0.0.1 and
localhost, client certificates, and a second CA nobody trusts. Written as PEM files and PKCS12 keystores in a
directory; EC P-256 keys, so that making them takes milliseconds."""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from ipaddress import IPv4Address
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

PASSWORD = "store-secret"


@dataclass(frozen=True)
class Issued:
    cert: Path  # the certificate alone (PEM)
    key: Path  # the private key alone, unencrypted (PEM)
    pem_keystore: Path  # chain + key in one file, as Kafka's PEM keystore
    p12: Path  # PKCS12 keystore, password PASSWORD


@dataclass(frozen=True)
class Pki:
    ca: Path  # CA certificate (PEM): the truststore
    ca_p12: Path  # the CA as a PKCS12 truststore, password PASSWORD
    broker: Issued
    broker_encrypted_pem: Path  # chain + key encrypted with PASSWORD
    client: Issued  # CN=alice,OU=eng,O=groupstream test,C=FR
    other_client: Issued  # CN=bob,O=other
    rogue_ca: Path  # a CA no one trusts
    rogue_client: Issued  # a client certificate from the rogue CA
    rogue_broker: Issued  # a broker certificate from the rogue CA


def _name(**attrs: str) -> x509.Name:
    oids = {"C": NameOID.COUNTRY_NAME, "O": NameOID.ORGANIZATION_NAME, "OU": NameOID.ORGANIZATIONAL_UNIT_NAME,
            "CN": NameOID.COMMON_NAME}
    return x509.Name([x509.NameAttribute(oids[k], v) for k, v in attrs.items()])


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _ca(name: x509.Name) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(_now() - datetime.timedelta(days=1))
        .not_valid_after(_now() + datetime.timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
                                     key_encipherment=False, data_encipherment=False, key_agreement=False,
                                     encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return key, cert


def _issue(
    directory: Path,
    stem: str,
    subject: x509.Name,
    ca_key: ec.EllipticCurvePrivateKey,
    ca_cert: x509.Certificate,
    server: bool,
) -> Issued:
    key = ec.generate_private_key(ec.SECP256R1())
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(_now() - datetime.timedelta(days=1))
        .not_valid_after(_now() + datetime.timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH]),
            critical=False,
        )
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
    )
    if server:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.DNSName("localhost"), x509.IPAddress(IPv4Address("127.0.0.1"))]),
            critical=False,
        )
    cert = builder.sign(ca_key, hashes.SHA256())
    cert_pem = cert.public_bytes(serialization.Encoding.PEM)
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    paths = Issued(directory / f"{stem}.crt", directory / f"{stem}.key", directory / f"{stem}-keystore.pem",
                   directory / f"{stem}.p12")
    paths.cert.write_bytes(cert_pem)
    paths.key.write_bytes(key_pem)
    paths.pem_keystore.write_bytes(key_pem + cert_pem + ca_cert.public_bytes(serialization.Encoding.PEM))
    paths.p12.write_bytes(
        pkcs12.serialize_key_and_certificates(
            stem.encode(), key, cert, [ca_cert], serialization.BestAvailableEncryption(PASSWORD.encode())
        )
    )
    return paths


def make_pki(directory: Path) -> Pki:
    directory.mkdir(parents=True, exist_ok=True)
    ca_key, ca_cert = _ca(_name(O="groupstream test", CN="groupstream test CA"))
    rogue_key, rogue_cert = _ca(_name(O="rogue", CN="rogue CA"))
    ca = directory / "ca.crt"
    ca.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    ca_p12 = directory / "truststore.p12"
    ca_p12.write_bytes(
        pkcs12.serialize_key_and_certificates(
            None, None, None, [ca_cert], serialization.BestAvailableEncryption(PASSWORD.encode())
        )
    )
    rogue = directory / "rogue-ca.crt"
    rogue.write_bytes(rogue_cert.public_bytes(serialization.Encoding.PEM))
    broker = _issue(directory, "broker", _name(O="groupstream test", CN="localhost"), ca_key, ca_cert, True)
    key = serialization.load_pem_private_key(broker.key.read_bytes(), None)
    encrypted = directory / "broker-keystore-encrypted.pem"
    encrypted.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                          serialization.BestAvailableEncryption(PASSWORD.encode()))
        + broker.cert.read_bytes()
    )
    return Pki(
        ca=ca,
        ca_p12=ca_p12,
        broker=broker,
        broker_encrypted_pem=encrypted,
        client=_issue(directory, "alice", _name(C="FR", O="groupstream test", OU="eng", CN="alice"), ca_key, ca_cert,
                      False),
        other_client=_issue(directory, "bob", _name(O="other", CN="bob"), ca_key, ca_cert, False),
        rogue_ca=rogue,
        rogue_client=_issue(directory, "mallory", _name(O="rogue", CN="mallory"), rogue_key, rogue_cert, False),
        rogue_broker=_issue(directory, "rogue-broker", _name(O="rogue", CN="localhost"), rogue_key, rogue_cert, True),
    )
