"""``groupstream topics``: the whole lifecycle through the console script against a real broker process."""

from __future__ import annotations

import uuid

import pytest
from cli_runner import ok, plain_tables

from support.brokers import BrokerProcess

pytestmark = pytest.mark.broker_ours


def _row(output: str, first_cell: str) -> list[str]:
    """The cells of the table row that starts with ``first_cell`` in the piped (plain) output."""
    for table in plain_tables(output):
        for row in table:
            cells = list(row.values())
            if cells[0] == first_cell:
                return cells
    raise AssertionError(f"no row starting with {first_cell!r} in:\n{output}")


def test_topics_lifecycle(groupstream_broker: BrokerProcess) -> None:
    bs = ("--bootstrap-server", groupstream_broker.bootstrap)
    name = f"cli-{uuid.uuid4().hex[:8]}"

    out = ok("topics", "create", name, "--partitions", "3", "--config", "retention.ms=60000", *bs)
    assert f"created topic '{name}' with 3 partitions, configs retention.ms=60000" in out

    out = ok("topics", "list", *bs)
    assert _row(out, name)[1] == "3"

    out = ok("topics", "describe", name, *bs)
    assert f"topic {name}" in out and "3 partitions" in out
    assert [_row(out, str(p))[0] for p in range(3)] == ["0", "1", "2"]
    assert _row(out, "retention.ms")[1:] == ["60000", "DYNAMIC_TOPIC_CONFIG"]

    out = ok("topics", "add-partitions", name, "--partitions", "5", *bs)
    assert f"topic '{name}' now has 5 partitions (was 3)" in out
    assert _row(ok("topics", "list", *bs), name)[1] == "5"

    out = ok("topics", "create", name, "--if-not-exists", *bs)
    assert f"topic '{name}' already exists" in out

    out = ok("topics", "delete", name, *bs)
    assert f"deleted topic '{name}'" in out
    assert name not in ok("topics", "list", *bs)
    assert f"topic '{name}' does not exist" in ok("topics", "delete", name, "--if-exists", *bs)


def test_validate_only_and_all_configs(groupstream_broker: BrokerProcess) -> None:
    bs = ("--bootstrap-server", groupstream_broker.bootstrap)
    name = f"cli-{uuid.uuid4().hex[:8]}"
    assert f"would create topic '{name}' with 2 partitions" in ok(
        "topics", "create", name, "--partitions", "2", "--validate-only", *bs
    )
    assert name not in ok("topics", "list", *bs)
    ok("topics", "create", name, "--partitions", "1", *bs)
    out = ok("topics", "describe", name, *bs)
    assert "all defaults" in out
    out = ok("topics", "describe", name, "--all-configs", *bs)
    assert _row(out, "segment.bytes")[2] == "DEFAULT_CONFIG"
