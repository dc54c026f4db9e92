"""Tokens for the OAUTHBEARER tests: an issuer with RSA and EC keys whose public halves go in a JWKS file, JWTs
signed with them by PyJWT, and unsecured JWTs (``alg: none``) shaped as librdkafka's unsecured builder makes them."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm

ISSUER = "https://issuer.test"
AUDIENCE = "groupstream-test"


def _b64(data: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()


def unsecured(claims: dict[str, Any], header: dict[str, Any] | None = None, signature: str = "") -> str:
    return f"{_b64(header or {'alg': 'none'})}.{_b64(claims)}.{signature}"


@dataclass
class Issuer:
    """Signs tokens with ``rsa`` (kid ``rsa-1``) or ``ec`` (kid ``ec-1``); ``rogue`` signs with a key in no JWKS."""

    rsa: rsa.RSAPrivateKey = field(default_factory=lambda: rsa.generate_private_key(65537, 2048))
    ec: ec.EllipticCurvePrivateKey = field(default_factory=lambda: ec.generate_private_key(ec.SECP256R1()))
    rogue: rsa.RSAPrivateKey = field(default_factory=lambda: rsa.generate_private_key(65537, 2048))

    def jwks(self) -> dict[str, Any]:
        rsa_jwk = RSAAlgorithm.to_jwk(self.rsa.public_key(), as_dict=True)
        ec_jwk = ECAlgorithm.to_jwk(self.ec.public_key(), as_dict=True)
        return {"keys": [{**rsa_jwk, "kid": "rsa-1", "use": "sig"}, {**ec_jwk, "kid": "ec-1"}]}

    def write_jwks(self, path: Path) -> str:
        """Writes the JWKS file; returns its ``file:`` URL."""
        path.write_text(json.dumps(self.jwks()))
        return path.resolve().as_uri()

    def claims(self, sub: str, now_s: float, lifetime_s: float = 3600, **extra: Any) -> dict[str, Any]:
        return {"sub": sub, "iss": ISSUER, "aud": AUDIENCE, "iat": int(now_s), "exp": int(now_s + lifetime_s), **extra}

    def sign_any(self, claims: dict[str, Any]) -> str:
        """Any claims, even ones PyJWT's encoder would refuse (an issuer that is not a string): signed as bytes."""
        return jwt.PyJWS().encode(json.dumps(claims).encode(), self.rsa, "RS256", headers={"kid": "rsa-1"})

    def sign(self, claims: dict[str, Any], key: str = "rsa", kid: str | None = None) -> str:
        if key == "rsa":
            return jwt.encode(claims, self.rsa, "RS256", headers={"kid": kid or "rsa-1"})
        if key == "ec":
            return jwt.encode(claims, self.ec, "ES256", headers={"kid": kid or "ec-1"})
        return jwt.encode(claims, self.rogue, "RS256", headers={"kid": kid or "rsa-1"})
