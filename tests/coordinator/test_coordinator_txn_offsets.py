"""TxnOffsetCommit in the group coordinator shard (issue 17), on the manual-clock harness, with the records
going through real batches: the transactional offsets are written as one transactional batch of the producer,
read back by `coordinator_log_records`, and the transaction's COMMIT or ABORT marker is a real control batch.

Covered: KIP-447 checks (member, generation, static instance, the simple form), pending offsets invisible to
OffsetFetch (UNSTABLE_OFFSET_COMMIT with require_stable) until COMMIT makes them committed, ABORT drops them,
two producers' transactions kept apart, and a reload from the log that rebuilds the same state.
"""

from __future__ import annotations

from typing import Any

from coordinator_harness import GROUP, Harness

from groupstream.coordinator.offsets import TransactionalRecord, TransactionMarker, coordinator_log_records
from groupstream.coordinator.result import CoordinatorResult, apply_timer_ops
from groupstream.protocol.error_codes import ErrorCode
from groupstream.protocol.group_records import encode_record
from groupstream.protocol.messages import by_name
from groupstream.protocol.records import BatchBuilder
from groupstream.protocol.records.batch import build_control_batch
from groupstream.protocol.records.record import ControlType

E = ErrorCode


class TxnHarness(Harness):
    """The harness with the runtime's batch layer: each result's records become one batch (transactional when
    they carry a producer), kept in ``batches`` and replayed from their bytes."""

    def __post_init__(self) -> None:
        self.batches: list[bytes] = []
        super().__post_init__()

    def _append(self, batch: bytes) -> None:
        self.batches.append(batch)
        for _, record in coordinator_log_records(batch):
            self.shard.replay(record)

    def apply(self, result: CoordinatorResult) -> list[Any]:
        if result.records:
            producer = getattr(result.records[0], "producer", None)
            builder = (BatchBuilder() if producer is None else
                       BatchBuilder(producer_id=producer[0], producer_epoch=producer[1], base_sequence=0,
                                    transactional=True))  # fmt: skip
            for record in result.records:
                key, value = encode_record(record.record if producer else record)
                builder.append(self.now, key, value)
            self._append(builder.build())
        apply_timer_ops(self.timers, result.timers)
        for token, response in result.responses:
            api_name, version = self.sent[token]
            api = by_name(api_name)
            self.answers[token] = api.decode_response(api.encode_response(response, version), version)
        return []

    def marker(self, producer_id: int, commit: bool) -> None:
        """The transaction coordinator's marker, appended to the partition; the shard is told, as the broker
        tells it."""
        self.batches.append(build_control_batch(ControlType.COMMIT if commit else ControlType.ABORT,
                                                producer_id=producer_id, producer_epoch=0, coordinator_epoch=0,
                                                timestamp=self.now))  # fmt: skip
        self.apply(self.shard.on_transaction_marker(producer_id, commit, self.now))

    def restart(self) -> None:
        self.shard = self._new_shard()
        self.timers.clear()
        for batch in self.batches:
            for _, record in coordinator_log_records(batch):
                self.shard.replay(record)
        self.apply(self.shard.on_loaded(self.now))

    def txn_commit(self, offsets: dict[tuple[str, int], int], *, pid: int = 77, group: str = GROUP,
                   generation: int = -1, member_id: str = "", instance_id: str | None = None,
                   version: int = 3) -> dict[tuple[str, int], int]:
        T = by_name("TxnOffsetCommit").Request.TxnOffsetCommitRequestTopic
        by_topic: dict[str, list[Any]] = {}
        for (topic, partition), offset in offsets.items():
            by_topic.setdefault(topic, []).append(T.TxnOffsetCommitRequestPartition(
                partition_index=partition, committed_offset=offset, committed_metadata="txn"))
        token = self.send("TxnOffsetCommit", version, transactional_id=f"tx-{pid}", group_id=group, producer_id=pid,
                          producer_epoch=0, generation_id=generation, member_id=member_id,
                          group_instance_id=instance_id,
                          topics=[T(name=t, partitions=ps) for t, ps in by_topic.items()])  # fmt: skip
        return {(t.name, p.partition_index): p.error_code for t in self.answer(token).topics for p in t.partitions}

    def stable_fetch(self, topic: str, partition: int, group: str = GROUP) -> tuple[int, int]:
        F = by_name("OffsetFetch").Request
        token = self.send("OffsetFetch", 7, group_id=group, require_stable=True,
                          topics=[F.OffsetFetchRequestTopic(name=topic, partition_indexes=[partition])])
        p = self.answer(token).topics[0].partitions[0]
        return p.error_code, p.committed_offset


