"""Connection limits: our broker stays useful when clients open more connections than it has descriptors for,
leave them idle, or start requests they never finish.

The regression (issue 12, part 4): under ``ulimit -n 1024`` about 430 idle connections used every descriptor
(two per connection), asyncio's accept loop spun logging a traceback per attempt (3.3 GB of log in 11 minutes),
a healthy producer got no acknowledgement for minutes, and SIGTERM was ignored. Here 1,500 idle connections
against a 1,024 descriptor limit leave a healthy idempotent acks=all producer's 2,000 acks under 30 s, the log
under 20 MB, and SIGTERM answered within 10 s: once with the default ``max.connections`` (derived from the
descriptor limit) and once with ``max.connections`` far above it, so that accepting really runs out of
descriptors and the accept loop's back-off is what keeps the broker working.
"""

from __future__ import annotations

import errno
import os
import resource
import select
import signal
import socket
import struct
import threading
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, Message, Producer

from groupstream.protocol.messages import APIS, by_name
from groupstream.protocol.records.batch import BatchBuilder
from support.brokers import HOST, BrokerProcess, api_versions_probe
from support.inprocess import running_broker
from support.raw_client import RawClient
from support.waiting import wait_until

pytestmark = [pytest.mark.broker_ours]

IDLE_CONNECTIONS = 1_500
BROKER_NOFILE = 1_024
RECORDS = 2_000
ACKS_WITHIN_S = 30.0
LOG_LIMIT_BYTES = 20 * 1024 * 1024
SIGTERM_WITHIN_S = 10.0


# -- helpers ---------------------------------------------------------------------------------------------------


