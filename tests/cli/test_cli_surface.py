"""What a new user meets first: ``--version`` (naming the record decoder that runs), the
broker's property list, and a misspelled property answered with the names it was probably meant to be, and ``--command-config`` files."""

from __future__ import annotations

from pathlib import Path

from cli_runner import ok, user_error

from groupstream.broker.config import known_properties
from groupstream.cli.common import read_properties
from support.brokers import BrokerProcess


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


def test_command_config_files_are_read_as_kafka_tools_read_them(tmp_path: Path) -> None:
    props = tmp_path / "client.properties"
    props.write_text("# as for kafka-topics.sh --command-config\n! another comment\nrequest.timeout.ms = 5000\n"
                     "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required \\\n"
                     '    username="alice" password="a=b:c";\nclient.id: from-file\n')  # fmt: skip
    assert read_properties(props) == {
        "request.timeout.ms": "5000",
        "sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" '
        'password="a=b:c";',
        "client.id": "from-file",
    }
    (tmp_path / "bad.properties").write_text("no.such.property=1\n")
    line = user_error("topics", "list", "--command-config", str(tmp_path / "bad.properties"))
    assert "--command-config" in line and "no.such.property" in line, line
    line = user_error("topics", "list", "--command-config", str(tmp_path / "missing.properties"))
    assert "missing.properties" in line and "No such file" in line, line


def test_command_config_reaches_the_client(groupstream_broker: BrokerProcess, tmp_path: Path) -> None:
    props = tmp_path / "client.properties"
    props.write_text("request.timeout.ms=5000\nclient.id=from-file\n")
    out = ok("topics", "list", "--bootstrap-server", groupstream_broker.bootstrap, "--command-config", str(props))
    assert "TOPIC" in out  # listed through a client configured by the file
