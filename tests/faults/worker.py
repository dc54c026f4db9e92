"""The workload's processes: ``python -m faults.worker '<json config>'`` (with ``tests/`` on PYTHONPATH).

Each runs in a process of its own so the nemesis can kill -9 and SIGSTOP it, and writes its history file (see
`history` for the formats) as it goes. A line ``stop`` on stdin, or stdin closing (the runner went away),
ends it cleanly.

- ``role=producer``: an idempotent ``acks=all`` producer, ``client`` groupstream or confluent, producing
  ``rate`` records per second of unique values ``<name>/<seq>`` with keys spread over the partitions. On stop
  it flushes for up to ``flush_s`` and records what is still undelivered. A fatal producer error is recorded
  and the process exits with code 4 (the runner starts a new incarnation under a new name).
- ``role=member``: a group member, ``client`` groupstream or confluent, ``protocol`` classic (``strategy``
  range or cooperative-sticky) or consumer (KIP-848; ``strategy`` names the broker's assignor). It processes
  what it polls (logs the records), then commits them synchronously, and logs every assignment change from
  its rebalance callbacks, as an application that counts on at-least-once delivery does. Errors from poll and
  commit are logged and consumption goes on; a client that closed itself ends the process with code 3.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

from .history import JsonLines, record_value

SESSION_TIMEOUT_MS = 6000
HEARTBEAT_MS = 500
MAX_POLL_INTERVAL_MS = 30_000
KEYS = 64
MAX_OUTSTANDING = 4000  # records produced and not yet delivered; more waits (the broker is down or full)


class StdinCommands:
    """``stop`` (or EOF) on stdin sets ``stopping``."""

    def __init__(self) -> None:
        self.stopping = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in sys.stdin:
            if line.strip() in ("stop", "close"):
                break
        self.stopping.set()


# -- producers ----------------------------------------------------------------------------------------------------


class ProducerLog:
    """The producer's history file; written from the delivery callbacks and the produce loop (one thread)."""

    def __init__(self, path: str) -> None:
        self._f = open(path, "a", encoding="utf-8")  # noqa: SIM115 - closed in close()
        self.outstanding: set[str] = set()
        self.acked = 0

    def sending(self, first: int, last: int, values: list[str]) -> None:
        self._f.write(f"S\t{first}\t{last}\n")
        self._f.flush()
        self.outstanding.update(values)

    def acked_at(self, partition: int, offset: int, value: str) -> None:
        self.outstanding.discard(value)
        self.acked += 1
        self._f.write(f"A\t{partition}\t{offset}\t{value}\t{time.monotonic():.6f}\n")

    def failed(self, value: str, error: str) -> None:
        self.outstanding.discard(value)
        self._f.write(f"F\t{value}\t{_one_line(error)}\n")

    def fatal(self, error: str) -> None:
        self._f.write(f"X\t{_one_line(error)}\n")
        self._f.flush()

    def finish(self) -> None:
        for v in sorted(self.outstanding):
            self._f.write(f"U\t{v}\n")
        self._f.flush()
        self._f.close()

    def flush(self) -> None:
        self._f.flush()


def _one_line(text: str) -> str:
    return " ".join(str(text).split())[:300]


