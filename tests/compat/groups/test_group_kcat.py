"""``kcat -G`` (Debian's kcat, librdkafka 2.0.2) as balanced consumers of one group.

kcat cannot be slowed down or asked to commit, so the scenario feeds it in steps: each step produces records
and waits until the live members have processed all of them. kcat commits automatically (every 200 ms, and
on a clean exit); the checks are therefore about the group, not about kcat's commit timing:

- after each join, leave (SIGTERM: kcat closes its consumer, committing and leaving) and crash (SIGKILL) the
  live members own every partition exactly once (from kcat's "% Group ... rebalanced" lines);
- every produced record is processed; a record is processed twice only in a partition a killed member owned;
- after everyone left the committed offsets are the log ends, and a new member processes exactly the
  records produced after that: it resumes from the committed offsets.

kcat has no admin API: the topic is created with our Admin. Against Tansu the connection goes through the
proxy that drops ApiVersions' default tagged fields, which this kcat cannot read (see tests/conftest.py).
"""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from group_harness import create_topic, end_offsets, produce, unique, wait_for

from groupstream.client.admin import Admin
from support.brokers import BrokerKind, BrokerProcess
from support.capture import CaptureProxy, canonical_api_versions

pytestmark = [pytest.mark.compat, pytest.mark.slow]

PARTITIONS = 6
STEP = 300
REBALANCED = re.compile(r"^% Group (\S+) rebalanced \(memberid (\S+)\): (assigned|revoked): (.*)$")
PARTITION = re.compile(r"(\S+) \[(\d+)\]")


@pytest.fixture(scope="module", params=[
    pytest.param(BrokerKind.GROUPSTREAM, marks=pytest.mark.broker_ours, id="groupstream"),
    pytest.param(BrokerKind.TANSU, marks=pytest.mark.broker_tansu, id="tansu"),
])  # fmt: skip
def kcat_broker(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    kind = BrokerKind(request.param)
    workdir = tmp_path_factory.mktemp(str(kind))
    if kind is BrokerKind.GROUPSTREAM:
        with BrokerProcess(kind, workdir, settings={"group.initial.rebalance.delay.ms": "0"}) as b:
            yield b
        return
    with CaptureProxy(rewrite_response=canonical_api_versions) as proxy:
        b = BrokerProcess(kind, workdir, advertised_port=proxy.port)
        with b:
            proxy.start(b.host, b.port)
            yield b


def kcat() -> str:
    path = shutil.which("kcat")
    assert path is not None, "kcat is not installed: run `make system-deps` (apt-get install kcat)"
    return path


class KcatMember:
    """A ``kcat -G`` process; its stdout lines are records, its stderr lines rebalances."""

    def __init__(self, name: str, bootstrap: str, group: str, topic: str, log_dir: Path) -> None:
        self.name = name
        self.owned: set[tuple[str, int]] = set()
        self.records: list[tuple[str, int, int]] = []
        self.killed = False
        self._lock = threading.Lock()
        self._log = open(log_dir / f"kcat-{name}.stderr", "w")  # noqa: SIM115 - closed in stop()
        cmd = [
            kcat(), "-b", bootstrap, "-G", group, "-f", r"%t\t%p\t%o\n", "-u",
            "-X", "auto.offset.reset=earliest",
            "-X", "auto.commit.interval.ms=200",
            "-X", "session.timeout.ms=6000",
            "-X", "heartbeat.interval.ms=500",
            "-X", f"client.id=kcat-{name}",
            topic,
        ]  # fmt: skip
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        threading.Thread(target=self._read_out, daemon=True).start()
        threading.Thread(target=self._read_err, daemon=True).start()

    def _read_out(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            t, p, o = line.rstrip("\n").split("\t")
            with self._lock:
                self.records.append((t, int(p), int(o)))

    def _read_err(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self._log.write(line)
            m = REBALANCED.match(line.strip())
            if m is None:
                continue
            parts = {(t, int(p)) for t, p in PARTITION.findall(m.group(4))}
            with self._lock:
                self.owned = parts if m.group(3) == "assigned" else self.owned - parts

    @property
    def processed(self) -> list[tuple[str, int, int]]:
        with self._lock:
            return list(self.records)

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> None:
        """SIGTERM: kcat stops, commits what it consumed and leaves the group."""
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=30)
        self._log.close()

    def kill9(self) -> None:
        self.killed = True
        self.proc.kill()
        self.proc.wait(timeout=10)
        self._log.close()

    def ensure_gone(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        if not self._log.closed:
            self._log.close()


def test_kcat_balanced_consumers(kcat_broker: BrokerProcess, tmp_path: Path) -> None:
    bs = kcat_broker.bootstrap
    topic, group = unique("grp-kcat"), unique("g-kcat")
    create_topic(bs, topic, PARTITIONS)
    all_parts = {(topic, p) for p in range(PARTITIONS)}
    started: list[KcatMember] = []

    def start(name: str) -> KcatMember:
        m = KcatMember(name, bs, group, topic, tmp_path)
        started.append(m)
        return m

    def describe() -> str:
        return "\n".join(f"{m.name} alive={m.alive} owned={sorted(m.owned)} read={len(m.processed)}" for m in started)

    def split(live: list[KcatMember]) -> None:
        def ok() -> bool:
            sets = [m.owned for m in live]
            return set().union(*sets) == all_parts and sum(map(len, sets)) == PARTITIONS and all(sets)

        try:
            wait_for(ok, 40, f"{[m.name for m in live]} to split the partitions")
        except AssertionError as e:
            raise AssertionError(f"{e}\n{describe()}") from None

    produced: set[tuple[str, int, int]] = set()

    def feed(tag: str) -> None:
        produced.update(produce(bs, topic, STEP, PARTITIONS, tag))
        try:
            wait_for(lambda: {r for m in started for r in m.processed} >= produced, 40, f"every {tag} record read")
        except AssertionError as e:
            raise AssertionError(f"{e}\n{describe()}") from None

    try:
        a = start("A")
        split([a])
        feed("one")
        b = start("B")  # join
        split([a, b])
        feed("two")
        c = start("C")
        split([a, b, c])
        feed("three")
        c.kill9()  # crash
        split([a, b])
        feed("four")
        b.stop()  # leave
        split([a])
        feed("five")
        a.stop()

        ends = end_offsets(produced)
        with Admin({"bootstrap.servers": bs}) as admin:
            committed = {tp: om.offset for tp, om in admin.list_group_offsets(group).items()}
        assert committed == ends, f"after every member left, committed {committed} != log ends {ends}"

        seen = Counter(r for m in started for r in m.processed)
        assert set(seen) == produced, f"{len(produced - set(seen))} records never read"
        crashed = {tp for tp in all_parts if any(r[:2] == tp for r in c.processed)}
        twice = [r for r, n in seen.items() if n > 1 and r[:2] not in crashed]
        assert not twice, f"records read twice outside the crashed member's partitions: {twice[:5]}"

        d = start("D")  # resume from the committed offsets
        split([d])
        before = set(produced)
        feed("six")
        assert set(d.processed) == produced - before, "the new member did not start at the committed offsets"
        d.stop()
    finally:
        for m in started:
            m.ensure_gone()
