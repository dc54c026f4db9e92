"""Reading a topic's output at read_committed, with our Consumer and with confluent-kafka, and the exactly-once
check the transaction tests make of what was read."""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import Iterable

from groupstream import Consumer
from support.waiting import wait_until


def read_committed_ours(bootstrap: str, topic: str, partitions: int, expected: int, timeout_s: float = 120) -> list[bytes]:
    """Every value our read_committed Consumer reads from offset 0 until ``expected`` arrived, and then one more
    second (so a duplicate after them is seen too)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"rc-{uuid.uuid4().hex[:8]}",
                  "isolation.level": "read_committed", "enable.auto.commit": False})  # fmt: skip
    got: list[bytes] = []
    try:
        c.assign([(topic, p) for p in range(partitions)], offsets={(topic, p): 0 for p in range(partitions)})

        def read() -> bool:
            got.extend(r.value for r in c.poll(0.5))
            return len(got) >= expected

        wait_until(read, timeout_s, f"our read_committed consumer to read {expected} records", interval_s=0)
        end = time.monotonic() + 1.0
        while time.monotonic() < end:
            got.extend(r.value for r in c.poll(0.2))
    finally:
        c.close()
    return got


def read_committed_confluent(
    bootstrap: str, topic: str, partitions: int, expected: int, timeout_s: float = 120
) -> list[bytes]:
    """The same with confluent-kafka's consumer (isolation.level=read_committed)."""
    return confluent_values(bootstrap, topic, partitions, expected, "read_committed", timeout_s)


def confluent_values(
    bootstrap: str, topic: str, partitions: int, expected: int, isolation: str, timeout_s: float
) -> list[bytes]:
    """Every value of ``topic`` (its ``partitions`` assigned from offset 0: no group to join) read by
    confluent-kafka at ``isolation``, until ``expected`` were read and one more second adds nothing."""
    import confluent_kafka as ck

    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": f"rc-ck-{uuid.uuid4().hex[:8]}",
                     "isolation.level": isolation, "enable.auto.commit": False})  # fmt: skip
    got: list[bytes] = []
    try:
        c.assign([ck.TopicPartition(topic, p, 0) for p in range(partitions)])

        def read() -> bool:
            for m in c.consume(10_000, 0.5):
                assert m.error() is None, m.error()
                got.append(m.value())
            return len(got) >= expected

        wait_until(read, timeout_s, f"confluent-kafka ({isolation}) to read {expected} records of {topic}",
                   interval_s=0)  # fmt: skip
        end = time.monotonic() + 1.0
        while time.monotonic() < end:
            got.extend(m.value() for m in c.consume(10_000, 0.2) if m.error() is None)
    finally:
        c.close()
    return got


def assert_exactly_once(got: list[bytes], expected: Iterable[bytes]) -> None:
    """Each expected value read exactly once, and nothing else."""
    counts = Counter(got)
    wanted = set(expected)
    doubled = sorted(v for v, n in counts.items() if n > 1)
    assert not doubled, f"{len(doubled)} records twice, e.g. {doubled[:5]}"
    missing = sorted(wanted - set(counts))
    assert not missing, f"{len(missing)} records missing, e.g. {missing[:5]}"
    assert set(counts) == wanted
