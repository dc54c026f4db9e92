"""Capture golden Kafka frames from real clients.

Drives each client (confluent-kafka, kafka-python, aiokafka, kcat) through a short produce/consume session
against a broker, through `support.capture.CaptureProxy`, and writes every frame to
``tests/protocol/golden/<client>/<NNN>-<api>-v<version>-<req|resp>.bin`` (payload without the size prefix)
with a ``MANIFEST.json`` saying which client, broker and versions produced them.

    .venv/bin/python tests/protocol/golden/capture.py [--broker tansu|groupstream] [--clients a,b] [--out DIR]

The session: create a 3-partition topic (admin API; kcat relies on auto-create), produce 10 keyed records
idempotently with acks=all and zstd, 10 more with acks=1 and gzip, then read them back in assign mode from the
beginning and ask for the end offsets. Against Tansu, Debian's kcat cannot read Tansu's ApiVersions v3 answer,
so for kcat that one response is rewritten without its default-valued tagged fields (flagged ``rewritten`` in
the manifest); and aiokafka produces without idempotence (Tansu fails aiokafka's InitProducerId v0).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))  # tests/, for `support`

from support.brokers import BrokerKind, BrokerProcess, tansu_binary  # noqa: E402
from support.capture import CapturedFrame, CaptureProxy, canonical_api_versions  # noqa: E402
from support.kafka_apis import api_name  # noqa: E402

CLIENTS = ("confluent", "kafka-python", "aiokafka", "kcat")
TOPIC = "golden"
PARTITIONS = 3
# At most this many requests of one (api, version) are kept per client, with their responses; a fetch
# long-poll loop would otherwise write hundreds of near-identical frames.
MAX_PER_API_VERSION = 6


def records(tag: str, n: int = 10) -> list[tuple[bytes, bytes]]:
    return [(f"key-{i % 4}".encode(), f"{tag}-value-{i}".encode()) for i in range(n)]


# -- sessions ------------------------------------------------------------------------------------------------


def session_confluent(bootstrap: str, idempotent: bool) -> str:
    import confluent_kafka
    from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(30)
    for conf, tag in (
        ({"acks": "all", "enable.idempotence": idempotent, "compression.type": "zstd"}, "zstd"),
        ({"acks": "1", "compression.type": "gzip"}, "gzip"),
    ):
        p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **conf})
        for k, v in records(tag):
            p.produce(TOPIC, value=v, key=k)
        assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "golden-reader", "enable.auto.commit": False})
    c.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    got = 0
    deadline = time.monotonic() + 30
    while got < 20 and time.monotonic() < deadline:
        got += sum(1 for m in c.consume(100, 0.5) if m.error() is None)
    for partition in range(PARTITIONS):
        c.get_watermark_offsets(TopicPartition(TOPIC, partition), timeout=10, cached=False)
    c.close()
    assert got == 20, f"confluent read {got} of 20 records"
    return f"confluent-kafka {confluent_kafka.__version__} (librdkafka {confluent_kafka.libversion()[0]})"


def session_kafka_python(bootstrap: str, idempotent: bool) -> str:
    import kafka
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(TOPIC, num_partitions=PARTITIONS, replication_factor=1)])
    admin.close()
    for kw, tag in (
        ({"acks": "all", "enable_idempotence": idempotent, "compression_type": "zstd"}, "zstd"),
        ({"acks": 1, "enable_idempotence": False, "compression_type": "gzip"}, "gzip"),
    ):
        p = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, **kw)
        futures = [p.send(TOPIC, key=k, value=v) for k, v in records(tag)]
        p.flush(30)
        for f in futures:
            f.get(10)
        p.close()
    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False)
    tps = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
    c.assign(tps)
    c.seek_to_beginning(*tps)
    got = 0
    deadline = time.monotonic() + 30
    while got < 20 and time.monotonic() < deadline:
        got += sum(len(v) for v in c.poll(timeout_ms=500).values())
    c.end_offsets(tps)
    c.close()
    assert got == 20, f"kafka-python read {got} of 20 records"
    return f"kafka-python {kafka.__version__}"


def session_aiokafka(bootstrap: str, idempotent: bool) -> str:
    import aiokafka
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    async def run() -> int:
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await admin.start()
        await admin.create_topics([NewTopic(TOPIC, num_partitions=PARTITIONS, replication_factor=1)])
        await admin.close()
        for kw, tag in (
            ({"acks": "all", "enable_idempotence": idempotent, "compression_type": "zstd"}, "zstd"),
            ({"acks": 1, "compression_type": "gzip"}, "gzip"),
        ):
            p = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, **kw)
            await p.start()
            try:
                futures = [await p.send(TOPIC, key=k, value=v) for k, v in records(tag)]
                await asyncio.gather(*futures)
            finally:
                await p.stop()
        c = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False)
        await c.start()
        try:
            tps = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
            c.assign(tps)
            await c.seek_to_beginning(*tps)
            got = 0
            async with asyncio.timeout(30):
                while got < 20:
                    got += sum(len(v) for v in (await c.getmany(timeout_ms=500)).values())
            await c.end_offsets(tps)
            return got
        finally:
            await c.stop()

    got = asyncio.run(run())
    assert got == 20, f"aiokafka read {got} of 20 records"
    return f"aiokafka {aiokafka.__version__}"


def session_kcat(bootstrap: str, idempotent: bool) -> str:
    kcat = shutil.which("kcat")
    assert kcat, "kcat is not installed (apt-get install kcat)"
    for extra, tag in (
        (["-X", "acks=all", "-X", f"enable.idempotence={str(idempotent).lower()}", "-X", "compression.codec=zstd"], "zstd"),
        (["-X", "acks=1", "-X", "compression.codec=gzip"], "gzip"),
    ):
        lines = b"".join(k + b"\t" + v + b"\n" for k, v in records(tag))
        subprocess.run([kcat, "-P", "-b", bootstrap, "-t", TOPIC, "-K", "\t", *extra], input=lines, check=True, timeout=60)
    out = subprocess.run(
        [kcat, "-C", "-b", bootstrap, "-t", TOPIC, "-o", "beginning", "-e", "-q", "-f", "%s\n"],
        check=True, capture_output=True, timeout=60,
    ).stdout  # fmt: skip
    assert len(out.splitlines()) == 20, f"kcat read {len(out.splitlines())} of 20 records"
    subprocess.run([kcat, "-L", "-b", bootstrap, "-t", TOPIC], check=True, capture_output=True, timeout=60)
    version = subprocess.run([kcat, "-V"], capture_output=True, text=True, check=True).stdout.splitlines()
    return "kcat " + next((line.strip() for line in version if line.startswith("Version")), "?")


SESSIONS: dict[str, Callable[[str, bool], str]] = {
    "confluent": session_confluent,
    "kafka-python": session_kafka_python,
    "aiokafka": session_aiokafka,
    "kcat": session_kcat,
}


# -- capture and write ---------------------------------------------------------------------------------------


def broker_version(kind: BrokerKind) -> str:
    if kind is BrokerKind.TANSU:
        return subprocess.run([tansu_binary(), "-V"], capture_output=True, text=True, check=True).stdout.strip()
    import groupstream

    return f"groupstream {getattr(groupstream, '__version__', '?')}"


def select(frames: list[CapturedFrame]) -> list[CapturedFrame]:
    """Known-api frames, at most MAX_PER_API_VERSION requests per (api, version) with their responses."""
    kept_requests: set[tuple[int, int]] = set()  # (conn, correlation id)
    count: Counter[tuple[int, int]] = Counter()
    out = []
    for f in frames:
        if f.api_key < 0:
            continue
        if f.direction == "req":
            if count[(f.api_key, f.api_version)] >= MAX_PER_API_VERSION:
                continue
            count[(f.api_key, f.api_version)] += 1
            kept_requests.add((f.conn, f.correlation_id))
            out.append(f)
        elif (f.conn, f.correlation_id) in kept_requests:
            out.append(f)
    return out


def capture_client(client: str, kind: BrokerKind, out_root: Path, workdir: Path) -> int:
    rewrite = canonical_api_versions if (client == "kcat" and kind is BrokerKind.TANSU) else None
    idempotent = not (client == "aiokafka" and kind is BrokerKind.TANSU)
    with CaptureProxy(rewrite_response=rewrite) as proxy:
        broker = BrokerProcess(kind, workdir / client, advertised_port=proxy.port, settings={"num.partitions": "3"})
        with broker:
            proxy.start(broker.host, broker.port)
            client_version = SESSIONS[client](proxy.address, idempotent)
        frames = select(proxy.frames())
        assert not proxy.errors, proxy.errors
    target = out_root / client
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    entries = []
    for n, f in enumerate(frames):
        name = f"{n:03d}-{api_name(f.api_key)}-v{f.api_version}-{f.direction}.bin"
        (target / name).write_bytes(f.payload)
        entries.append(
            {
                "file": name,
                "direction": f.direction,
                "api_key": f.api_key,
                "api_version": f.api_version,
                "correlation_id": f.correlation_id,
                "connection": f.conn,
                "rewritten": f.rewritten,
            }
        )
    manifest = {
        "client": client_version,
        "broker": broker_version(kind),
        "broker_kind": str(kind),
        "captured": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "session": "create topic (3 partitions); produce 10 records acks=all idempotent zstd, 10 acks=1 gzip; "
        "assign-mode read from the beginning; end offsets",
        "idempotent": idempotent,
        "frames": entries,
    }
    (target / "MANIFEST.json").write_text(json.dumps(manifest, indent=1) + "\n")
    return len(frames)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--broker", default="tansu", choices=[k.value for k in BrokerKind])
    ap.add_argument("--clients", default=",".join(CLIENTS))
    ap.add_argument("--out", type=Path, default=HERE)
    args = ap.parse_args()
    kind = BrokerKind(args.broker)
    with tempfile.TemporaryDirectory(prefix="golden-") as tmp:
        for client in args.clients.split(","):
            n = capture_client(client, kind, args.out, Path(tmp))
            print(f"{client}: {n} frames -> {args.out / client}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
