"""The region's Kafka output (issue 17, ``region/kafka_output.py``) driven directly against our broker, as a
member drives it: an interval's transaction prepared at a checkpoint stays invisible to read_committed until
the region's checkpoint completes, while the next interval writes on another slot; a reset commits what its
checkpoint covers and aborts the rest; a new incarnation of a member killed mid-interval fences the transaction
it left open, so the last stable offset moves on at once instead of after the transaction timeout."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

from groupstream import Consumer
from groupstream.client.admin import Admin, NewTopic
from groupstream.region.kafka_output import KafkaCheckpointedSink
from support.brokers import BrokerProcess
from support.waiting import wait_until


def _committed(c: Consumer, got: list[bytes], settle_s: float = 1.0) -> list[bytes]:
    end = time.monotonic() + settle_s
    while time.monotonic() < end:
        got.extend(r.value for r in c.poll(0.2))
    return sorted(got)


def _rows(*values: bytes) -> list[dict[str, bytes]]:
    return [{"key": v, "value": v} for v in values]


def test_checkpoints_commit_resets_abort_and_a_new_incarnation_fences(
    groupstream_broker: BrokerProcess, tmp_path: Path
) -> None:
    bs = groupstream_broker.bootstrap
    out = f"rko-{uuid.uuid4().hex[:6]}"
    with Admin({"bootstrap.servers": bs}) as admin:
        admin.create_topics([NewTopic(out, 1)])
    # a long transaction timeout: only fencing can end a transaction within this test
    config = {"bootstrap.servers": bs, "transaction.timeout.ms": 600_000}
    prefix = f"rko-{uuid.uuid4().hex[:6]}"
    sink = KafkaCheckpointedSink(config, out, tmp_path, "m1", prefix=prefix)
    reader = Consumer({"bootstrap.servers": bs, "group.id": f"rko-{uuid.uuid4().hex[:6]}",
                       "isolation.level": "read_committed", "enable.auto.commit": False})  # fmt: skip
    got: list[bytes] = []
    try:
        reader.assign([(out, 0)], offsets={(out, 0): 0})
        sink.write(_rows(b"a", b"b"))
        sink.prepare(1)
        assert sink.has_prepared()
        sink.write(_rows(b"c"))  # the next interval, while checkpoint 1 is not complete yet: another slot
        sink.prepare(2)
        assert sorted(p.name for p in (tmp_path / "_prepared").iterdir()) == ["000000000001-m1.json",
                                                                              "000000000002-m1.json"]  # fmt: skip
        assert _committed(reader, got) == []
        assert sink.commit(1) == 1
        wait_until(lambda: _committed(reader, got, 0.3) == [b"a", b"b"], 20, "checkpoint 1's records")
        sink.write(_rows(b"d"))  # open, never prepared
        sink.reset(1)  # back to checkpoint 1: checkpoint 2 and the open interval are aborted
        assert not sink.has_prepared()
        sink.write(_rows(b"e"))
        sink.prepare(3)
        sink.commit(3)
        wait_until(lambda: _committed(reader, got, 0.3) == [b"a", b"b", b"e"], 20, "checkpoint 3's records")

        # killed mid-interval: a transaction is left open (holding the LSO), and one prepared for checkpoint 4
        sink.write(_rows(b"f"))
        sink.prepare(4)
        sink.write(_rows(b"g"))
        assert sink._producer is not None and sink._producer.flush(10) == 0  # on the broker, in the transaction
        sink._producer = None  # the process dies without a word: nothing ends its transaction
        with Admin({"bootstrap.servers": bs}) as admin:
            ongoing = [t.transactional_id for t in admin.list_transactions(["Ongoing"])
                       if t.transactional_id.startswith(prefix)]  # fmt: skip
        assert sorted(ongoing) == [f"{prefix}-m1-0", f"{prefix}-m1-1"]
        reborn = KafkaCheckpointedSink(config, out, tmp_path, "m1", prefix=prefix)
        reborn.reset(4)  # checkpoint 4 completed: its transaction is committed, the open one fenced
        sink.write(_rows(b"h"))  # the old incarnation writes on: the new one's next interval fences it
        reborn.write(_rows(b"i"))
        reborn.prepare(5)
        reborn.commit(5)
        wait_until(lambda: _committed(reader, got, 0.3) == [b"a", b"b", b"e", b"f", b"i"], 20,
                   "checkpoint 4 and 5's records, past the fenced transaction")  # fmt: skip
        with Admin({"bootstrap.servers": bs}) as admin:
            left = [t.transactional_id for t in admin.list_transactions(["Ongoing"])
                    if t.transactional_id.startswith(prefix)]  # fmt: skip
        assert left == []
    finally:
        reader.close()
        sink.close()