@pytest.fixture
def own_nofile() -> Iterator[None]:
    """Room in this process for the idle sockets, a producer and the broker's log (restored afterwards)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = IDLE_CONNECTIONS + 1_024
    raised_hard = hard if hard == resource.RLIM_INFINITY or hard >= need else need
    try:  # raising the hard limit needs root (CAP_SYS_RESOURCE), which `make test` runs as
        resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, need), raised_hard))
    except (ValueError, PermissionError) as e:
        raise AssertionError(f"this test needs {need} descriptors; the hard RLIMIT_NOFILE is {hard} and could "
                             f"not be raised ({e}): run it as root or raise `ulimit -Hn`") from None
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


class IdleSockets:
    """Many TCP connections that connect and then say nothing.

    Connects are non-blocking: once the broker stops accepting, its listen backlog fills and the kernel makes
    further connects wait, which must not stall the test.
    """

    def __init__(self, port: int, count: int, source: str | None = None) -> None:
        self.socks: list[socket.socket] = []
        try:
            for _ in range(count):
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                self.socks.append(s)
                s.setblocking(False)
                if source is not None:
                    s.bind((source, 0))
                err = s.connect_ex((HOST, port))
                if err not in (0, errno.EINPROGRESS):
                    raise OSError(err, f"connect to {HOST}:{port}: {errno.errorcode.get(err, err)}")
        except BaseException:
            self.close()
            raise

    def established(self) -> int:
        """How many have completed the TCP handshake (the broker accepted them or they wait in its backlog)."""
        poller = select.poll()
        for s in self.socks:
            poller.register(s, select.POLLOUT)
        ready = {fd for fd, ev in poller.poll(0) if ev & select.POLLOUT}
        return sum(
            1 for s in self.socks if s.fileno() in ready and s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0
        )

    def closed_by_peer(self) -> int:
        """How many the broker has closed (end of stream or a reset)."""
        return sum(1 for s in self.socks if peer_closed(s))

    def close(self) -> None:
        for s in self.socks:
            s.close()
        self.socks.clear()


def peer_closed(s: socket.socket) -> bool:
    """Whether the broker has closed ``s`` (end of stream or a reset), looking without waiting or consuming."""
    timeout = s.gettimeout()
    s.setblocking(False)
    try:
        return s.recv(1, socket.MSG_PEEK) == b""
    except (BlockingIOError, InterruptedError):
        return False
    except OSError as e:
        return e.errno != errno.ENOTCONN  # ENOTCONN: still connecting; ECONNRESET and friends: closed
    finally:
        s.settimeout(timeout)


class AckCounter:
    """An idempotent acks=all confluent-kafka producer that counts acknowledgements."""

    def __init__(self, bootstrap: str) -> None:
        self.acked = 0
        self.errors: list[str] = []
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 5,
                "message.timeout.ms": 120_000,
            }
        )

    def _on_delivery(self, err: KafkaError | None, _msg: Message) -> None:
        if err is None:
            self.acked += 1
        else:
            self.errors.append(str(err))

    def produce(self, topic: str, n: int, timeout_s: float) -> float:
        """Produce ``n`` records and wait for their acknowledgements; returns the seconds it took."""
        start = time.monotonic()
        target = self.acked + n
        for i in range(n):
            self.producer.produce(topic, value=b"v%d" % i, on_delivery=self._on_delivery)
            self.producer.poll(0)
        deadline = start + timeout_s
        while self.acked < target and not self.errors and time.monotonic() < deadline:
            self.producer.poll(0.05)
        return time.monotonic() - start


def sigterm_and_time(broker: BrokerProcess) -> tuple[int | None, float]:
    """Send SIGTERM and wait up to the limit (plus slack to tell slow from never); exit code and seconds."""
    proc = broker._proc
    assert proc is not None
    start = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    try:
        code: int | None = proc.wait(timeout=SIGTERM_WITHIN_S + 5)
    except Exception:
        code = None
    elapsed = time.monotonic() - start
    broker.stop()  # SIGKILL if it is still there; no-op otherwise
    return code, elapsed


# -- the regression ------------------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize(
    "settings",
    [
        pytest.param({}, id="default-max-connections"),
        pytest.param({"max.connections": "100000"}, id="accept-runs-out-of-descriptors"),
    ],
)
def test_idle_connections_past_the_descriptor_limit_leave_a_producer_working(
    tmp_path: Path, own_nofile: None, settings: dict[str, str]
) -> None:
    broker = BrokerProcess("groupstream", tmp_path / "broker", nofile=BROKER_NOFILE, settings=settings).start()
    idle: IdleSockets | None = None
    producer: AckCounter | None = None
    try:
        producer = AckCounter(broker.bootstrap)
        took = producer.produce("healthy", 1, ACKS_WITHIN_S)  # connected, topic created, producer id assigned
        assert producer.acked == 1, f"first record not acknowledged after {took:.1f}s: {producer.errors}"

        idle = IdleSockets(broker.port, IDLE_CONNECTIONS)
        wait_until(lambda: idle is not None and idle.established() >= 400, 30,
                   "400 of the idle connections to be established", explain=broker.log_tail)  # fmt: skip

        # half while the storm is being accepted, half once the broker holds all it can and the rest wait
        half = RECORDS // 2
        took = producer.produce("healthy", half, ACKS_WITHIN_S + 30)
        assert not producer.errors, producer.errors[:3]
        assert producer.acked == half + 1, (
            f"{producer.acked - 1} of {half} acknowledged after {took:.1f}s\n{broker.log_tail()}"
        )
        wait_until(lambda: idle is not None and idle.established() == IDLE_CONNECTIONS, 30,
                   "every idle connection to be accepted or queued in the listen backlog",
                   explain=broker.log_tail)  # fmt: skip
        assert idle.closed_by_peer() == 0, "connections over the limit wait; none is refused"
        took += producer.produce("healthy", RECORDS - half, ACKS_WITHIN_S + 30)
        assert not producer.errors, producer.errors[:3]
        assert producer.acked == RECORDS + 1, (
            f"{producer.acked - 1} of {RECORDS} acknowledged after {took:.1f}s\n{broker.log_tail()}"
        )
        assert took < ACKS_WITHIN_S, f"{RECORDS} acks took {took:.1f}s (limit {ACKS_WITHIN_S:g}s)"

        log_size = broker.log_path.stat().st_size
        assert log_size < LOG_LIMIT_BYTES, f"broker log is {log_size:,} bytes\n{broker.log_tail(20)}"
        assert "Traceback" not in broker.log_text()

        code, elapsed = sigterm_and_time(broker)
        assert code == 0 and elapsed < SIGTERM_WITHIN_S, (
            f"SIGTERM: exit code {code} after {elapsed:.1f}s (limit {SIGTERM_WITHIN_S:g}s)\n{broker.log_tail()}"
        )
        assert "stopped cleanly" in broker.log_text()
    finally:
        if producer is not None:
            producer.producer.flush(0)
        if idle is not None:
            idle.close()
        broker.stop()




# -- what else runs out: descriptors taken by something else, max.connections, max.connections.per.ip -------------

API_VERSIONS = APIS[18]
FETCH = by_name("Fetch")


Raw = partial(RawClient, client_id="connection-limits-test")


def listener_records(caplog: pytest.LogCaptureFixture, text: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "groupstream.broker.listener" and text in r.getMessage()]


def test_accept_backs_off_while_descriptors_are_exhausted_and_logs_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Descriptors taken by something else in the process (here: /dev/null opened until EMFILE): accepting
    fails, backs off instead of spinning, logs one line, keeps serving the connections it has, and lets the
    waiting client in once descriptors are free again."""
    caplog.set_level("INFO", logger="groupstream.broker.listener")
    with running_broker(tmp_path / "d") as broker:
        acceptor = broker.acceptor
        assert acceptor is not None
        old = Raw(broker.config.port)
        late = socket.socket(socket.AF_INET, socket.SOCK_STREAM)  # its descriptor, before there are none left
        fillers: list[int] = []
        try:
            while True:
                try:
                    fillers.append(os.open(os.devnull, os.O_RDONLY))
                except OSError as e:
                    assert e.errno == errno.EMFILE, e
                    break
            late.setblocking(False)
            assert late.connect_ex((HOST, broker.config.port)) in (0, errno.EINPROGRESS)
            wait_until(lambda: acceptor.failed_accepts >= 5, 20, "five failed accepts (backing off, not spinning)")
            assert old.api_versions(), "an open connection must still be served while accepting fails"
            failures = listener_records(caplog, "too many open files")
            assert len(failures) == 1, failures
            assert "limit" in failures[0]
        finally:
            for fd in fillers:
                os.close(fd)
        late.setblocking(True)
        late.settimeout(10)
        joined = Raw(broker.config.port, sock=late)
        assert joined.api_versions(), "the client that waited in the backlog gets in once descriptors are free"
        joined.close()
        old.close()


