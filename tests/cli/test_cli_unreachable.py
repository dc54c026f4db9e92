"""Every client command pointed at a bootstrap server that cannot be reached prints one line naming the address
and the error, exits 2 within seconds and shows no traceback (``test_cli_errors`` covers topics list, consume
and produce; these are the other commands, and a host name that does not resolve)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from cli_runner import user_error

from support.brokers import free_port

COMMANDS = [
    ("topics", "describe", "t"),
    ("topics", "create", "t"),
    ("topics", "delete", "t"),
    ("groups", "describe", "g", "--members"),
    ("groups", "delete", "g"),
    ("groups", "delete-offsets", "g", "--topic", "t"),
    ("groups", "reset-offsets", "g", "--topic", "t", "--to-earliest", "--execute"),
    ("leader-election", "--group", "g"),
    ("region", "controller", "--region", "r", "--group", "g"),
]


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_a_refused_connection_is_one_line(command: tuple[str, ...]) -> None:
    address = f"127.0.0.1:{free_port()}"
    start = time.monotonic()
    line = user_error(*command, "--bootstrap-server", address)
    assert time.monotonic() - start < 15
    assert f"error: broker {address}: connection refused" in line, line


def test_a_region_member_says_so_too(tmp_path: Path) -> None:
    address = f"127.0.0.1:{free_port()}"
    line = user_error("region", "member", "--region", "r", "--group", "g", "--topic", "t", "--member", "m",
                      "--output", str(tmp_path / "out"), "--checkpoints", str(tmp_path / "cp"),
                      "--bootstrap-server", address)  # fmt: skip
    assert f"error: broker {address}: connection refused" in line, line


@pytest.mark.parametrize("command", [("topics", "list"), ("consume", "t"), ("groups", "list")], ids=" ".join)
def test_a_host_that_does_not_resolve_is_one_line(command: tuple[str, ...]) -> None:
    line = user_error(*command, "--bootstrap-server", "no-such-host.invalid:9092")
    assert "error: broker no-such-host.invalid:9092: cannot resolve host" in line, line