def test_pending_until_commit_then_committed() -> None:
    h = TxnHarness()
    assert h.commit({("t", 0): 5}) == {("t", 0): E.NONE}
    assert h.txn_commit({("t", 0): 10, ("t", 1): 11}) == {("t", 0): E.NONE, ("t", 1): E.NONE}
    batch = h.batches[-1]
    records = list(coordinator_log_records(batch))
    assert all(isinstance(r, TransactionalRecord) and r.producer_id == 77 for _, r in records)
    assert h.stable_fetch("t", 0) == (E.UNSTABLE_OFFSET_COMMIT, -1)
    assert h.fetch({"t": [0, 1]}) == {("t", 0): (5, ""), ("t", 1): (-1, "")}  # not stable: the committed one
    assert h.stable_fetch("u", 0) == (E.NONE, -1)  # other partitions are not held up
    h.marker(77, commit=True)
    assert [r for _, r in coordinator_log_records(h.batches[-1])] == [TransactionMarker(77, True)]
    assert h.stable_fetch("t", 0) == (E.NONE, 10)
    assert h.fetch({"t": [0, 1]}) == {("t", 0): (10, "txn"), ("t", 1): (11, "txn")}


def test_abort_drops_the_offsets_and_producers_are_kept_apart() -> None:
    h = TxnHarness()
    h.txn_commit({("t", 0): 10}, pid=1)
    h.txn_commit({("t", 1): 20}, pid=2)
    h.marker(1, commit=False)
    assert h.stable_fetch("t", 0) == (E.NONE, -1)
    assert h.stable_fetch("t", 1) == (E.UNSTABLE_OFFSET_COMMIT, -1)
    h.marker(2, commit=True)
    assert h.fetch({"t": [0, 1]}) == {("t", 0): (-1, ""), ("t", 1): (20, "txn")}


def test_reload_rebuilds_pending_and_committed_offsets() -> None:
    h = TxnHarness()
    h.txn_commit({("t", 0): 10}, pid=1)
    h.marker(1, commit=True)
    h.txn_commit({("t", 1): 30}, pid=2)  # still open when the broker stops
    before = (h.shard.durable_state(), h.shard._ctx.offsets.pending_snapshot())
    h.restart()
    assert (h.shard.durable_state(), h.shard._ctx.offsets.pending_snapshot()) == before
    assert h.stable_fetch("t", 1) == (E.UNSTABLE_OFFSET_COMMIT, -1)
    h.marker(2, commit=True)
    assert h.fetch({"t": [0, 1]}) == {("t", 0): (10, "txn"), ("t", 1): (30, "txn")}


def test_kip_447_member_and_generation_checks() -> None:
    h = TxnHarness()
    (a, _b), generation = h.form_group(2)
    ok = {("t", 0): E.NONE}
    assert h.txn_commit({("t", 0): 1}, generation=generation, member_id=a) == ok
    assert h.txn_commit({("t", 0): 1}, generation=generation + 1, member_id=a) == {("t", 0): E.ILLEGAL_GENERATION}
    assert h.txn_commit({("t", 0): 1}, generation=generation, member_id="ghost") == {("t", 0): E.UNKNOWN_MEMBER_ID}
    # v0-2 clients send no member: accepted, as Kafka does
    assert h.txn_commit({("t", 0): 1}, version=2) == ok
    assert h.txn_commit({("t", 9): 1}) == {("t", 9): E.UNKNOWN_TOPIC_OR_PARTITION}
    # a group that does not exist: only the simple form
    assert h.txn_commit({("t", 0): 1}, group="other", generation=3, member_id="m") == {("t", 0): E.ILLEGAL_GENERATION}
    assert h.txn_commit({("t", 0): 1}, group="") == {("t", 0): E.INVALID_GROUP_ID}
