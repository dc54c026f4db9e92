"""Client throughput in one run, same broker, same data, two ways: every client with its own defaults, and every
client with matched settings. Consumers: our ``poll`` and ``poll_arrow``, confluent-kafka, aiokafka,
kafka-python. Producers: our ``produce`` (and, where the producer has them, ``produce_batch`` and
``produce_arrow``), confluent-kafka, aiokafka, kafka-python.

Why two tables: one setting can cripple a peer (librdkafka batches up to 1 MB by default, Java and we 16 KB;
aiokafka defaults to acks=1 and no linger), so a single "same settings" table is not a fair comparison, and
defaults alone hide what a setting is worth.

Consumers read a whole topic in assign mode from offset 0, timed from the first poll to the last record; every
record's value is touched (its length summed, from a Python object per record or, for Arrow, from the value
column's offsets) and the sum must equal the bytes produced. Defaults: each client's idiomatic call with its
default batch (our ``poll``/``poll_arrow`` with ``max.poll.records``, confluent's ``poll`` of one message,
aiokafka's ``getmany``, kafka-python's ``poll``). Matched: 10,000 records per call for all.

Producers send ``--records`` keyed records (1,024 distinct keys, one random value of the data set's size) to a
fresh topic of ``--partitions`` partitions, fire and forget, timed from the first produce call to the end of the
flush that waits for the last acknowledgement; afterwards the topic's end offsets must add up to the records
sent. Each client is connected (one record produced and acknowledged) before the clock starts, after an
``os.sync()``: our broker fsyncs before it acknowledges acks=all, and the page cache left dirty by the client
before would otherwise slow the next one's fsyncs. Defaults: only
``bootstrap.servers``. Matched: acks=all, idempotence on, linger 5 ms, batch size ``--batch-size`` (librdkafka's
default, 1 MB, unless given), no compression. ``produce_arrow`` gets a ``pyarrow.Table`` of the same keys and
values, built before the clock starts (the caller already holds the data, as Spark does).

Ratios are taken within one run; the fastest of ``--repeat`` runs counts.

    .venv/bin/python bench/clients.py [--records 1000000] [--large-records 10000] [--partitions 6] [--repeat 2]
        [--batch-size 1048576] [--only consume|produce] [--write-results]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import producer as producer_bench
from kit import (
    command_line,
    confluent_produce,
    create_topic,
    java_client,
    machine,
    matched_producer,
    write_section,
)
from support.brokers import BrokerKind, BrokerProcess
from support.kafka_jars import kafka_version

MATCHED_POLL_RECORDS = 10_000
LINGER_MS = 5
KEYS = [b"key-%04d" % i for i in range(1024)]


@dataclass(frozen=True)
class Case:
    """One data set and one of the two setting regimes."""

    bootstrap: str
    topic: str
    partitions: int
    n: int
    size: int
    matched: bool
    batch_size: int


# --- consumers ---------------------------------------------------------------------------------------------------


def fill(bootstrap: str, topic: str, partitions: int, n: int, value: bytes) -> None:
    from groupstream.client.producer import Producer

    create_topic(bootstrap, topic, partitions)
    with Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1 << 20}) as p:
        for i in range(n):
            p.produce(topic, value, KEYS[i & 1023])
        left = p.flush(300)
    if left:
        raise RuntimeError(f"fill: {left} records not delivered")


def _check_bytes(name: str, c: Case, got: int, touched: int) -> None:
    if got != c.n or touched != c.n * c.size:
        raise RuntimeError(f"{name}: {got} records, {touched} value bytes; expected {c.n} and {c.n * c.size}")


def _touch(fetched: dict[Any, list[Any]]) -> tuple[int, int]:
    """Records and value bytes of one kafka-python or aiokafka poll (records by partition), every value touched."""
    got = touched = 0
    for records in fetched.values():
        for r in records:
            touched += len(r.value)
            got += 1
    return got, touched


def consume_groupstream(c: Case, arrow: bool = False) -> float:
    from groupstream import Consumer

    config: dict[str, Any] = {"bootstrap.servers": c.bootstrap, "auto.offset.reset": "earliest"}
    if c.matched:
        config["max.poll.records"] = MATCHED_POLL_RECORDS
    if arrow:  # imported before the clock starts, as the other clients' modules are
        import pyarrow.compute as pc

        import groupstream.client.consumer.arrow  # noqa: F401
    with Consumer(config) as consumer:
        consumer.assign([(c.topic, p) for p in range(c.partitions)])
        got = touched = 0
        start = time.perf_counter()
        if arrow:
            while got < c.n:
                batch = consumer.poll_arrow(5.0)
                got += batch.num_rows
                if batch.num_rows:
                    touched += pc.sum(pc.binary_length(batch.column("value"))).as_py()
        else:
            while got < c.n:
                for r in consumer.poll(5.0):
                    touched += len(r.value)
                    got += 1
        elapsed = time.perf_counter() - start
    _check_bytes("groupstream", c, got, touched)
    return elapsed


def consume_groupstream_arrow(c: Case) -> float:
    return consume_groupstream(c, arrow=True)


def consume_confluent(c: Case) -> float:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": c.bootstrap, "group.id": "bench", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})  # fmt: skip
    try:
        consumer.assign([TopicPartition(c.topic, p, 0) for p in range(c.partitions)])
        got = touched = 0
        start = time.perf_counter()
        if c.matched:
            while got < c.n:
                # no more than are left: consume() waits out its timeout for the number asked
                for m in consumer.consume(num_messages=min(MATCHED_POLL_RECORDS, c.n - got), timeout=5.0):
                    if m.error() is None:
                        touched += len(m.value() or b"")
                        got += 1
        else:
            while got < c.n:
                one = consumer.poll(5.0)
                if one is not None and one.error() is None:
                    touched += len(one.value() or b"")
                    got += 1
        elapsed = time.perf_counter() - start
    finally:
        consumer.close()
    _check_bytes("confluent", c, got, touched)
    return elapsed


def consume_kafka_python(c: Case) -> float:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=c.bootstrap, enable_auto_commit=False, auto_offset_reset="earliest"
    )
    try:
        consumer.assign([TopicPartition(c.topic, p) for p in range(c.partitions)])
        got = touched = 0
        max_records = MATCHED_POLL_RECORDS if c.matched else None
        start = time.perf_counter()
        while got < c.n:
            n, size = _touch(consumer.poll(timeout_ms=5000, max_records=max_records))
            got, touched = got + n, touched + size
        elapsed = time.perf_counter() - start
    finally:
        consumer.close()
    _check_bytes("kafka-python", c, got, touched)
    return elapsed


def consume_aiokafka(c: Case) -> float:
    async def run() -> float:
        from aiokafka import AIOKafkaConsumer, TopicPartition

        consumer = AIOKafkaConsumer(bootstrap_servers=c.bootstrap, enable_auto_commit=False,
                                    auto_offset_reset="earliest")  # fmt: skip
        await consumer.start()
        try:
            consumer.assign([TopicPartition(c.topic, p) for p in range(c.partitions)])
            got = touched = 0
            max_records = MATCHED_POLL_RECORDS if c.matched else None
            start = time.perf_counter()
            while got < c.n:
                n, size = _touch(await consumer.getmany(timeout_ms=5000, max_records=max_records))
                got, touched = got + n, touched + size
            elapsed = time.perf_counter() - start
        finally:
            await consumer.stop()
        _check_bytes("aiokafka", c, got, touched)
        return elapsed

    return asyncio.run(run())


def consume_java(c: Case, warm: bool = False) -> float:
    """Java's KafkaConsumer (bench/java/ClientBench.java), assign mode, every value touched; it checks the sums.
    ``warm``: the JVM reads the whole topic once, untimed, before the timed read (its JIT warmed up)."""
    props: dict[str, Any] = {"enable.auto.commit": "false", "auto.offset.reset": "earliest"}
    if c.matched:
        props["max.poll.records"] = MATCHED_POLL_RECORDS
    if warm:
        props["bench.warmup"] = "true"
    return java_client("consume", c.bootstrap, c.topic, c.partitions, c.n, c.size, props)


def consume_java_warm(c: Case) -> float:
    return consume_java(c, warm=True)


def consume_wire(c: Case) -> float:
    """Not a consumer: the ceiling of one. The topic read over one connection with nothing but Fetch requests of
    our codec (every partition in each, Java's default 1 MB a partition, one in flight, a blocking socket reading
    a response straight into its own buffer) and their responses parsed; records are counted from the batch
    headers, never decoded or checked, so values are not touched. What the broker delivers to a reader that does
    nothing else, beside which ``poll_arrow``'s rate shows how much of it a consumer keeps."""
    import socket

    from groupstream.protocol.connection import ClientConnection
    from groupstream.protocol.messages import APIS, by_name
    from groupstream.protocol.records import iter_record_batches

    fetch = by_name("Fetch")
    R: Any = fetch.Request
    T = R.FetchTopic
    host, port = c.bootstrap.rsplit(":", 1)
    conn = ClientConnection(APIS, "bench-wire")
    positions = dict.fromkeys(range(c.partitions), 0)
    got = 0
    with socket.create_connection((host, int(port))) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        start = time.perf_counter()
        while got < c.n:
            parts = [T.FetchPartition(partition=p, fetch_offset=o, partition_max_bytes=1 << 20)
                     for p, o in positions.items()]  # fmt: skip
            body = R(replica_id=-1, max_wait_ms=500, min_bytes=1, max_bytes=50 << 20, isolation_level=0, session_id=0,
                     session_epoch=-1, topics=[T(topic=c.topic, partitions=parts)], forgotten_topics_data=[])  # fmt: skip
            sock.sendall(conn.send_request(fetch, 12, body)[1])
            while (response := conn.next_response()) is None:
                n = sock.recv_into(conn.recv_buffer())  # a large response straight into its own buffer
                if not n:
                    raise RuntimeError("wire: the broker closed the connection")
                conn.advance(n)
            for pd in response[3].responses[0].partitions:
                for batch in iter_record_batches(pd.records or b"", check_crc=False):
                    h = batch.header
                    got += h.records_count
                    positions[pd.partition_index] = h.base_offset + h.last_offset_delta + 1
        elapsed = time.perf_counter() - start
    if got != c.n:
        raise RuntimeError(f"wire: {got} records, expected {c.n}")
    return elapsed