def run_producer(cfg: dict[str, Any]) -> int:
    name, topic, rate = cfg["name"], cfg["topic"], float(cfg["rate"])
    log = ProducerLog(cfg["log"])
    cmds = StdinCommands()
    fatal: list[str] = []
    common = {"bootstrap.servers": cfg["bootstrap"], "client.id": name, "acks": "all", "enable.idempotence": True,
              "linger.ms": 5, "delivery.timeout.ms": 120_000, "request.timeout.ms": 15_000}  # fmt: skip
    if cfg["client"] == "confluent":
        from confluent_kafka import KafkaError, KafkaException, Message
        from confluent_kafka import Producer as ConfluentProducer

        def on_error(err: KafkaError) -> None:
            if err.fatal():
                fatal.append(f"{err.name()}: {err.str()}")

        def on_delivery(err: KafkaError | None, msg: Message) -> None:
            value = (msg.value() or b"").decode()
            if err is not None:
                log.failed(value, err.name())
            else:
                p, o = msg.partition(), msg.offset()
                assert p is not None and o is not None
                log.acked_at(p, o, value)

        cp = ConfluentProducer({**common, "reconnect.backoff.max.ms": 1000, "error_cb": on_error,
                                "message.timeout.ms": common.pop("delivery.timeout.ms")})  # fmt: skip

        def produce(key: bytes, value: str) -> None:
            while not fatal:
                try:
                    cp.produce(topic, value=value.encode(), key=key, on_delivery=on_delivery)
                    return
                except BufferError:
                    cp.poll(0.05)
                except KafkaException as e:  # _FATAL: the idempotent producer gave up (error_cb says why)
                    cp.poll(0)
                    fatal.append(f"{e.args[0].name()}: {e.args[0].str()}")

        def poll(timeout: float) -> None:
            cp.poll(timeout)

        def flush(timeout: float) -> None:
            cp.flush(timeout)

        def close() -> None:
            cp.purge()
            cp.poll(0)

    else:
        from groupstream import Producer
        from groupstream.client.producer.record_metadata import RecordMetadata

        def on_ours(err: BaseException | None, md: RecordMetadata, value: str) -> None:
            if err is not None:
                log.failed(value, f"{type(err).__name__}: {err}")
                if getattr(err, "fatal", False):
                    fatal.append(f"{type(err).__name__}: {err}")
            else:
                log.acked_at(md.partition, md.offset, value)

        gp = Producer(common)

        def produce(key: bytes, value: str) -> None:
            try:
                gp.produce(topic, value=value.encode(), key=key,
                           on_delivery=lambda err, md, v=value: on_ours(err, md, v))  # fmt: skip
            except Exception as e:  # the idempotent producer's fatal error, raised by produce
                fatal.append(f"{type(e).__name__}: {e}")

        def poll(timeout: float) -> None:
            gp.poll(timeout)

        def flush(timeout: float) -> None:
            gp.flush(timeout)

        def close() -> None:
            gp.close(0)

    seq = 0
    started = time.monotonic()
    while not cmds.stopping.is_set() and not fatal:  # a fatal error ends it: the runner starts a new incarnation
        due = int((time.monotonic() - started) * rate)
        room = MAX_OUTSTANDING - len(log.outstanding)
        n = max(0, min(due - seq, room))
        if n:
            values = [record_value(name, s) for s in range(seq, seq + n)]
            log.sending(seq, seq + n - 1, values)
            for s, v in zip(range(seq, seq + n), values, strict=True):
                produce(f"k{s % KEYS}".encode(), v)
            seq += n
        poll(0)
        log.flush()
        cmds.stopping.wait(0.02)  # the produce loop's pace (rate records per second), not a condition
    if fatal:
        log.fatal(fatal[0])
        close()
        log.finish()
        return 4
    flush(float(cfg.get("flush_s", 150)))
    poll(0)
    close()
    log.finish()
    return 0


# -- members ------------------------------------------------------------------------------------------------------


class MemberState:
    """What the member owns and has processed but not committed; ``owned`` events on every change."""

    def __init__(self, events: JsonLines) -> None:
        self.events = events
        self.owned: set[int] = set()
        self.pending: dict[int, int] = {}  # partition -> next offset to commit

    def set_owned(self, parts: set[int], why: str) -> None:
        self.owned = set(parts)
        for p in list(self.pending):
            if p not in parts:
                del self.pending[p]  # no longer ours: its next holder resumes from the last commit
        self.events.write("owned", t=time.monotonic(), parts=sorted(parts), why=why)

    def processed(self, recs: list[list[Any]]) -> None:
        if not recs:
            return
        self.events.write("recs", t=time.monotonic(), recs=recs)
        for p, o, _ in recs:
            if p in self.owned:
                self.pending[p] = o + 1

    def commit(self, send: Any) -> None:
        """Commit what is pending with ``send(offsets)`` (synchronous), logging the answer."""
        offsets = dict(self.pending)
        if not offsets:
            return
        sent = time.monotonic()
        rows = sorted([p, o] for p, o in offsets.items())
        try:
            send(offsets)
        except Exception as e:
            if e.args and hasattr(e.args[0], "name"):
                err = e.args[0].name()  # confluent-kafka's KafkaException wraps a KafkaError
            else:
                err = getattr(e, "name", None) or f"{type(e).__name__}: {e}"
            self.events.write("commit", sent=sent, t=time.monotonic(), ok=False, err=str(err), offsets=rows)
            return
        self.events.write("commit", sent=sent, t=time.monotonic(), ok=True, offsets=rows)
        for p, o in offsets.items():
            if self.pending.get(p) == o:
                del self.pending[p]


def member_properties(cfg: dict[str, Any]) -> dict[str, Any]:
    conf: dict[str, Any] = {
        "bootstrap.servers": cfg["bootstrap"],
        "group.id": cfg["group"],
        "client.id": cfg["name"],
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "max.poll.interval.ms": MAX_POLL_INTERVAL_MS,
    }
    if cfg["protocol"] == "consumer":
        conf.update({"group.protocol": "consumer", "group.remote.assignor": cfg["strategy"]})
    else:
        conf.update({"partition.assignment.strategy": cfg["strategy"], "session.timeout.ms": SESSION_TIMEOUT_MS,
                     "heartbeat.interval.ms": HEARTBEAT_MS})  # fmt: skip
    return conf


