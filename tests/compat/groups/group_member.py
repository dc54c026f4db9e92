"""One consumer-group member in its own process, driven by a real client, reporting what it does.

Run as ``python group_member.py '<json config>'``. The tests start several of these, kill some with
SIGKILL, stop others with SIGSTOP, and check the group from what they report. Every event is one JSON line on stdout with
``t`` = ``time.monotonic()`` (CLOCK_MONOTONIC is system-wide on Linux, so the times of different processes
compare):

- ``owned``: the member's whole assignment after a rebalance callback (``why``: assign, revoke or lost);
- ``recs``: records processed, as ``[topic, partition, offset]``;
- ``committing`` then ``commit``: offsets committed synchronously after a batch (``ok``, ``err``; ``sent``
  is when the commit started), ``offsets`` as ``[topic, partition, next offset]``; a killed member's last
  ``committing`` without its ``commit`` is in doubt: the broker may or may not have stored it;
- ``error``: an error the client reported (``fatal`` when the client gave up, e.g. FENCED_INSTANCE_ID);
- ``idle``: ``stop_after`` records were processed and the member now waits for commands, not polling;
- ``closed``.

Commands on stdin, one per line: ``close`` (leave gracefully: ``consumer.close()``), ``commit`` (commit what
was processed and not yet committed, at once, without polling first), ``more N`` (process N more records,
then be idle again; confluent only).

Config keys: client (confluent | kafka-python | aiokafka | groupstream), protocol (classic, the default, or
consumer: KIP-848, confluent and groupstream only; ``strategy`` then names the broker's assignor), bootstrap,
group, topics, strategy, name,
instance_id, session_timeout_ms, heartbeat_ms, max_poll_interval_ms, max_records (per poll), batch_delay_s
(simulated processing time per non-empty batch), commit (``batch``: after every batch; ``manual``: only on
the ``commit`` command), stop_after (records; then idle; confluent only), poll_timeout_ms (kafka-python:
500 by default; a 100 ms poll now and then left kafka-python 3.0 holding an assignment it never applied).
Environment: GROUP_MEMBER_DEBUG=1 puts the client's debug log on the member's stderr.
"""

from __future__ import annotations

import asyncio
import json
import os
import queue
import sys
import threading
import time
from typing import Any

TopicPart = tuple[str, int]


def emit(ev: str, **fields: Any) -> None:
    fields.setdefault("t", time.monotonic())
    sys.stdout.write(json.dumps({"ev": ev, **fields}) + "\n")
    sys.stdout.flush()


class Commands:
    """stdin lines, read by a thread so the poll loop can check for them without blocking."""

    def __init__(self) -> None:
        self.q: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in sys.stdin:
            self.q.put(line.strip())
        self.q.put("close")  # the test went away: leave

    def get(self, block: bool = False) -> str | None:
        try:
            return self.q.get(block=block, timeout=None if block else 0)
        except queue.Empty:
            return None


class State:
    """What the member owns, processed and has not committed yet (shared by all client drivers)."""

    def __init__(self, cfg: dict[str, Any]) -> None:
        self.cfg = cfg
        self.owned: set[TopicPart] = set()
        self.pending: dict[TopicPart, int] = {}  # next offset to commit, per partition
        self.processed = 0

    def set_owned(self, parts: set[TopicPart], why: str) -> None:
        self.owned = parts
        for tp in list(self.pending):
            if tp not in parts:
                del self.pending[tp]  # not ours any more: its new owner resumes from the last commit
        emit("owned", why=why, parts=sorted([t, p] for t, p in parts))

    def revoked(self, parts: Any, why: str = "revoke") -> None:
        self.set_owned(self.owned - {(tp.topic, tp.partition) for tp in parts}, why)

    def assigned(self, parts: Any) -> None:
        self.set_owned(self.owned | {(tp.topic, tp.partition) for tp in parts}, "assign")

    def processed_batch(self, recs: list[tuple[str, int, int]]) -> None:
        if not recs:
            return
        emit("recs", recs=recs)
        for t, p, o in recs:
            self.pending[(t, p)] = o + 1
        self.processed += len(recs)
        delay = float(self.cfg.get("batch_delay_s", 0))
        if delay:
            time.sleep(delay)  # simulated processing time, so rebalances happen while records flow

    def idle_now(self) -> bool:
        stop_after = self.cfg.get("stop_after")
        return stop_after is not None and self.processed >= int(stop_after)


