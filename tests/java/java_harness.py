"""The Java side of the tests: our harness (``GroupstreamHarness.java``) compiled against the Apache Kafka jars,
and Kafka's own tools, run with Java 17.

Why: the Java client and Kafka's tools are the reference implementations of what our broker serves; running
them against it is the only way to know that they work, rather than trusting the message specs.

- ``harness_classes()`` compiles the harness with ``javac`` once per source: the classes go into
  ``~/.cache/groupstream/java-harness-<hash>/`` (the hash covers the source, the log configuration and the jar
  directory), outside the work tree; a compile in progress elsewhere never leaves a half-written directory.
- ``Harness`` is one harness JVM, driven a command at a time (``call``): several Admin calls, produce runs
  and tool invocations share its start-up cost (about 1 s each otherwise).
- ``JavaMember`` is a group member in its own JVM that reports the events of ``group_member.py`` (a
  ``group_harness.Member``), so the group checks of ``tests/compat/groups`` apply to it unchanged;
  ``MixedMembers`` starts Java members and our consumers (``client="java"`` or ``"groupstream"``) in one group.
- ``run_tool()`` runs a Kafka tool's main class: in a harness JVM (its exit caught, output captured) or as its
  own ``java -cp`` process.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import queue
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import TracebackType
from typing import Any

from group_harness import Member, Members

from support.kafka_config import jvm_command, log4j2_console
from support.kafka_jars import cache_root, classpath, jars_dir, java_binary

SOURCE = Path(__file__).resolve().with_name("GroupstreamHarness.java")
MAIN = "GroupstreamHarness"

# Client logs go to stderr at WARN (Log4j's default would print ERRORs on stdout, among the JSON events).
LOG4J2_PROPERTIES = log4j2_console("WARN", stderr=True)

# Kafka's tools, by the script names of its distribution.
TOOLS = {
    "kafka-topics": "org.apache.kafka.tools.TopicCommand",
    "kafka-configs": "org.apache.kafka.tools.ConfigCommand",
    "kafka-acls": "org.apache.kafka.tools.AclCommand",
    "kafka-consumer-groups": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
    "kafka-console-producer": "org.apache.kafka.tools.ConsoleProducer",
    "kafka-console-consumer": "org.apache.kafka.tools.consumer.ConsoleConsumer",
    "kafka-producer-perf-test": "org.apache.kafka.tools.ProducerPerformance",
    "kafka-consumer-perf-test": "org.apache.kafka.tools.ConsumerPerformance",
}


class HarnessError(RuntimeError):
    """A harness command failed (its exception's class and message), or the JVM went away."""


def javac_binary() -> str:
    javac = Path(java_binary()).with_name("javac")
    if not javac.is_file():
        raise HarnessError(f"no javac beside {java_binary()}: install a JDK (openjdk-17-jdk-headless)")
    return str(javac)


@cache
def harness_classes() -> Path:
    """The compiled harness (with its log configuration), compiled now unless this source already was."""
    digest = hashlib.sha256()
    for part in (
        SOURCE.read_bytes(),
        LOG4J2_PROPERTIES.encode(),
        str(jars_dir()).encode(),
        java_binary().encode(),
    ):
        digest.update(part)
    out = cache_root() / f"java-harness-{digest.hexdigest()[:12]}"
    if (out / f"{MAIN}.class").is_file():
        return out
    staging = out.with_name(f"{out.name}.partial-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    cmd = [javac_binary(), "-Xlint:all", "-Werror", "-d", str(staging), "-cp", classpath(), str(SOURCE)]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=300)
    if done.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        raise HarnessError(f"javac failed ({done.returncode}):\n{done.stdout}{done.stderr}")
    (staging / "log4j2.properties").write_text(LOG4J2_PROPERTIES)
    try:
        staging.rename(out)
    except OSError:  # another process compiled the same source first: keep its copy
        shutil.rmtree(staging, ignore_errors=True)
        if not (out / f"{MAIN}.class").is_file():
            raise
    return out


def java_command(main: str, *args: str) -> list[str]:
    """``java -cp <harness classes>:<Kafka jars> main args`` with the JVM options of the Kafka fixtures."""
    classes = harness_classes()
    return jvm_command(main, *args, log4j2=classes / "log4j2.properties", classes=classes)


# -- one harness JVM, a command at a time ------------------------------------------------------------------


class Harness:
    """A harness JVM driven by JSON commands on stdin; ``call`` returns the events of one command."""

    _ids = itertools.count(1)

    def __init__(self, log_dir: Path, name: str = "harness") -> None:
        self.name = name
        log_dir.mkdir(parents=True, exist_ok=True)
        self.stderr_path = log_dir / f"{name}.stderr"
        self._stderr = open(self.stderr_path, "ab")  # noqa: SIM115 - closed in close()
        self.proc = subprocess.Popen(
            java_command(MAIN), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr
        )
        self._events: queue.Queue[dict[str, Any] | None] = queue.Queue()
        threading.Thread(target=self._read, name=f"{name}-stdout", daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                self._events.put(json.loads(line))
            except ValueError:
                self._events.put({"ev": "stdout", "line": line.decode(errors="replace")})
        self._events.put(None)

    def call(self, cmd: str, timeout: float = 120, **fields: Any) -> list[dict[str, Any]]:
        """Run one command; its events up to and including ``done`` (HarnessError on ``failed``)."""
        ident = f"{self.name}-{next(self._ids)}"
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"cmd": cmd, "id": ident, **fields}).encode() + b"\n")
        self.proc.stdin.flush()
        events: list[dict[str, Any]] = []
        deadline = time.monotonic() + timeout
        while True:
            try:
                ev = self._events.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise HarnessError(
                    f"{cmd} {fields} not done within {timeout} s\n{self.stderr_tail()}"
                ) from None
            if ev is None:
                raise HarnessError(
                    f"the harness JVM exited ({self.proc.poll()}) during {cmd}\n{self.stderr_tail()}"
                )
            events.append(ev)
            if ev["ev"] in ("done", "failed") and ev.get("id") == ident:
                break
        if events[-1]["ev"] == "failed":
            raise HarnessError(f"{cmd} {fields}: {events[-1]['error']}: {events[-1]['message']}")
        return events

    def admin(self, bootstrap: str, op: str, **fields: Any) -> Any:
        """One Admin call; its ``result`` object."""
        events = self.call("admin", bootstrap=bootstrap, op=op, **fields)
        return next(e["result"] for e in events if e["ev"] == "admin")

    def tool(self, main: str, args: Sequence[str], stdin: str = "", timeout: float = 120) -> ToolRun:
        events = self.call("tool", timeout=timeout, main=TOOLS.get(main, main), args=list(args), stdin=stdin)
        ev = next(e for e in events if e["ev"] == "tool")
        return ToolRun(int(ev["code"]), ev["out"], ev["err"])

    def stderr_tail(self, n: int = 40) -> str:
        self._stderr.flush()
        lines = self.stderr_path.read_text(errors="replace").splitlines()[-n:]
        return f"--- last {len(lines)} lines of {self.stderr_path} ---\n" + "\n".join(lines)

    def close(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            try:
                self.proc.stdin.write(b'{"cmd": "exit"}\n')
                self.proc.stdin.close()
                self.proc.wait(timeout=20)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait(timeout=10)
        self._stderr.close()

    def __enter__(self) -> Harness:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


@dataclass(frozen=True)
class ToolRun:
    code: int
    out: str
    err: str

    def check(self) -> ToolRun:
        assert self.code == 0, f"exit code {self.code}\nstdout:\n{self.out}\nstderr:\n{self.err}"
        return self


def run_tool(main: str, args: Sequence[str], stdin: str = "", timeout: float = 120) -> ToolRun:
    """A Kafka tool as its own process: ``java -cp <jars> <main class> args``."""
    done = subprocess.run(
        java_command(TOOLS.get(main, main), *args), input=stdin, capture_output=True, text=True, timeout=timeout,
        check=False,
    )  # fmt: skip
    return ToolRun(done.returncode, done.stdout, done.stderr)


# -- group members -----------------------------------------------------------------------------------------


class JavaMember(Member):
    """A ``KafkaConsumer`` group member in its own JVM (the harness's ``consume`` command), reporting the events
    of ``group_member.py``; the config keys are that script's (``protocol``, ``strategy``, ``instance_id``,
    ``topics`` or ``pattern`` with ``regex`` client|broker, ...)."""

    def start(self) -> JavaMember:
        cfg = {"cmd": "consume", "name": self.name, **self.config}
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self._stderr = open(self.log_dir / f"{self.name}.stderr", "ab")  # noqa: SIM115 - closed in wait()
        self.proc = subprocess.Popen(
            java_command(MAIN, json.dumps(cfg)),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
        )
        threading.Thread(target=self._read, daemon=True).start()
        return self

    def terminate(self, timeout: float = 30) -> int:
        """SIGTERM: the JVM's shutdown hook closes the consumer (leaving the group) before it exits."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return self.wait(timeout)


class MixedMembers(Members):
    """Members whose ``client`` is ``java`` run in a JVM, the others as ``group_member.py`` processes;
    ``clients`` names the client of particular members (by name) over the common one."""

    def __init__(self, log_dir: Path, clients: Mapping[str, str] | None = None, **common: Any) -> None:
        super().__init__(log_dir, **common)
        self.clients = dict(clients or {})

    def start(self, name: str, **overrides: Any) -> Member:
        config = {**self.common, **overrides}
        config["client"] = overrides.get("client", self.clients.get(name, config.get("client")))
        kind = JavaMember if config["client"] == "java" else Member
        m = kind(name, config, self.log_dir).start()
        self.all.append(m)
        return m


Step = tuple[str, Any]
"""One step of a scenario run against two brokers: its name and what it gave (normalised)."""


def compare(ours: list[Step], theirs: list[Step]) -> None:
    """Equal step by step; the message lists every step that differs from Apache Kafka."""
    assert [n for n, _ in ours] == [n for n, _ in theirs]
    diffs = [
        f"{n}:\n  ours:   {a}\n  Apache: {b}" for (n, a), (_, b) in zip(ours, theirs, strict=True) if a != b
    ]
    assert not diffs, f"{len(diffs)} of {len(ours)} steps differ from Apache Kafka:\n" + "\n".join(diffs)
