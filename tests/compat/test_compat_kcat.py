"""kcat (Debian's, librdkafka 2.0.2) produces then consumes (assign mode) 100k keyed records, split over every
codec with acks=1 and with idempotent acks=all. kcat has no admin API, so the topic is auto-created by the first
produce; the broker's auto-created topics have several partitions (ours: ``--set num.partitions=6``).

kcat reports each delivery as "Message delivered to partition P (offset O)" at verbosity -vv: those are the
acknowledged records; the consumer prints partition, offset, key and value of everything it reads."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest

from support.brokers import AutoCreateBroker
from support.compat import (
    Acked,
    Consumed,
    Scenario,
    check_read_equals_acked,
    make_records,
    scenarios,
    unique_topic,
)

pytestmark = [pytest.mark.compat, pytest.mark.slow]

DELIVERED = re.compile(r"^% Message delivered to partition (\d+) \(offset (-?\d+)\)", re.MULTILINE)
FAILED = re.compile(r"^% Delivery failed.*$", re.MULTILINE)


def kcat() -> str:
    path = shutil.which("kcat")
    assert path is not None, "kcat is not installed: run `make system-deps` (apt-get install kcat)"
    return path


def produce(bootstrap: str, topic: str, scenario: Scenario, records: list[tuple[bytes, bytes]]) -> list[Acked]:
    lines = b"".join(k + b"\t" + v + b"\n" for k, v in records)
    cmd = [
        kcat(), "-P", "-b", bootstrap, "-t", topic, "-K", "\t", "-vv",
        "-X", f"acks={scenario.acks}",
        "-X", f"enable.idempotence={'true' if scenario.idempotent else 'false'}",
        "-X", f"compression.codec={scenario.codec}",
        "-X", "linger.ms=5",
        "-X", "partitioner=murmur2_random",
        "-X", "message.timeout.ms=60000",
    ]  # fmt: skip
    r = subprocess.run(cmd, input=lines, capture_output=True, timeout=120)
    err = r.stderr.decode(errors="replace")
    failed = FAILED.findall(err)
    assert r.returncode == 0 and not failed, f"kcat -P exited {r.returncode}; {failed[:3]}\n{err[-2000:]}"
    return [Acked(int(p), int(o)) for p, o in DELIVERED.findall(err)]


def partitions_of(bootstrap: str, topic: str) -> int:
    r = subprocess.run([kcat(), "-L", "-J", "-b", bootstrap, "-t", topic], capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    (md,) = json.loads(r.stdout)["topics"]
    assert md["topic"] == topic and not md.get("error"), md
    return len(md["partitions"])


def consume(bootstrap: str, topic: str) -> list[Consumed]:
    """Every partition from the beginning to its end (-e), in assign mode (no -G)."""
    cmd = [kcat(), "-C", "-b", bootstrap, "-t", topic, "-o", "beginning", "-e", "-q", "-f", r"%p\t%o\t%k\t%s\n"]
    r = subprocess.run(cmd, capture_output=True, timeout=120)
    assert r.returncode == 0, f"kcat -C exited {r.returncode}\n{r.stderr.decode(errors='replace')[-2000:]}"
    out = []
    for line in r.stdout.splitlines():
        p, o, k, v = line.split(b"\t")
        out.append(Consumed(int(p), int(o), k, v))
    return out


@pytest.mark.parametrize("scenario", scenarios(), ids=str)
def test_kcat_produce_consume(autocreate_broker: AutoCreateBroker, scenario: Scenario) -> None:
    bootstrap = autocreate_broker.bootstrap
    topic = unique_topic("kcat", scenario)
    records = make_records(str(scenario), scenario.records)
    acked = produce(bootstrap, topic, scenario, records)
    partitions = partitions_of(bootstrap, topic)
    assert partitions == autocreate_broker.partitions, "auto-created topic has an unexpected partition count"
    consumed = consume(bootstrap, topic)
    check_read_equals_acked(records, acked, consumed, partitions)
