"""The principal of a TLS client certificate, as Kafka's default principal builder makes it: pure.

Kafka names a client authenticated by its certificate ``User:`` + the subject's distinguished name as Java's
``X500Principal.getName()`` writes it (RFC 2253: the most specific part first, ``CN=client,OU=eng,O=acme,C=US``,
no spaces, special characters escaped with a backslash), rewritten by ``ssl.principal.mapping.rules``.

The rules are Kafka's: a comma-separated list of ``RULE:pattern/replacement/`` (optionally ``/L`` or ``/U`` to
lower- or upper-case the result) and ``DEFAULT`` (the name unchanged). The first rule whose pattern matches the
whole name gives the principal name; when none matches, authentication fails. Patterns are regular expressions
(Java's syntax, which Python's ``re`` reads alike for what rules use); replacements refer to groups as ``$1``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["NoMatchingRule", "PrincipalMapper", "distinguished_name"]

# Attribute names Python's ssl reports, and the RFC 2253 keyword Java writes for them.
_KEYWORDS = {
    "commonName": "CN",
    "countryName": "C",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "organizationName": "O",
    "organizationalUnitName": "OU",
    "streetAddress": "STREET",
    "domainComponent": "DC",
    "userId": "UID",
}
# Other attributes Java writes as OID=#hex of the DER value; (OID, DER string tag) of the usual ones.
_OIDS = {
    "emailAddress": ("1.2.840.113549.1.9.1", 0x16),  # IA5String
    "serialNumber": ("2.5.4.5", 0x13),  # PrintableString
    "dnQualifier": ("2.5.4.46", 0x13),
    "surname": ("2.5.4.4", 0x0C),
    "title": ("2.5.4.12", 0x0C),
    "description": ("2.5.4.13", 0x0C),
    "businessCategory": ("2.5.4.15", 0x0C),
    "postalCode": ("2.5.4.17", 0x0C),
    "name": ("2.5.4.41", 0x0C),
    "givenName": ("2.5.4.42", 0x0C),
    "initials": ("2.5.4.43", 0x0C),
    "generationQualifier": ("2.5.4.44", 0x0C),
    "pseudonym": ("2.5.4.65", 0x0C),
}
_OID_TEXT = re.compile(r"[0-9]+(\.[0-9]+)+")


def _escape(value: str) -> str:
    out = []
    for i, c in enumerate(value):
        if c in ',+"\\<>;' or (i == 0 and c in "# ") or (i == len(value) - 1 and c == " "):
            out.append("\\" + c)
        else:
            out.append(c)
    return "".join(out)


def _der_hex(value: str, tag: int) -> str:
    body = value.encode("utf-8")
    n = len(body)
    if n < 0x80:
        length = bytes([n])
    else:
        size = n.to_bytes((n.bit_length() + 7) // 8, "big")
        length = bytes([0x80 | len(size)]) + size
    return "#" + (bytes([tag]) + length + body).hex()


def _attribute(name: str, value: str) -> str:
    keyword = _KEYWORDS.get(name)
    if keyword is not None:
        return f"{keyword}={_escape(value)}"
    oid = _OIDS.get(name)
    if oid is not None:
        return f"{oid[0]}={_der_hex(value, oid[1])}"
    if _OID_TEXT.fullmatch(name):
        return f"{name}={_der_hex(value, 0x0C)}"
    return f"{name}={_escape(value)}"


def distinguished_name(subject: Sequence[Sequence[tuple[str, str]]]) -> str:
    """RFC 2253 form of a subject as ``ssl.SSLObject.getpeercert()['subject']`` gives it (relative names in
    certificate order, each a sequence of (attribute, value) pairs).

    Attributes without an RFC 2253 keyword are written as Java writes them, OID=#hex of the DER value; the
    string type is the one such attributes usually have (IA5String for emailAddress, PrintableString for
    serialNumber, UTF8String otherwise), since Python's ssl reports the text and not its ASN.1 type.
    """
    rdns = ["+".join(_attribute(name, value) for name, value in rdn) for rdn in reversed(subject)]
    return ",".join(rdns)


# --- ssl.principal.mapping.rules ---------------------------------------------------------------------------

_RULE = r"(DEFAULT)|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_SPLITTER = re.compile(r"\s*(" + _RULE + r")\s*(?:,\s*|$)")
_PARSER = re.compile(_RULE)


class NoMatchingRule(Exception):
    """No rule of ``ssl.principal.mapping.rules`` applies to a certificate's name."""


