"""The output ledger: per-partition compare-and-set publishing, recovery of half-done publishes, retirement."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from groupstream.region.ledger import LEDGER_DIR, OffsetLedger, PublishRejected


def _staged(ledger: OffsetLedger, member: str, batch: str, *contents: bytes) -> list[Path]:
    d = ledger.staging_path(member, batch)
    out = []
    for i, c in enumerate(contents):
        p = d / f"part-{i}.parquet"
        p.write_bytes(c)
        out.append(p)
    return out


def test_publish_moves_files_and_advances_offsets(tmp_path: Path) -> None:
    ledger = OffsetLedger(tmp_path)
    entry = ledger.publish("a", "b1", {("t", 0): (0, 10), ("t", 1): (5, 7)}, _staged(ledger, "a", "b1", b"x", b"y"))
    assert entry.seq == 1
    assert ledger.offsets() == {("t", 0): 10, ("t", 1): 7}
    assert [p.read_bytes() for p in ledger.files()] == [b"x", b"y"]
    assert not any((tmp_path / "_staging").iterdir())
    ledger.publish("b", "b2", {("t", 0): (10, 12)}, _staged(ledger, "b", "b2", b"z"))
    assert ledger.offsets() == {("t", 0): 12, ("t", 1): 7}
    assert len(ledger.files()) == 3


def test_a_stale_range_is_rejected_and_its_files_discarded(tmp_path: Path) -> None:
    ledger = OffsetLedger(tmp_path)
    ledger.publish("a", "b1", {("t", 0): (0, 10)}, _staged(ledger, "a", "b1", b"x"))
    # b planned from 0 before a published: its batch overlaps a's output and must not land
    staged = _staged(ledger, "b", "b2", b"dup")
    with pytest.raises(PublishRejected) as e:
        ledger.publish("b", "b2", {("t", 0): (0, 15), ("t", 1): (0, 3)}, staged)
    assert e.value.conflicts == {("t", 0): (0, 10)}
    assert "t-0: batch starts at 0, published up to 10" in str(e.value)
    assert not any(p.exists() for p in staged)
    assert ledger.offsets() == {("t", 0): 10}  # nothing of the rejected batch, not even its other partition
    assert [p.read_bytes() for p in ledger.files()] == [b"x"]


def test_racing_publishers_of_the_same_range_publish_once(tmp_path: Path) -> None:
    ledgers = [OffsetLedger(tmp_path) for _ in range(8)]
    results: list[str] = []
    barrier = threading.Barrier(len(ledgers))

    def publish(i: int) -> None:
        staged = _staged(ledgers[i], f"m{i}", "b", str(i).encode())
        barrier.wait()
        try:
            ledgers[i].publish(f"m{i}", "b", {("t", 0): (0, 100)}, staged)
            results.append("ok")
        except PublishRejected:
            results.append("rejected")

    threads = [threading.Thread(target=publish, args=(i,)) for i in range(len(ledgers))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == ["ok"] + ["rejected"] * 7
    assert len(OffsetLedger(tmp_path).files()) == 1


def test_recover_finishes_a_publish_cut_short_after_its_entry(tmp_path: Path) -> None:
    ledger = OffsetLedger(tmp_path)
    staged = _staged(ledger, "a", "b1", b"x")
    ledger._move_into_table = lambda entry: None  # type: ignore[method-assign]  # the publisher dies here
    ledger.publish("a", "b1", {("t", 0): (0, 4)}, staged)
    assert ledger.files() == [] and staged[0].exists()
    orphan = _staged(ledger, "a", "b2", b"never published")
    fresh = OffsetLedger(tmp_path)
    fresh.recover("a")
    assert [p.read_bytes() for p in fresh.files()] == [b"x"]
    assert not orphan[0].exists() and not staged[0].exists()


def test_recover_leaves_other_members_staging_alone(tmp_path: Path) -> None:
    ledger = OffsetLedger(tmp_path)
    theirs = _staged(ledger, "b", "b9", b"in flight")
    ledger.recover("a")
    assert theirs[0].exists()


def test_old_entries_are_retired_and_the_latest_holds_everything(tmp_path: Path) -> None:
    ledger = OffsetLedger(tmp_path)
    for i in range(150):
        ledger.publish("a", f"b{i}", {("t", i % 3): (i // 3, i // 3 + 1)}, [])
    entries = sorted((tmp_path / LEDGER_DIR).glob("*.json"))
    assert len(entries) == 100
    assert ledger.offsets() == {("t", 0): 50, ("t", 1): 50, ("t", 2): 50}


def test_a_partition_read_anew_in_a_recreated_topic_replaces_its_offset_once(tmp_path: Path) -> None:
    ledger = OffsetLedger(tmp_path)
    ledger.publish("a", "b1", {("t", 0): (0, 100)}, _staged(ledger, "a", "b1", b"old"), {("t", 0): "id-a"})
    assert ledger.topic_ids() == {("t", 0): "id-a"}
    # a batch of the new topic (id-b) that does not say what it replaces is not published over id-a's offsets
    with pytest.raises(PublishRejected):
        ledger.publish("a", "b2", {("t", 0): (100, 120)}, _staged(ledger, "a", "b2", b"x"), {("t", 0): "id-b"})
    # read anew from 0, replacing offset 100 of id-a: published, and the ledger now holds id-b's offset
    anew = {("t", 0): (100, "id-a")}
    ledger.publish("a", "b3", {("t", 0): (0, 40)}, _staged(ledger, "a", "b3", b"new"), {("t", 0): "id-b"}, anew)
    assert ledger.offsets() == {("t", 0): 40} and ledger.topic_ids() == {("t", 0): "id-b"}
    # a second restart planned against the same old offset (another member, before a rebalance) is stale
    staged = _staged(ledger, "b", "b4", b"dup")
    with pytest.raises(PublishRejected):
        ledger.publish("b", "b4", {("t", 0): (0, 40)}, staged, {("t", 0): "id-b"}, anew)
    # and so is a batch planned in the old topic from the old offset, which happens to match no more
    with pytest.raises(PublishRejected):
        ledger.publish("b", "b5", {("t", 0): (40, 50)}, _staged(ledger, "b", "b5", b"x"), {("t", 0): "id-a"})
    assert [p.read_bytes() for p in ledger.files()] == [b"old", b"new"]


def test_entries_written_without_topic_ids_still_read(tmp_path: Path) -> None:
    ledger = OffsetLedger(tmp_path)
    (tmp_path / LEDGER_DIR / f"{1:016d}.json").write_text(
        '{"batch": "b", "files": [], "member": "a", "offsets": [["t", 0, 7]], "seq": 1}'
    )
    assert ledger.offsets() == {("t", 0): 7} and ledger.topic_ids() == {}
    ledger.publish("a", "b2", {("t", 0): (7, 9)}, [], {("t", 0): "id-a"})  # ids unknown so far: any id goes
    assert ledger.topic_ids() == {("t", 0): "id-a"}