def kafka_properties(cfg: dict[str, Any]) -> dict[str, Any]:
    """The member's settings under Kafka's property names (confluent-kafka's and ours)."""
    conf: dict[str, Any] = {
        "bootstrap.servers": cfg["bootstrap"],
        "group.id": cfg["group"],
        "client.id": cfg.get("name", "member"),
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "max.poll.interval.ms": cfg.get("max_poll_interval_ms", 60000),
    }
    if cfg.get("protocol", "classic") == "consumer":
        # KIP-848: the broker assigns (``strategy`` names its assignor) and sets session and heartbeat times.
        conf.update({"group.protocol": "consumer", "group.remote.assignor": cfg.get("strategy", "uniform")})
    else:
        conf.update({
            "partition.assignment.strategy": cfg.get("strategy", "range"),
            "session.timeout.ms": cfg.get("session_timeout_ms", 6000),
            "heartbeat.interval.ms": cfg.get("heartbeat_ms", 500),
        })  # fmt: skip
    if cfg.get("instance_id"):
        conf["group.instance.id"] = cfg["instance_id"]
    return conf


# --- confluent-kafka -------------------------------------------------------------------------------------


def run_confluent(cfg: dict[str, Any], cmds: Commands) -> None:
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    st = State(cfg)
    fatal: list[str] = []

    def is_fatal(err: Any) -> bool:
        # librdkafka reports a fatal error (e.g. FENCED_INSTANCE_ID) as _FATAL, whose fatal() flag is not set
        return bool(err.fatal()) or err.name() == "_FATAL"

    def on_error(err: Any) -> None:
        emit("error", err=err.name(), msg=err.str(), fatal=is_fatal(err))
        if is_fatal(err):
            fatal.append(err.name())

    conf = kafka_properties(cfg)
    conf.update({"topic.metadata.refresh.interval.ms": 2000, "error_cb": on_error})
    if os.environ.get("GROUP_MEMBER_DEBUG"):
        conf["debug"] = "cgrp"
    consumer = Consumer(conf)
    # Incremental callbacks: cooperative-sticky, and the consumer protocol, which is always incremental.
    cooperative = cfg.get("strategy") == "cooperative-sticky" or cfg.get("protocol") == "consumer"

    def on_assign(c: Any, parts: list[Any]) -> None:
        got = {(tp.topic, tp.partition) for tp in parts}
        st.set_owned(st.owned | got if cooperative else got, "assign")

    def on_revoke(c: Any, parts: list[Any]) -> None:
        gone = {(tp.topic, tp.partition) for tp in parts}
        st.set_owned(st.owned - gone, "revoke")

    def on_lost(c: Any, parts: list[Any]) -> None:
        gone = {(tp.topic, tp.partition) for tp in parts}
        st.set_owned(st.owned - gone, "lost")

    consumer.subscribe(list(cfg["topics"]), on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)

    def commit() -> None:
        offsets = dict(st.pending)
        if not offsets:
            return
        sent = time.monotonic()
        emit("committing", t=sent, offsets=_rows(offsets))
        tps = [TopicPartition(t, p, o) for (t, p), o in sorted(offsets.items())]
        try:
            result = consumer.commit(offsets=tps, asynchronous=False)
            bad = [tp for tp in result or [] if tp.error is not None]
            if bad:
                emit("commit", sent=sent, ok=False, err=bad[0].error.name(), offsets=_rows(offsets))
                return
        except KafkaException as e:
            err = e.args[0]
            emit("commit", sent=sent, ok=False, err=err.name(), offsets=_rows(offsets))
            if is_fatal(err):  # e.g. fenced by a newer member with our group.instance.id: stop, as an app must
                emit("error", err=err.name(), msg=err.str(), fatal=True)
                fatal.append(err.name())
                consumer.poll(0.2)  # serves error_cb, which carries the reason ("... fenced ...")
            return
        emit("commit", sent=sent, ok=True, err=None, offsets=_rows(offsets))
        for tp, o in offsets.items():
            if st.pending.get(tp) == o:
                del st.pending[tp]

    idle = False
    while not fatal:
        cmd = cmds.get(block=idle)
        if cmd == "close":
            break
        if cmd == "commit":
            commit()
        elif cmd is not None and cmd.startswith("more "):
            cfg["stop_after"] = st.processed + int(cmd.split()[1])
            idle = False
        if idle:
            continue
        msgs = consumer.consume(num_messages=int(cfg.get("max_records", 50)), timeout=0.1)
        recs = []
        for m in msgs:
            err = m.error()
            if err is not None:
                emit("error", err=err.name(), msg=err.str(), fatal=is_fatal(err))
                if is_fatal(err):
                    fatal.append(err.name())
                continue
            recs.append([m.topic(), m.partition(), m.offset()])
        st.processed_batch(recs)
        if recs and cfg.get("commit", "batch") == "batch":
            commit()
        if st.idle_now() and cfg.get("stop_after") is not None:
            emit("idle", processed=st.processed)
            idle = True
            cfg["stop_after"] = None
    if fatal:
        emit("fatal", err=fatal[0])
    consumer.close()
    emit("closed")