OPT_IN = {"java", "java warm"}  # run only when --clients names them
CONSUMERS: dict[str, Callable[[Case], float]] = {
    "groupstream poll": consume_groupstream,
    "groupstream poll_arrow": consume_groupstream_arrow,
    "confluent": consume_confluent,
    "aiokafka": consume_aiokafka,
    "kafka-python": consume_kafka_python,
    "java": consume_java,
    "java warm": consume_java_warm,
    "wire (no consumer)": consume_wire,
}


# --- producers ---------------------------------------------------------------------------------------------------


def end_offsets_total(bootstrap: str, topic: str, partitions: int) -> int:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-check"})
    try:
        return sum(
            consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)
        )
    finally:
        consumer.close()


def _groupstream_producer(c: Case) -> Any:
    from groupstream.client.producer import Producer

    config: dict[str, Any] = {"bootstrap.servers": c.bootstrap}
    if c.matched:
        config.update(matched_producer(LINGER_MS, c.batch_size))
    producer = Producer(config)
    producer.produce(c.topic, b"warm-up", KEYS[0]).result(30)  # connected, metadata, producer id
    return producer


def _groupstream_timed(c: Case, what: str, send: Callable[[Any], None]) -> float:
    """Seconds from ``send(producer)`` to the end of the flush after it; every record must be delivered."""
    with _groupstream_producer(c) as producer:
        start = time.perf_counter()
        send(producer)
        left = producer.flush(300)
        elapsed = time.perf_counter() - start
    if left:
        raise RuntimeError(f"{what}: {left} records not delivered")
    return elapsed