def run_member(cfg: dict[str, Any]) -> int:
    events = JsonLines(Path(cfg["log"]))
    events.write("start", t=time.monotonic(), pid=os.getpid(), client=cfg["client"], protocol=cfg["protocol"],
                 strategy=cfg["strategy"])  # fmt: skip
    st = MemberState(events)
    cmds = StdinCommands()
    topic = cfg["topic"]
    code = _confluent_member(cfg, st, cmds, topic) if cfg["client"] == "confluent" else _our_member(cfg, st, cmds, topic)
    events.write("closed", t=time.monotonic())
    events.close()
    return code


def _confluent_member(cfg: dict[str, Any], st: MemberState, cmds: StdinCommands, topic: str) -> int:
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    fatal: list[str] = []

    def on_error(err: KafkaError) -> None:
        st.events.write("error", t=time.monotonic(), err=err.name(), msg=err.str(), fatal=bool(err.fatal()))
        if err.fatal():
            fatal.append(err.name())

    conf = member_properties(cfg)
    conf.update({"error_cb": on_error, "reconnect.backoff.max.ms": 1000, "topic.metadata.refresh.interval.ms": 2000})
    consumer = Consumer(conf)
    incremental = cfg["strategy"] == "cooperative-sticky" or cfg["protocol"] == "consumer"

    def on_assign(_c: Any, parts: list[Any]) -> None:
        got = {tp.partition for tp in parts}
        st.set_owned(st.owned | got if incremental else got, "assign")

    def on_revoke(_c: Any, parts: list[Any]) -> None:
        st.set_owned(st.owned - {tp.partition for tp in parts}, "revoke")

    def on_lost(_c: Any, parts: list[Any]) -> None:
        st.set_owned(st.owned - {tp.partition for tp in parts}, "lost")

    consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)

    def send(offsets: dict[int, int]) -> None:
        tps = [TopicPartition(topic, p, o) for p, o in sorted(offsets.items())]
        result = consumer.commit(offsets=tps, asynchronous=False)
        bad = [tp.error for tp in result or [] if tp.error is not None]
        if bad:
            raise RuntimeError(bad[0].name())

    while not cmds.stopping.is_set() and not fatal:
        msgs = consumer.consume(num_messages=200, timeout=0.2)
        recs = []
        for m in msgs:
            err = m.error()
            if err is not None:
                st.events.write("error", t=time.monotonic(), err=err.name(), msg=err.str(), fatal=bool(err.fatal()))
                continue
            recs.append([m.partition(), m.offset(), (m.value() or b"").decode()])
        st.processed(recs)
        st.commit(send)
    consumer.close()
    return 3 if fatal else 0


def _our_member(cfg: dict[str, Any], st: MemberState, cmds: StdinCommands, topic: str) -> int:
    from groupstream import Consumer
    from groupstream.client.consumer.errors import ConsumerClosedError

    class Listener:  # runs on this thread, inside poll
        def on_partitions_revoked(self, parts: Any) -> None:
            st.set_owned(st.owned - {tp.partition for tp in parts}, "revoke")

        def on_partitions_assigned(self, parts: Any) -> None:
            st.set_owned(st.owned | {tp.partition for tp in parts}, "assign")

        def on_partitions_lost(self, parts: Any) -> None:
            st.set_owned(st.owned - {tp.partition for tp in parts}, "lost")

    conf = member_properties(cfg)
    conf.update({"max.poll.records": 200, "metadata.max.age.ms": 2000})
    consumer = Consumer(conf)
    consumer.subscribe([topic], listener=Listener())
    code = 0
    while not cmds.stopping.is_set():
        try:
            records = consumer.poll(0.2)
        except ConsumerClosedError as e:
            st.events.write("error", t=time.monotonic(), err=type(e).__name__, msg=str(e), fatal=True)
            code = 3
            break
        except Exception as e:  # reported and survived, as an application would
            st.events.write("error", t=time.monotonic(), err=getattr(e, "name", type(e).__name__), msg=str(e))
            continue
        st.processed([[r.partition, r.offset, (r.value or b"").decode()] for r in records])
        st.commit(lambda offsets: consumer.commit({(topic, p): o for p, o in offsets.items()}))
    try:
        consumer.close()
    except Exception as e:
        st.events.write("error", t=time.monotonic(), err=type(e).__name__, msg=f"close: {e}")
    return code


def main() -> None:
    cfg = json.loads(sys.argv[1])
    runner = run_producer if cfg["role"] == "producer" else run_member
    sys.exit(runner(cfg))


if __name__ == "__main__":
    main()