def commit_pending(st: State, send: Any, lock: threading.Lock | None = None) -> BaseException | None:
    """Commit what was processed and not yet committed with ``send(offsets)`` (a synchronous client call),
    reporting ``committing`` then ``commit``; returns the error the client raised, if any."""
    guard = lock or threading.Lock()
    with guard:
        offsets = dict(st.pending)
    if not offsets:
        return None
    sent = time.monotonic()
    emit("committing", t=sent, offsets=_rows(offsets))
    try:
        send(offsets)
    except Exception as e:
        emit("commit", sent=sent, ok=False, err=type(e).__name__, offsets=_rows(offsets))
        return e
    emit("commit", sent=sent, ok=True, err=None, offsets=_rows(offsets))
    with guard:
        for tp, o in offsets.items():
            if st.pending.get(tp) == o:
                del st.pending[tp]
    return None


def _rows(offsets: dict[TopicPart, int]) -> list[list[Any]]:
    return [[t, p, o] for (t, p), o in sorted(offsets.items())]


# --- kafka-python ----------------------------------------------------------------------------------------


def run_kafka_python(cfg: dict[str, Any], cmds: Commands) -> None:
    from kafka import KafkaConsumer
    from kafka.consumer.subscription_state import ConsumerRebalanceListener
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor
    from kafka.structs import OffsetAndMetadata, TopicPartition

    assignors = {
        "range": RangePartitionAssignor,
        "roundrobin": RoundRobinPartitionAssignor,
        "sticky": StickyPartitionAssignor,
    }
    st = State(cfg)
    lock = threading.Lock()  # callbacks run on kafka-python's IO thread

    class Listener(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked: Any) -> None:
            with lock:
                st.revoked(revoked)

        def on_partitions_assigned(self, assigned: Any) -> None:
            with lock:
                st.assigned(assigned)

        def on_partitions_lost(self, lost: Any) -> None:
            with lock:
                st.revoked(lost, "lost")

    kwargs: dict[str, Any] = {
        "bootstrap_servers": cfg["bootstrap"],
        "group_id": cfg["group"],
        "client_id": cfg.get("name", "member"),
        "partition_assignment_strategy": [assignors[cfg.get("strategy", "range")]],
        "enable_auto_commit": False,
        "auto_offset_reset": "earliest",
        "session_timeout_ms": cfg.get("session_timeout_ms", 6000),
        "heartbeat_interval_ms": cfg.get("heartbeat_ms", 500),
        "max_poll_interval_ms": cfg.get("max_poll_interval_ms", 60000),
        "metadata_max_age_ms": 2000,
    }
    if cfg.get("instance_id"):
        kwargs["group_instance_id"] = cfg["instance_id"]
    consumer = KafkaConsumer(**kwargs)
    consumer.subscribe(list(cfg["topics"]), listener=Listener())

    def commit() -> None:
        commit_pending(st, lambda offsets: consumer.commit(
            {TopicPartition(t, p): OffsetAndMetadata(o, "", -1) for (t, p), o in offsets.items()}), lock)

    while True:
        cmd = cmds.get()
        if cmd == "close":
            break
        if cmd == "commit":
            commit()
        batches = consumer.poll(timeout_ms=int(cfg.get("poll_timeout_ms", 500)), max_records=int(cfg.get("max_records", 50)))
        recs = [[tp.topic, tp.partition, m.offset] for tp, ms in batches.items() for m in ms]
        with lock:
            st.processed_batch(recs)
        if recs and cfg.get("commit", "batch") == "batch":
            commit()
    consumer.close()
    emit("closed")


# --- groupstream (our consumer) ------------------------------------------------------------------------------


