"""Our broker's CPU time (user + system, from /proc) per fetch of a whole topic by confluent-kafka: what the
broker spends on the fetch path itself, which throughput ratios on a shared two-core machine only show through
the scheduler's noise (issue 13, zero-copy Fetch).

One broker (``log.flush.policy=os``), one topic of ``--records`` values of ``--value-size`` bytes in 6
partitions, read ``--reads`` times from offset 0 in assign mode (kit.confluent_fetch: every value touched).
Prints each read's broker CPU seconds and records/s, sorted. To compare two versions of the broker in one
sitting, run it with ``PYTHONPATH`` pointing at the other version's ``src`` (``git archive <commit> src``)
and without, alternately.

    .venv/bin/python bench/broker_fetch_cpu.py [--records 200000] [--value-size 1024] [--reads 5] [--label new]
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

from kit import Broker, Case, confluent_fetch, confluent_produce, create_topic, os_load, process_cpu

PARTITIONS = 6


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--value-size", type=int, default=1024)
    ap.add_argument("--reads", type=int, default=5)
    ap.add_argument("--label", default="groupstream")
    args = ap.parse_args()
    case = Case(args.records, args.value_size)
    with tempfile.TemporaryDirectory() as d:
        broker = Broker("groupstream", Path(d), {"log.flush.policy": "os"})
        with broker:
            pid = broker._proc.pid  # the bench kit keeps the process to itself
            create_topic(broker.bootstrap, "fetch-cpu", PARTITIONS)
            confluent_produce(broker.bootstrap, "fetch-cpu", case.records, os.urandom(case.value_size))
            runs = []
            for _ in range(args.reads):
                before = process_cpu(pid)
                elapsed = confluent_fetch(broker.bootstrap, "fetch-cpu", case, PARTITIONS)
                runs.append((process_cpu(pid) - before, case.records / elapsed))
    cpu = ", ".join(f"{c:.2f}" for c, _ in sorted(runs))
    rates = ", ".join(f"{r:,.0f}" for _, r in sorted(runs, key=lambda x: x[1]))
    print(f"{args.label}: {case}, load {os_load()}: broker CPU s per fetch {cpu}; fetch rec/s {rates}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
