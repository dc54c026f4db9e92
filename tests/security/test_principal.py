"""Certificate names as Kafka's principal builder writes them (RFC 2253) and ``ssl.principal.mapping.rules``."""

from __future__ import annotations

import re

import pytest

from groupstream.security.principal import NoMatchingRule, PrincipalMapper, distinguished_name

# Python's ssl gives the subject in certificate order, most general first.
ALICE = ((("countryName", "FR"),), (("organizationName", "groupstream test"),),
         (("organizationalUnitName", "eng"),), (("commonName", "alice"),))  # fmt: skip


def test_rfc2253_order_and_keywords() -> None:
    assert distinguished_name(ALICE) == "CN=alice,OU=eng,O=groupstream test,C=FR"


def test_escaping_and_multi_valued_names() -> None:
    subject = ((("organizationName", 'Acme, "Inc"'),), (("commonName", "#lead "), ("userId", "u+1")))
    assert distinguished_name(subject) == 'CN=\\#lead\\ +UID=u\\+1,O=Acme\\, \\"Inc\\"'


def test_attributes_without_a_keyword_are_written_as_java_writes_them() -> None:
    subject = ((("commonName", "svc"),), (("emailAddress", "a@b.c"),))
    assert distinguished_name(subject) == "1.2.840.113549.1.9.1=#16056140622e63,CN=svc"


KAFKA_DOC_RULES = (
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,"
    "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,"
    "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L,"
    "DEFAULT"
)


@pytest.mark.parametrize(
    ("dn", "name"),
    [
        ("CN=kafka-server1,OU=ServiceUsers,O=Unknown,L=Unknown,ST=Unknown,C=Unknown", "kafka-server1"),
        ("CN=adminUser,OU=Admin,O=Unknown,L=Unknown,ST=Unknown,C=Unknown", "adminuser@admin"),
        ("CN=Client.Example,O=x", "client.example"),
        ("OU=no-common-name", "OU=no-common-name"),
    ],
)
def test_kafka_documentation_rules(dn: str, name: str) -> None:
    assert PrincipalMapper(KAFKA_DOC_RULES).name(dn) == name


def test_default_is_the_name_unchanged() -> None:
    assert PrincipalMapper(None).name("CN=x,O=y") == "CN=x,O=y"
    assert PrincipalMapper("DEFAULT").name("CN=x,O=y") == "CN=x,O=y"


def test_upper_case_and_references_past_the_last_group() -> None:
    mapper = PrincipalMapper("RULE:^CN=([a-z]+),.*$/$1-$2-\\$1/U")
    assert mapper.name("CN=bob,O=x") == "BOB-$2-$1"


def test_slashes_escaped_in_patterns() -> None:
    assert PrincipalMapper("RULE:^CN=(.*)\\/dev$/$1/").name("CN=app/dev") == "app"


def test_no_rule_applies() -> None:
    mapper = PrincipalMapper("RULE:^CN=(.*),OU=ops$/$1/")
    with pytest.raises(NoMatchingRule, match=re.escape("no rule of ssl.principal.mapping.rules applies to 'CN=x,OU=dev'")):
        mapper.name("CN=x,OU=dev")


@pytest.mark.parametrize("rules", ["RULE:^CN=(.*$/$1/", "RULE:a/b/X", "NOT A RULE", "RULE:a/b"])
def test_invalid_rules_are_refused(rules: str) -> None:
    with pytest.raises(ValueError, match=re.escape("ssl.principal.mapping.rules")):
        PrincipalMapper(rules)