@dataclass(frozen=True, slots=True)
class _Rule:
    pattern: re.Pattern[str] | None  # None: DEFAULT
    replacement: str
    case: str  # "", "L" or "U"

    def apply(self, name: str) -> str | None:
        pattern = self.pattern
        if pattern is None:
            return name
        if pattern.fullmatch(name) is None:
            return None
        result = pattern.sub(lambda m: _java_replacement(self.replacement, m), name)
        if self.case == "L":
            return result.lower()
        if self.case == "U":
            return result.upper()
        return result

    def __str__(self) -> str:
        if self.pattern is None:
            return "DEFAULT"
        suffix = f"/{self.case}" if self.case else ""
        return f"RULE:{self.pattern.pattern}/{self.replacement}{suffix}"


def _java_replacement(replacement: str, match: re.Match[str]) -> str:
    """Java's ``Matcher.replaceAll`` replacement: ``$n`` is group n (as many digits as name an existing group),
    ``\\x`` is x; a reference past the last group is literal text, as Kafka makes it."""
    groups = len(match.groups())
    out: list[str] = []
    i = 0
    n = len(replacement)
    while i < n:
        c = replacement[i]
        if c == "\\" and i + 1 < n:
            out.append(replacement[i + 1])
            i += 2
            continue
        if c == "$" and i + 1 < n and replacement[i + 1].isdigit():
            first = int(replacement[i + 1])
            if first > groups:
                out.append(replacement[i : i + 2])
                i += 2
                continue
            number = first
            j = i + 2
            while j < n and replacement[j].isdigit() and number * 10 + int(replacement[j]) <= groups:
                number = number * 10 + int(replacement[j])
                j += 1
            out.append(match.group(number) or "")
            i = j
            continue
        out.append(c)
        i += 1
    return "".join(out)


class PrincipalMapper:
    """``ssl.principal.mapping.rules``; ValueError names a rule that cannot be read."""

    def __init__(self, rules: str | None = None) -> None:
        text = "DEFAULT" if rules is None else rules.strip()
        parsed: list[_Rule] = []
        for m in _SPLITTER.finditer(text):
            rule = m.group(1)
            if rule is None:
                continue
            p = _PARSER.match(rule)
            if p is None or p.end() != len(rule):
                unmatched = rule if p is None else rule[p.end() :]
                raise ValueError(f"invalid rule {rule!r} in ssl.principal.mapping.rules (unmatched {unmatched!r})")
            if p.group(1) is not None:
                parsed.append(_Rule(None, "", ""))
            elif p.group(2) is not None:
                try:
                    pattern = re.compile(p.group(2))
                except re.error as e:
                    raise ValueError(
                        f"invalid pattern {p.group(2)!r} in ssl.principal.mapping.rules: {e}"
                    ) from None
                parsed.append(_Rule(pattern, p.group(3), p.group(4)))
            elif p.group(5):
                raise ValueError(f"invalid rule {rule!r} in ssl.principal.mapping.rules")
            # an empty rule is ignored, as Kafka ignores it
        self.rules = tuple(parsed)

    def name(self, distinguished: str) -> str:
        """The principal name for a certificate's distinguished name; NoMatchingRule when no rule applies."""
        for rule in self.rules:
            result = rule.apply(distinguished)
            if result is not None:
                return result
        raise NoMatchingRule(
            f"no rule of ssl.principal.mapping.rules applies to {distinguished!r} (rules: "
            f"{', '.join(str(r) for r in self.rules) or 'none'})"
        )

    def __repr__(self) -> str:
        return f"PrincipalMapper({', '.join(str(r) for r in self.rules)})"