def produce_groupstream(c: Case, value: bytes, _table: Any) -> float:
    def send(producer: Any) -> None:
        produce, topic, keys = producer.produce, c.topic, KEYS
        for i in range(c.n):
            produce(topic, value, keys[i & 1023])

    return _groupstream_timed(c, "groupstream", send)


def produce_groupstream_batch(c: Case, value: bytes, _table: Any) -> float:
    records = [(KEYS[i & 1023], value) for i in range(c.n)]  # the caller's records, already in hand
    return _groupstream_timed(c, "groupstream produce_batch", lambda p: p.produce_batch(c.topic, records))


def produce_groupstream_arrow(c: Case, _value: bytes, table: Any) -> float:
    return _groupstream_timed(c, "groupstream produce_arrow", lambda p: p.produce_arrow(table, topic=c.topic))


def produce_confluent(c: Case, value: bytes, _table: Any) -> float:
    settings = matched_producer(LINGER_MS, c.batch_size) if c.matched else {}
    return confluent_produce(c.bootstrap, c.topic, c.n, value, settings=settings, keys=KEYS, count_acks=False,
                             warm_up=True)  # fmt: skip


def produce_java(c: Case, value: bytes, _table: Any, warm: bool = False) -> float:
    """Java's KafkaProducer (bench/java/ClientBench.java): the same keys, values of the same size. ``warm``: the
    JVM first produces the same run, untimed, to a topic of its own (its JIT warmed up)."""
    props = matched_producer(LINGER_MS, c.batch_size) if c.matched else {}
    props = {k: str(v).lower() if isinstance(v, bool) else v for k, v in props.items()}
    if warm:
        create_topic(c.bootstrap, f"{c.topic}-warm-up", c.partitions)
        props["bench.warmup.topic"] = f"{c.topic}-warm-up"
    return java_client("produce", c.bootstrap, c.topic, c.partitions, c.n, c.size, props)