def run_groupstream(cfg: dict[str, Any], cmds: Commands) -> None:
    from groupstream import Consumer

    st = State(cfg)

    class Listener:  # runs on this thread, inside poll
        def on_partitions_revoked(self, revoked: Any) -> None:
            st.revoked(revoked)

        def on_partitions_assigned(self, assigned: Any) -> None:
            st.assigned(assigned)

        def on_partitions_lost(self, lost: Any) -> None:
            st.revoked(lost, "lost")

    conf = kafka_properties(cfg)
    conf.update({"max.poll.records": int(cfg.get("max_records", 50)), "metadata.max.age.ms": 2000})
    consumer = Consumer(conf)
    consumer.subscribe(list(cfg["topics"]), listener=Listener())

    def commit() -> None:
        error = commit_pending(st, consumer.commit)
        if getattr(error, "name", "") == "FENCED_INSTANCE_ID":
            emit("error", err="FENCED_INSTANCE_ID", msg=str(error), fatal=True)

    while True:
        cmd = cmds.get()
        if cmd == "close":
            break
        if cmd == "commit":
            commit()
        try:
            records = consumer.poll(0.5)
        except Exception as e:  # a fatal error (a fenced static member): stop, as an application must
            emit("error", err=getattr(e, "name", type(e).__name__), msg=str(e), fatal=True)
            break
        recs = [[r.topic, r.partition, r.offset] for r in records]
        st.processed_batch(recs)
        if recs and cfg.get("commit", "batch") == "batch":
            commit()
    consumer.close()
    emit("closed")


# --- aiokafka --------------------------------------------------------------------------------------------


def run_aiokafka(cfg: dict[str, Any], cmds: Commands) -> None:
    asyncio.run(_aiokafka(cfg, cmds))


async def _aiokafka(cfg: dict[str, Any], cmds: Commands) -> None:
    from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition
    from aiokafka.coordinator.assignors.range import RangePartitionAssignor
    from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

    assignors = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor}
    st = State(cfg)

    class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
        async def on_partitions_revoked(self, revoked: Any) -> None:
            st.set_owned(st.owned - {(tp.topic, tp.partition) for tp in revoked}, "revoke")

        async def on_partitions_assigned(self, assigned: Any) -> None:
            # aiokafka hands over the whole assignment each time (eager only)
            st.set_owned({(tp.topic, tp.partition) for tp in assigned}, "assign")

    consumer = AIOKafkaConsumer(
        bootstrap_servers=cfg["bootstrap"],
        group_id=cfg["group"],
        client_id=cfg.get("name", "member"),
        partition_assignment_strategy=(assignors[cfg.get("strategy", "range")],),
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        session_timeout_ms=cfg.get("session_timeout_ms", 6000),
        heartbeat_interval_ms=cfg.get("heartbeat_ms", 500),
        max_poll_interval_ms=cfg.get("max_poll_interval_ms", 60000),
        metadata_max_age_ms=2000,
    )
    consumer.subscribe(list(cfg["topics"]), listener=Listener())
    await consumer.start()

    async def commit() -> None:
        offsets = dict(st.pending)
        if not offsets:
            return
        sent = time.monotonic()
        emit("committing", t=sent, offsets=_rows(offsets))
        try:
            await consumer.commit({TopicPartition(t, p): o for (t, p), o in offsets.items()})
        except Exception as e:
            emit("commit", sent=sent, ok=False, err=type(e).__name__, offsets=_rows(offsets))
            return
        emit("commit", sent=sent, ok=True, err=None, offsets=_rows(offsets))
        for tp, o in offsets.items():
            if st.pending.get(tp) == o:
                del st.pending[tp]

    try:
        while True:
            cmd = cmds.get()
            if cmd == "close":
                break
            if cmd == "commit":
                await commit()
            batches = await consumer.getmany(timeout_ms=100, max_records=int(cfg.get("max_records", 50)))
            recs = [[tp.topic, tp.partition, m.offset] for tp, ms in batches.items() for m in ms]
            st.processed_batch(recs)
            if recs and cfg.get("commit", "batch") == "batch":
                await commit()
    finally:
        await consumer.stop()
    emit("closed")


DRIVERS = {"confluent": run_confluent, "kafka-python": run_kafka_python, "aiokafka": run_aiokafka,
           "groupstream": run_groupstream}


def main() -> None:
    cfg = json.loads(sys.argv[1])
    if os.environ.get("GROUP_MEMBER_DEBUG"):  # client logs on stderr (the harness keeps them per member)
        import logging

        logging.basicConfig(level=logging.DEBUG, stream=sys.stderr)
    emit("start", pid=os.getpid(), name=cfg.get("name"))
    DRIVERS[cfg["client"]](cfg, Commands())


if __name__ == "__main__":
    main()