def test_max_connections_stops_accepting_until_one_closes(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("INFO", logger="groupstream.broker.listener")
    with running_broker(tmp_path / "d", **{"max.connections": "2"}) as broker:
        first, second = Raw(broker.config.port), Raw(broker.config.port)
        assert first.api_versions() and second.api_versions()
        third = Raw(broker.config.port)  # the kernel completes the handshake; the broker does not accept it
        third.send(API_VERSIONS, 0, API_VERSIONS.Request())
        wait_until(lambda: listener_records(caplog, "max.connections (2) reached"), 10, "the max.connections log line")
        assert len(broker.connections) == 2
        assert not peer_closed(third.sock), "a client over max.connections waits; it is not refused"
        first.close()
        got = third.receive()  # answered once the first one has gone
        assert got[3].error_code == 0  # type: ignore[attr-defined]
        wait_until(lambda: len(broker.connections) == 2, 10, "the broker to count the closed connection out")
        second.close()
        third.close()


def test_max_connections_per_ip_closes_the_extra_connections(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("INFO", logger="groupstream.broker.listener")
    with running_broker(tmp_path / "d", **{"max.connections.per.ip": "2"}) as broker:
        port = broker.config.port
        kept = [Raw(port), Raw(port)]
        assert all(r.api_versions() for r in kept)
        extra = [Raw(port) for _ in range(3)]
        wait_until(lambda: all(peer_closed(r.sock) for r in extra), 10, "the broker to close the 3 extra connections")
        lines = listener_records(caplog, "max.connections.per.ip (2)")
        assert len(lines) == 1, f"one line for the first, the others summed up later: {lines}"
        assert "127.0.0.1" in lines[0]
        other = Raw(port, source="127.0.0.2")  # another address has its own count
        assert other.api_versions()
        kept[0].close()
        wait_until(lambda: broker.connections.count_for("127.0.0.1") == 1, 10, "the closed connection counted out")
        again = Raw(port)
        assert again.api_versions(), "a slot freed by a close is usable again"
        for r in [*kept, *extra, other, again]:
            r.close()


def _fetch_body(topic: str, max_wait_ms: int) -> object:
    R = FETCH.Request
    FT = R.FetchTopic
    part = FT.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)
    return R(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
             session_id=0, session_epoch=-1, topics=[FT(topic=topic, partitions=[part])], forgotten_topics_data=[],
             rack_id="")  # fmt: skip


def test_connections_max_idle_ms_closes_idle_and_half_sent_connections_only(tmp_path: Path) -> None:
    idle_ms = 400
    with running_broker(tmp_path / "d", **{"connections.max.idle.ms": str(idle_ms)}) as broker:
        port = broker.config.port
        broker.catalog.create_topic("t", 1, {})
        start = time.monotonic()
        silent = Raw(port)
        half = Raw(port)
        half.sock.sendall(struct.pack(">i", 100) + b"0123456789")  # a request that never finishes
        busy = Raw(port)
        long_poll = Raw(port)
        corr = long_poll.send(FETCH, 11, _fetch_body("t", max_wait_ms=3 * idle_ms))  # in flight past the idle time

        stop = threading.Event()
        busy_failures: list[BaseException] = []

        def keep_busy() -> None:  # a request every 100 ms, a quarter of the idle time
            try:
                while not stop.wait(0.1):
                    assert busy.api_versions()
            except BaseException as e:
                busy_failures.append(e)

        pinger = threading.Thread(target=keep_busy)
        pinger.start()
        try:
            wait_until(lambda: peer_closed(silent.sock) and peer_closed(half.sock), 10,
                       "the silent and the half-sent connections to be closed")  # fmt: skip
            assert time.monotonic() - start >= idle_ms / 1000, "closed before connections.max.idle.ms"
            got = long_poll.receive()  # the fetch was answered (empty, after its wait), not cut off
            assert got[0] == corr
            wait_until(lambda: peer_closed(long_poll.sock), 10, "the fetching connection to be closed once idle")
        finally:
            stop.set()
            pinger.join()
        assert not busy_failures, f"a connection with a request every 100 ms was closed: {busy_failures[0]!r}"
        assert busy.api_versions()
        for r in (silent, half, busy, long_poll):
            r.close()


PRODUCE = by_name("Produce")


def _produce_body(topic: str, records: bytes) -> object:
    R = PRODUCE.Request
    TD = R.TopicProduceData
    data = [TD(name=topic, partition_data=[TD.PartitionProduceData(index=0, records=records)])]
    return R(transactional_id=None, acks=-1, timeout_ms=5000, topic_data=data)


def test_connections_max_idle_ms_closes_a_client_that_stops_reading_its_responses(tmp_path: Path) -> None:
    """A 24 MB fetch response to a client that never reads stays mostly unsent; with nothing taken for
    connections.max.idle.ms the connection is closed, instead of holding the response in memory forever."""
    idle_ms = 500
    with running_broker(tmp_path / "d", **{"connections.max.idle.ms": str(idle_ms)}) as broker:
        broker.catalog.create_topic("big", 1, {})
        writer = Raw(broker.config.port)
        for start in range(0, 240, 8):  # batches under max.message.bytes
            b = BatchBuilder()
            for i in range(8):
                b.append(value=bytes([(start + i) % 251]) * 100_000, key=None, timestamp=1_700_000_000_000 + i)
            writer.send(PRODUCE, 9, _produce_body("big", b.build()))
            assert writer.receive()[3].responses[0].partition_responses[0].error_code == 0  # type: ignore[attr-defined]
        writer.close()
        wait_until(lambda: len(broker.connections) == 0, 10, "the producing connection to be gone")
        deaf_sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        deaf_sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        deaf_sock.connect((HOST, broker.config.port))
        deaf = Raw(broker.config.port, sock=deaf_sock)
        body = _fetch_body("big", max_wait_ms=0)
        body = body._replace(max_bytes=64 << 20, topics=[body.topics[0]._replace(  # type: ignore[attr-defined]
            partitions=[body.topics[0].partitions[0]._replace(partition_max_bytes=64 << 20)])])  # type: ignore[attr-defined]  # fmt: skip
        start = time.monotonic()
        deaf.send(FETCH, 11, body)
        wait_until(lambda: len(broker.connections) == 1, 10, "the broker to accept the fetching connection")
        wait_until(lambda: len(broker.connections) == 0, 10, "the client that stopped reading to be closed")
        assert time.monotonic() - start >= idle_ms / 1000, "closed before connections.max.idle.ms"
        deaf.close()


# -- descriptors run out for real, in a broker of its own -----------------------------------------------------------


@pytest.mark.slow
def test_a_new_client_gets_in_once_idle_connections_are_closed(tmp_path: Path, own_nofile: None) -> None:
    broker = BrokerProcess("groupstream", tmp_path / "broker", nofile=BROKER_NOFILE,
                           settings={"connections.max.idle.ms": "2000"}).start()  # fmt: skip
    idle = IdleSockets(broker.port, IDLE_CONNECTIONS)
    try:
        wait_until(lambda: "not accepting until a connection closes" in broker.log_text(), 30,
                   "the broker to stop accepting for lack of descriptors", explain=broker.log_tail)  # fmt: skip
        answered: list[bool] = []
        newcomer = threading.Thread(target=lambda: answered.append(api_versions_probe(HOST, broker.port, timeout=30)))
        newcomer.start()
        newcomer.join(40)
        assert answered == [True], f"the new client was not answered\n{broker.log_tail()}"
        assert idle.closed_by_peer() > 0, "the new client got in before any idle connection was closed"
        assert "Traceback" not in broker.log_text()
    finally:
        idle.close()
        broker.stop()


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for pid {pid}")


@pytest.mark.slow
def test_slow_loris_partial_requests_do_not_grow_memory_and_healthy_clients_work(tmp_path: Path) -> None:
    """Ten clients each announce a 90 MiB request and send 24 MiB of it (240 MiB in all, 2.4 GB in the issue's
    version) against queued.max.request.bytes = 4 MiB, while a healthy producer runs; then ten more each send
    1 MiB and stop (10 MiB in all), and are closed until the rest fits, the rest once idle."""
    bound = 4 * 1024 * 1024
    broker = BrokerProcess("groupstream", tmp_path / "broker", settings={
        "queued.max.request.bytes": str(bound), "connections.max.idle.ms": "3000"}).start()  # fmt: skip
    producer = AckCounter(broker.bootstrap)
    try:
        assert producer.produce("healthy", 1, ACKS_WITHIN_S) and producer.acked == 1, producer.errors
        pid = broker.pid
        assert pid is not None
        baseline = rss_bytes(pid)
        peak = [baseline]
        sampling = threading.Event()

        def sample() -> None:
            while not sampling.wait(0.01):  # the sampling period of a measurement, not a stand-in for a condition
                peak[0] = max(peak[0], rss_bytes(pid))

        sampler = threading.Thread(target=sample)
        sampler.start()
        chunk = b"x" * (1 << 20)
        cut_off: list[bool] = []

        def loris() -> None:
            with socket.create_connection((HOST, broker.port), timeout=30) as s:
                try:
                    s.sendall(struct.pack(">i", 90 << 20))
                    for _ in range(24):
                        s.sendall(chunk)
                except OSError:
                    cut_off.append(True)
                    return
                cut_off.append(peer_closed_within(s, 10))

        lorises = [threading.Thread(target=loris) for _ in range(10)]
        for t in lorises:
            t.start()
        took = producer.produce("healthy", RECORDS, ACKS_WITHIN_S)
        for t in lorises:
            t.join(60)
        sampling.set()
        sampler.join()
        assert producer.acked == RECORDS + 1 and not producer.errors, (
            f"{producer.acked - 1} of {RECORDS} acknowledged after {took:.1f}s: {producer.errors[:3]}"
        )
        growth = peak[0] - baseline
        assert growth < 64 * 1024 * 1024, f"RSS grew by {growth / 2**20:.0f} MiB under the slow loris"
        assert cut_off == [True] * 10, f"cut off: {cut_off}\n{broker.log_tail()}"

        # many small partial requests: together over the bound, each under it
        smalls = [socket.create_connection((HOST, broker.port), timeout=10) for _ in range(10)]
        for s in smalls:
            s.sendall(struct.pack(">i", 2 << 20) + b"y" * (1 << 20))
        wait_until(lambda: sum(peer_closed(s) for s in smalls) >= 6, 10,
                   "the oldest partial requests to be closed until the rest is within the bound",
                   explain=broker.log_tail)  # fmt: skip
        wait_until(lambda: all(peer_closed(s) for s in smalls), 20,
                   "the remaining partial requests to be closed after connections.max.idle.ms", explain=broker.log_tail)
        for s in smalls:
            s.close()
        took = producer.produce("healthy", RECORDS, ACKS_WITHIN_S)
        assert producer.acked == 2 * RECORDS + 1, f"healthy producer after the attack: {producer.errors[:3]}"
        assert "Traceback" not in broker.log_text()
    finally:
        producer.producer.flush(0)
        broker.stop()


def peer_closed_within(s: socket.socket, timeout_s: float) -> bool:
    s.settimeout(timeout_s)
    try:
        return s.recv(1) == b""
    except TimeoutError:
        return False
    except OSError:
        return True
