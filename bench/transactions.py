"""Transactional produce throughput, ours against confluent-kafka on the same broker, and read_committed against
read_uncommitted consume rates (issue 17).

Produce: ``--records`` records of ``--value-size`` bytes in transactions of ``--txn-sizes`` records each
(begin, produce, commit; the clock runs from the first begin to the last commit), one partition set, the
producers' matched settings (acks=all, idempotence, linger 5 ms, batch 1 MB). Each client gets its own topic
and transactional id; the runs alternate (``--rounds``) and the best round counts. Consume: our Consumer reads
the committed topic from offset 0 at each isolation level (assigned, no group) (the same records: every transaction committed, so
read_committed must skip nothing but the markers), best of the rounds.

    .venv/bin/python bench/transactions.py --broker apache --records 100000 --txn-sizes 100,10000
"""

from __future__ import annotations

import argparse
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from kit import (
    APACHE,
    broker_names,
    command_line,
    create_topic,
    environment,
    os_load,
    parse_ints,
    start_broker,
    write_section,
)

MATCHED = {"acks": "all", "linger.ms": 5, "batch.size": 1_000_000, "compression.type": "none"}
# "own": each client's defaults (only the transactional id is given); "matched": the same settings for both.
SETTINGS = {"own": {}, "matched": MATCHED}


def ours_produce(bootstrap: str, topic: str, records: int, value: bytes, txn_size: int, settings: str) -> float:
    from groupstream import Producer

    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"bench-{uuid.uuid4().hex}", **SETTINGS[settings]})
    try:
        p.init_transactions(60)
        produce = p.produce
        start = time.perf_counter()
        done = 0
        while done < records:
            n = min(txn_size, records - done)
            p.begin_transaction()
            for _ in range(n):
                produce(topic, value)
            p.commit_transaction(120)
            done += n
        return time.perf_counter() - start
    finally:
        p.close()


def confluent_produce(bootstrap: str, topic: str, records: int, value: bytes, txn_size: int, settings: str) -> float:
    from confluent_kafka import Producer

    p = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": f"bench-{uuid.uuid4().hex}", **SETTINGS[settings],
         "queue.buffering.max.messages": 1_000_000, "queue.buffering.max.kbytes": 1_048_576}
    )  # fmt: skip
    p.init_transactions(60)
    produce = p.produce
    start = time.perf_counter()
    done = 0
    while done < records:
        n = min(txn_size, records - done)
        p.begin_transaction()
        for _ in range(n):
            while True:
                try:
                    produce(topic, value)
                    break
                except BufferError:
                    p.poll(0.01)
        p.commit_transaction(120)
        done += n
    elapsed = time.perf_counter() - start
    p.flush(10)
    return elapsed


def ours_consume(bootstrap: str, topic: str, records: int, isolation: str, partitions: int, value_size: int) -> float:
    from groupstream import Consumer

    c = Consumer(
        {"bootstrap.servers": bootstrap, "isolation.level": isolation, "auto.offset.reset": "earliest"}
    )  # fmt: skip
    try:
        got = 0
        touched = 0
        start = time.perf_counter()
        c.assign([(topic, p) for p in range(partitions)], offsets={(topic, p): 0 for p in range(partitions)})
        deadline = time.monotonic() + 300
        while got < records:
            for r in c.poll(1.0):  # count a record by touching its value
                touched += len(r.value)
                got += 1
            if time.monotonic() > deadline:
                raise RuntimeError(f"{isolation}: stalled at {got} of {records}")
        elapsed = time.perf_counter() - start
        if touched != got * value_size:
            raise RuntimeError(f"{isolation}: {touched} value bytes for {got} records of {value_size} B")
        return elapsed
    finally:
        c.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--broker", default=APACHE, help="apache or groupstream (the broker both clients write to)")
    ap.add_argument("--bootstrap", default=None, help="a running broker instead of starting one")
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--value-size", type=int, default=100)
    ap.add_argument("--txn-sizes", default="100,10000")
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--settings", default="own,matched", help="own (each client's defaults), matched, or both")
    ap.add_argument("--section", default="transactions", help="the RESULTS.md section to write")
    ap.add_argument("--no-write", action="store_true", help="print, do not update bench/RESULTS.md")
    args = ap.parse_args()
    names = broker_names(args.broker, ap)
    value = b"x" * args.value_size
    rows: list[str] = []
    consume_rows: list[str] = []
    load_start = os_load()
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            broker: Any = None
            if args.bootstrap is None:
                broker = start_broker(name, Path(tmp)).__enter__()
            bootstrap = args.bootstrap or broker.bootstrap
            try:
                last_topic = ""
                for settings in args.settings.split(","):
                    for txn_size in parse_ints(args.txn_sizes):
                        best: dict[str, float] = {}
                        for _ in range(args.rounds):
                            for client, fn in (("ours", ours_produce), ("confluent", confluent_produce)):
                                topic = f"txn-{client}-{txn_size}-{uuid.uuid4().hex[:6]}"
                                create_topic(bootstrap, topic, args.partitions)
                                s = fn(bootstrap, topic, args.records, value, txn_size, settings)
                                best[client] = min(best.get(client, s), s)
                                if client == "ours":
                                    last_topic = topic
                        o, c = args.records / best["ours"], args.records / best["confluent"]
                        rows.append(f"| {name} | {settings} | {txn_size:,} | {o:,.0f} | {c:,.0f} | {o / c:.2f}x |")
                        print(rows[-1], flush=True)
                best_c: dict[str, float] = {}
                for _ in range(args.rounds):
                    for iso in ("read_uncommitted", "read_committed"):
                        s = ours_consume(bootstrap, last_topic, args.records, iso, args.partitions, args.value_size)
                        best_c[iso] = min(best_c.get(iso, s), s)
                u, rc = args.records / best_c["read_uncommitted"], args.records / best_c["read_committed"]
                consume_rows.append(f"| {name} | {u:,.0f} | {rc:,.0f} | {rc / u:.2f}x |")
                print(consume_rows[-1], flush=True)
            finally:
                if broker is not None:
                    broker.__exit__(None, None, None)
    text = "\n".join(
        [
            "## Transactions (issue 17): transactional produce and read_committed consume",
            "",
            f"`{command_line('transactions.py')}`",
            "",
            f"{environment()}; load average (1, 5, 15 min) {load_start} at the start, {os_load()} at the end "
            "(other sessions' work shares the two cores: read the ratios, each run alternates the clients)",
            "",
            f"{args.records:,} records of {args.value_size} B into {args.partitions} partitions, best of "
            f"{args.rounds} alternating rounds; records per second from the first begin_transaction to the last "
            "commit_transaction.",
            "",
            "Settings: `own` gives each client its defaults (only the transactional id), `matched` gives both "
            f"{', '.join(f'{k}={v}' for k, v in MATCHED.items())}.",
            "",
            "| broker | settings | records per transaction | ours (rec/s) | confluent-kafka (rec/s) | ours / confluent |",
            "|---|---|---:|---:|---:|---:|",
            *rows,
            "",
            "Our Consumer reading the last committed topic from offset 0, every value touched (records per second):",
            "",
            "| broker | read_uncommitted | read_committed | committed / uncommitted |",
            "|---|---:|---:|---:|",
            *consume_rows,
        ]
    )
    print(text)
    if not args.no_write:
        write_section(args.section, text)


if __name__ == "__main__":
    main()
