"""What a new user meets first, without a broker: ``--version`` (naming the record decoder that runs), the
broker's property list, and a misspelled property answered with the names it was probably meant to be."""

from __future__ import annotations

from cli_runner import ok, user_error

from groupstream.broker.config import known_properties


def test_version_names_the_record_decoder() -> None:
    out = ok("--version")
    assert out.startswith("groupstream ") and "record decoder: C extension" in out, out


def test_broker_lists_the_properties_set_accepts() -> None:
    listed = ok("broker", "--list-properties").splitlines()
    assert listed == known_properties()
    assert {"num.partitions", "log.retention.ms", "authorizer.class.name", "group.consumer.session.timeout.ms"} <= set(
        listed
    )


def test_a_misspelled_property_gets_a_did_you_mean() -> None:
    line = user_error("broker", "--data-dir", "/nonexistent/never-created", "--set", "num.partiton=5")
    assert "unknown broker property 'num.partiton'" in line and "did you mean num.partitions" in line, line
    assert "--list-properties" in line