def produce_java_warm(c: Case, value: bytes, table: Any) -> float:
    return produce_java(c, value, table, warm=True)


def produce_aiokafka(c: Case, value: bytes, _table: Any) -> float:
    from aiokafka import AIOKafkaProducer

    async def go() -> float:
        kwargs: dict[str, Any] = {"bootstrap_servers": c.bootstrap}
        if c.matched:
            kwargs.update(acks="all", enable_idempotence=True, linger_ms=LINGER_MS, max_batch_size=c.batch_size,
                          compression_type=None)  # fmt: skip
        producer = AIOKafkaProducer(**kwargs)
        await producer.start()
        try:
            await producer.send_and_wait(c.topic, b"warm-up", KEYS[0])
            send = producer.send
            topic = c.topic
            keys = KEYS
            start = time.perf_counter()
            for i in range(c.n):
                await send(topic, value, keys[i & 1023])
            await producer.flush()
            return time.perf_counter() - start
        finally:
            await producer.stop()

    return asyncio.run(go())


def produce_kafka_python(c: Case, value: bytes, _table: Any) -> float:
    from kafka import KafkaProducer

    kwargs: dict[str, Any] = {"bootstrap_servers": c.bootstrap}
    if c.matched:
        kwargs.update(acks="all", enable_idempotence=True, linger_ms=LINGER_MS, batch_size=c.batch_size,
                      compression_type=None)  # fmt: skip
    producer = KafkaProducer(**kwargs)
    try:
        producer.send(c.topic, b"warm-up", KEYS[0]).get(30)
        send = producer.send
        topic = c.topic
        keys = KEYS
        start = time.perf_counter()
        for i in range(c.n):
            send(topic, value, keys[i & 1023])
        producer.flush(300)
        return time.perf_counter() - start
    finally:
        producer.close()


def producers() -> dict[str, Callable[[Case, bytes, Any], float]]:
    from groupstream.client.producer import Producer

    out: dict[str, Callable[[Case, bytes, Any], float]] = {"groupstream produce": produce_groupstream}
    if hasattr(Producer, "produce_batch"):
        out["groupstream produce_batch"] = produce_groupstream_batch
    if hasattr(Producer, "produce_arrow"):
        out["groupstream produce_arrow"] = produce_groupstream_arrow
    out.update(confluent=produce_confluent, aiokafka=produce_aiokafka)
    out["kafka-python"] = produce_kafka_python
    out["java"] = produce_java
    out["java warm"] = produce_java_warm
    return out


def arrow_table(n: int, value: bytes) -> Any:
    import pyarrow as pa

    keys = pa.array([KEYS[i & 1023] for i in range(n)], pa.binary())
    values = pa.array([value] * n, pa.binary())
    return pa.table({"key": keys, "value": values})


# --- tables ------------------------------------------------------------------------------------------------------


def table(title: str, best: dict[str, float], n: int, size: int, ours: str) -> str:
    lines = [f"| {title} ({n:,} x {size} B) | records/s | MB/s | ours / client |", "|---|---:|---:|---:|"]
    base = best.get(ours)
    for name, seconds in best.items():
        rps = n / seconds
        ratio = f"{(n / base) / rps:.2f}x" if base is not None else ""
        lines.append(f"| {name} | {rps:,.0f} | {rps * size / 1e6:.1f} | {ratio} |")
    return "\n".join(lines)


