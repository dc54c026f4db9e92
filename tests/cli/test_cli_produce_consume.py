"""``groupstream produce`` and ``groupstream consume`` round trips through the console script."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from cli_runner import ok

from support.brokers import BrokerProcess

pytestmark = pytest.mark.broker_ours


def _topic(bs: tuple[str, str], partitions: int) -> str:
    name = f"pc-{uuid.uuid4().hex[:8]}"
    ok("topics", "create", name, "--partitions", str(partitions), *bs)
    return name


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_keyed_lines_round_trip_with_each_codec(groupstream_broker: BrokerProcess, codec: str) -> None:
    bs = ("--bootstrap-server", groupstream_broker.bootstrap)
    name = _topic(bs, 2)
    lines = [f"user-{i % 17}:event {i} é" for i in range(500)]
    out = ok("produce", name, "--key-separator", ":", "--compression", codec, *bs,
             stdin=("\n".join(lines) + "\n").encode())
    assert "produced 500 records" in out

    out = ok("consume", name, "--from-beginning", "--print-key", "--key-separator", ":", *bs)
    assert sorted(out.splitlines()) == sorted(lines)

    # within a partition (each key lives in one), records come back in produce order at offsets 0, 1, ...
    docs = [json.loads(line) for line in ok("consume", name, "--from-beginning", "--format", "json", *bs).splitlines()]
    assert len(docs) == 500
    for p in (0, 1):
        mine = [d for d in docs if d["partition"] == p]
        keys = {d["key"] for d in mine}
        assert [d["offset"] for d in mine] == list(range(len(mine)))
        assert [f"{d['key']}:{d['value']}" for d in mine] == [ln for ln in lines if ln.split(":")[0] in keys]


def test_file_input_partition_offset_and_max_messages(groupstream_broker: BrokerProcess, tmp_path: Path) -> None:
    bs = ("--bootstrap-server", groupstream_broker.bootstrap)
    name = _topic(bs, 3)
    source = tmp_path / "lines.txt"
    source.write_text("".join(f"line {i}\n" for i in range(50)))
    out = ok("produce", name, "--file", str(source), "--partition", "2", "--acks", "1", *bs)
    assert "produced 50 records" in out

    assert ok("consume", name, "--partition", "0", "--from-beginning", *bs) == ""
    out = ok("consume", name, "--partition", "2", "--offset", "45", *bs)
    assert out.splitlines() == [f"line {i}" for i in range(45, 50)]
    out = ok("consume", name, "--from-beginning", "--max-messages", "7", *bs)
    assert out.splitlines() == [f"line {i}" for i in range(7)]
    # without --from-beginning the consumer starts at the end, so it reads nothing and exits
    assert ok("consume", name, *bs) == ""


def test_generate_records(groupstream_broker: BrokerProcess) -> None:
    bs = ("--bootstrap-server", groupstream_broker.bootstrap)
    name = _topic(bs, 2)
    out = ok("produce", name, "--generate", "2000", "--value-size", "64", "--compression", "zstd", *bs)
    assert "produced 2000 records" in out
    values = ok("consume", name, "--from-beginning", *bs).splitlines()
    assert len(values) == 2000 and all(len(v) == 64 for v in values)
    assert sorted(int(v.split()[0]) for v in values) == list(range(2000))
