"""Every user mistake prints one line naming what is wrong, exits 2 and never shows a traceback."""

from __future__ import annotations

import uuid

import pytest
from cli_runner import ok, user_error

from support.brokers import BrokerProcess, free_port

pytestmark = pytest.mark.broker_ours


def test_unknown_topic(groupstream_broker: BrokerProcess) -> None:
    bs = ("--bootstrap-server", groupstream_broker.bootstrap)
    name = f"ghost-{uuid.uuid4().hex[:8]}"
    for command in (("consume", name), ("topics", "describe", name), ("topics", "delete", name),
                    ("topics", "add-partitions", name, "--partitions", "4")):
        line = user_error(*command, *bs)
        assert f"topic '{name}' does not exist" in line, line
    line = user_error("produce", name, *bs, stdin=b"x\n")
    assert line == f"groupstream produce: error: topic '{name}' does not exist (UNKNOWN_TOPIC_OR_PARTITION)"


def test_unreachable_broker() -> None:
    port = free_port()
    for command in (("topics", "list"), ("consume", "t"), ("produce", "t")):
        line = user_error(*command, "--bootstrap-server", f"127.0.0.1:{port}", stdin=b"")
        assert f"error: broker 127.0.0.1:{port}: connection refused" in line, line


def test_bad_option_values(groupstream_broker: BrokerProcess) -> None:
    bs = ("--bootstrap-server", groupstream_broker.bootstrap)
    name = f"bad-{uuid.uuid4().hex[:8]}"
    assert "--config expects KEY=VALUE, got 'retention.ms'" in user_error(
        "topics", "create", name, "--config", "retention.ms", *bs)
    line = user_error("topics", "create", name, "--config", "retention.ms=soon", *bs)
    assert "INVALID_CONFIG" in line and "retention.ms" in line
    assert "argument --partitions: expected a positive integer, got 'three'" in user_error(
        "topics", "create", name, "--partitions", "three", *bs)
    assert "argument --compression: invalid choice: 'brotli'" in user_error(
        "produce", name, "--compression", "brotli", *bs)
    assert "--bootstrap-server: bootstrap.servers: bootstrap server 'localhost' is not HOST:PORT" in user_error(
        "topics", "list", "--bootstrap-server", "localhost")

    ok("topics", "create", name, "--partitions", "2", *bs)
    assert f"topic '{name}' has 2 partitions; there is no partition 9" in user_error(
        "produce", name, "--partition", "9", *bs, stdin=b"x\n")
    assert f"topic '{name}' has 2 partitions (0-1); there is no partition 9" in user_error(
        "consume", name, "--partition", "9", *bs)
    assert f"--offset 5 is outside partition 0 of '{name}' (offsets 0 to 0)" in user_error(
        "consume", name, "--offset", "5", *bs)
    assert "line 2 has no key separator ':'" in user_error(
        "produce", name, "--key-separator", ":", *bs, stdin=b"k:v\nnokey\n")
    assert "already has 2 partitions; --partitions must be larger" in user_error(
        "topics", "add-partitions", name, "--partitions", "2", *bs)
    assert "TOPIC_ALREADY_EXISTS" in user_error("topics", "create", name, *bs)