def regime(matched: bool, batch_size: int) -> str:
    if not matched:
        return "own defaults"
    return f"matched: acks=all, idempotent, linger {LINGER_MS} ms, batch {batch_size:,} B"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--large-records", type=int, default=10_000)
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=1 << 20, help="batch size of the matched producers")
    ap.add_argument("--only", choices=("consume", "produce"), help="run one half only")
    ap.add_argument("--clients", help="comma-separated subset of the client names in the tables (java: only when "
                                      "named, as Java's KafkaConsumer/KafkaProducer 4.x in bench/java/ClientBench.java)")
    ap.add_argument("--section", default="clients", help="the RESULTS.md section to write (a subset's own)")
    ap.add_argument("--write-results", action="store_true")
    args = ap.parse_args()
    env = f"{machine()}; {producer_bench.versions()}"
    load_at_start = " ".join(f"{x:.1f}" for x in os.getloadavg())
    print(env, flush=True)
    wanted = None if args.clients is None else {s.strip() for s in args.clients.split(",")}

    def runs(name: str) -> bool:
        return name not in OPT_IN if wanted is None else name in wanted

    sections = []
    with tempfile.TemporaryDirectory(prefix="bench-clients-") as tmp, \
            BrokerProcess(BrokerKind.GROUPSTREAM, Path(tmp), start_timeout=60) as broker:  # fmt: skip
        bs = broker.bootstrap
        for n, size in ((args.records, 100), (args.large_records, 10_240)):
            if n == 0:
                continue
            value = os.urandom(size)
            if args.only != "produce":
                topic = f"bench-consume-{size}"
                fill(bs, topic, args.partitions, n, value)
                for matched in (False, True):
                    best: dict[str, float] = {}
                    for r in range(args.repeat):
                        for name, fn in CONSUMERS.items():
                            if not runs(name):
                                continue
                            seconds = fn(Case(bs, topic, args.partitions, n, size, matched, args.batch_size))
                            best[name] = min(best.get(name, seconds), seconds)
                            print(f"  consume {size} B {'matched' if matched else 'defaults'} run {r + 1}: "
                                  f"{name:<26} {n / seconds:>12,.0f} records/s", flush=True)  # fmt: skip
                    sections.append(table(f"consume, {regime(matched, 0).split(':')[0]}", best, n, size,
                                          "groupstream poll"))  # fmt: skip
                    if "groupstream poll" in best and "groupstream poll_arrow" in best:  # issue 14's target: >= 3x
                        arrow_over_poll = best["groupstream poll"] / best["groupstream poll_arrow"]
                        sections[-1] += f"\n\n`poll_arrow` / `poll`: {arrow_over_poll:.2f}x"
                    if "groupstream poll_arrow" in best and "wire (no consumer)" in best:
                        kept = best["wire (no consumer)"] / best["groupstream poll_arrow"]
                        sections[-1] += f"; `poll_arrow` / wire: {kept:.2f}x"
            if args.only != "consume":
                table_arrow = arrow_table(n, value)
                for matched in (False, True):
                    pbest: dict[str, float] = {}
                    for r in range(args.repeat):
                        for name, pfn in producers().items():
                            if not runs(name):
                                continue
                            topic = (
                                f"bench-produce-{size}-{'m' if matched else 'd'}-{name.replace(' ', '-')}-{r}"
                            )
                            create_topic(bs, topic, args.partitions)
                            os.sync()  # the broker fsyncs acks=all writes: no client pays for an earlier one's
                            case = Case(bs, topic, args.partitions, n, size, matched, args.batch_size)
                            seconds = pfn(case, value, table_arrow)
                            landed = end_offsets_total(bs, topic, args.partitions) - 1  # less the warm-up
                            if landed != n:
                                raise RuntimeError(f"{name}: {landed} records in the topic, {n} produced")
                            pbest[name] = min(pbest.get(name, seconds), seconds)
                            print(f"  produce {size} B {'matched' if matched else 'defaults'} run {r + 1}: "
                                  f"{name:<26} {n / seconds:>12,.0f} records/s", flush=True)  # fmt: skip
                    sections.append(table(f"produce, {regime(matched, args.batch_size)}", pbest, n, size,
                                          "groupstream produce"))  # fmt: skip
    text = "\n\n".join(sections)
    print(text)
    if args.write_results:
        title = "" if args.section == "clients" else f": {args.clients}"
        java = "" if not (runs("java") or runs("java warm")) else (
            " Java: KafkaConsumer/KafkaProducer of kafka-clients " + kafka_version() + " (bench/java/ClientBench.java, "
            "compiled with javac at run time), a fresh JVM with its default options per run, timing itself the way "
            "the Python clients are timed (the JVM start and the warm-up record are not counted); `java warm` first runs "
            "the same produce (to a topic of its own) or read, untimed, in the same JVM, so its JIT has compiled "
            "the client's hot paths.")  # fmt: skip
        write_section(args.section, f"## Client throughput{title} (`bench/clients.py`)\n\n{env}. One broker (ours), "
                                    f"one run, {args.partitions} partitions; fastest of {args.repeat}. Consumers in "
                                    f"assign mode from offset 0, touching every value. Producers: keyed records, "
                                    f"fire and forget, timed to the end of flush.{java} Load average (1, 5, 15 min) "
                                    f"at the start: {load_at_start}; at the end: "
                                    f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}.\n\nCommand: "
                                    f"`{command_line('clients.py')}`\n\n{text}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
