"""The checker checked: synthetic histories with one planted anomaly each are caught, and a clean one passes.

The clean history: producer ``P`` writes offsets 0-5 of partitions 0 and 1 (acknowledged, all in the final
log). Group ``g``: ``m1`` holds both partitions from t=1, commits after each record, and hands partition 1
over at t=10 (revoked); ``m2`` is assigned it at t=11 and resumes at m1's last acknowledged commit. Each test
changes one thing and expects exactly the anomalies that change implies.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .checker import KINDS, Report, check
from .history import (
    Ack,
    Assignment,
    Commit,
    Failure,
    History,
    Impairment,
    MemberHistory,
    Processed,
    load_run,
    record_value,
)

N = 6  # offsets per partition


def value(p: int, o: int) -> str:
    return record_value("P", p * N + o)


def clean() -> History:
    h = History(partitions=2, sent={"P": 2 * N - 1}, caught_up={"g": True})
    for p in (0, 1):
        for o in range(N):
            h.acks.append(Ack("P", p, o, value(p, o), t=0.1 * (p * N + o)))
            h.final_log.append((p, o, value(p, o)))
    m1 = MemberHistory("m1", "g", "groupstream", started=0.5, ended=30.0, end_reason="closed")
    m1.assignments += [Assignment(1.0, frozenset({0, 1}), "assign"), Assignment(10.0, frozenset({0}), "revoke")]
    for o in range(N):  # partition 0: all of it, 2.0 .. 2.5
        m1.processed.append(Processed(2.0 + o / 10, 0, o, value(0, o)))
        m1.commits.append(Commit(2.0 + o / 10, 2.01 + o / 10, True, ((0, o + 1),)))
    for o in range(3):  # partition 1: offsets 0-2, committed up to 3, before the handover
        m1.processed.append(Processed(3.0 + o / 10, 1, o, value(1, o)))
        m1.commits.append(Commit(3.0 + o / 10, 3.01 + o / 10, True, ((1, o + 1),)))
    m2 = MemberHistory("m2", "g", "confluent", started=10.5, ended=30.0, end_reason="closed")
    m2.assignments.append(Assignment(11.0, frozenset({1}), "assign"))
    for o in range(3, N):
        m2.processed.append(Processed(12.0 + o / 10, 1, o, value(1, o)))
        m2.commits.append(Commit(12.0 + o / 10, 12.01 + o / 10, True, ((1, o + 1),)))
    h.members = [m1, m2]
    return h


def member(h: History, name: str) -> MemberHistory:
    return next(m for m in h.members if m.name == name)


def only(report: Report, **expected: int) -> None:
    """Exactly these anomaly counts, every other kind zero."""
    want = {k: expected.get(k.replace("-", "_"), 0) for k in KINDS}
    assert report.counts == want, report.render()


def test_clean_history_passes() -> None:
    report = check(clean())
    only(report)
    assert report.ok
    assert report.stats["acked"] == 2 * N and report.stats["records_processed"] == 2 * N
    assert "OK" in report.render()


def test_lost_acknowledged_record() -> None:
    h = clean()
    h.final_log.remove((0, N - 1, value(0, N - 1)))  # the log lost its tail record
    report = check(h)
    only(report, lost=1, dirty_read=1)  # and m1 had read it: a record served, then lost
    assert not report.ok
    assert f"{value(0, N - 1)} acknowledged at p0@{N - 1}" in report.examples["lost"][0]
    assert "nowhere" in report.examples["lost"][0]


def test_acknowledged_record_at_another_offset_is_lost_there() -> None:
    h = clean()
    h.acks[0] = Ack("P", 0, 0, value(0, 1), 0.0)  # the ack named an offset that holds another record
    report = check(h)
    assert report.counts["lost"] == 1
    assert "at [(0, 1)]" in report.examples["lost"][0]


def test_double_owner() -> None:
    h = clean()
    member(h, "m2").assignments[0] = Assignment(9.0, frozenset({1}), "assign")  # before m1's revocation at 10
    report = check(h)
    only(report, double_owner=1)
    assert "m2 was assigned it at 9.000 while m1 held p1 [1.000, 10.000]" in report.examples["double-owner"][0]


def test_overlap_of_a_member_cut_off_is_the_allowed_handover_within_grace() -> None:
    h = clean()
    member(h, "m2").assignments[0] = Assignment(9.0, frozenset({1}), "assign")
    h.impairments.append(Impairment("member-pause", 2.0, 8.0, "m1"))  # m1 frozen, then 2 s to hear it was removed
    only(check(h, grace_s=5.0))
    only(check(h, grace_s=0.5), double_owner=1)  # past the grace, the overlap counts
    h.impairments[0] = Impairment("member-pause", 2.0, 8.0, "m2")  # the new holder's impairment excuses nothing
    only(check(h, grace_s=5.0), double_owner=1)
    h.impairments[0] = Impairment("stall", 2.0, 8.0, "")  # a stall of every connection covers m1 too
    only(check(h, grace_s=5.0))


def test_killed_member_holds_nothing_after_the_kill() -> None:
    h = clean()
    m1 = member(h, "m1")
    m1.assignments.pop()  # m1 never revoked partition 1: it was killed at 10
    m1.ended, m1.end_reason = 10.0, "killed"
    only(check(h))
    m1.ended = 11.5  # killed after m2 took the partition at 11
    only(check(h), double_owner=1)


def test_duplicate_beyond_the_at_least_once_window() -> None:
    h = clean()
    # m2 starts over at offset 1 of partition 1 although m1's commit of 3 was acknowledged at 3.21, before 11
    m2 = member(h, "m2")
    m2.processed[:0] = [Processed(11.5, 1, 1, value(1, 1)), Processed(11.6, 1, 2, value(1, 2))]
    report = check(h)
    only(report, duplicate=2)
    assert "offset 3 was committed before m2 took the partition at 11.000" in report.examples["duplicate"][0]


def test_redelivery_inside_the_window_is_allowed() -> None:
    h = clean()
    m1, m2 = member(h, "m1"), member(h, "m2")
    m1.commits = [c for c in m1.commits if c.offsets[0] != (1, 3)]  # m1's last commit of p1 (offset 3) ...
    m1.commits.append(Commit(3.2, 11.2, True, ((1, 3),)))  # ... answered only after m2 was assigned p1
    m2.processed[:0] = [Processed(11.5, 1, 2, value(1, 2))]  # so m2 may start at 2
    only(check(h))
    m1.commits[-1] = Commit(3.2, 3.21, False, ((1, 3),), "REBALANCE_IN_PROGRESS")  # or when it failed
    only(check(h))


def test_non_monotonic_offsets_within_an_ownership() -> None:
    h = clean()
    member(h, "m1").processed.insert(3, Processed(2.25, 0, 1, value(0, 1)))  # offset 1 again after 2
    report = check(h)
    only(report, non_monotonic=1)
    assert "processed offset 1 at 2.250 after 2" in report.examples["non-monotonic"][0]


def test_unowned_read_dirty_read_missed_and_stalled() -> None:
    h = clean()
    m2 = member(h, "m2")
    m2.processed.append(Processed(12.9, 0, 0, value(0, 0)))  # partition 0 was never m2's
    m2.processed.append(Processed(13.0, 1, N, record_value("P", 99)))  # an offset the final log does not have
    h.final_log.append((1, N, record_value("P", 2 * N - 1)))  # the log holds another record there
    only(check(h), unowned=1, dirty_read=1, log_duplicate=1, missed=0)
    h = clean()
    member(h, "m2").processed.pop()  # nobody processed p1@5
    only(check(h), missed=1)
    h.caught_up["g"] = False
    only(check(h), stalled=1)  # a stalled group is not judged on what it missed


def test_phantom_log_duplicate_and_process_failures() -> None:
    h = clean()
    h.final_log += [(0, N, "garbage"), (0, N + 1, record_value("P", 500)), (0, N + 2, value(1, 0))]
    h.failures += [Failure("producer-fatal", "P", 5.0, "OUT_OF_ORDER_SEQUENCE_NUMBER"),
                   Failure("member-exit", "m3", 6.0, "exit code 3")]  # fmt: skip
    only(check(h), phantom=2, log_duplicate=1, missed=3, producer_fatal=1, crashed=1)


def test_load_run_reads_what_the_processes_write(tmp_path: Path) -> None:
    """The file formats of `history` round-trip: a clean run on disk passes, and a torn last line (a writer
    killed mid-line) is ignored."""
    (tmp_path / "producers").mkdir()
    (tmp_path / "members").mkdir()
    (tmp_path / "run.json").write_text(json.dumps({"partitions": 1, "member_groups": {"a.1": "g", "b.1": "g"},
                                                   "caught_up": {"g": True}}))  # fmt: skip
    (tmp_path / "producers" / "P.1.log").write_text(
        "S\t0\t2\n" + "".join(f"A\t0\t{o}\t{record_value('P.1', o)}\t{1 + o}\n" for o in range(3)) + "U\tP.1/00"
    )
    (tmp_path / "final_log.tsv").write_text("".join(f"0\t{o}\t{record_value('P.1', o)}\n" for o in range(3)))

    def lines(*events: dict[str, object]) -> str:
        return "".join(json.dumps(e) + "\n" for e in events)

    (tmp_path / "members" / "a.1.jsonl").write_text(lines(
        {"ev": "start", "t": 1.0, "client": "confluent"},
        {"ev": "owned", "t": 2.0, "parts": [0], "why": "assign"},
        {"ev": "recs", "t": 3.0, "recs": [[0, 0, record_value("P.1", 0)], [0, 1, record_value("P.1", 1)]]},
        {"ev": "commit", "sent": 3.1, "t": 3.2, "ok": True, "offsets": [[0, 2]]},
    ) + '{"ev": "recs", "t": 3.5, "recs": [[0, 2, "P.1/0000')  # killed mid-line
    (tmp_path / "members" / "b.1.jsonl").write_text(lines(
        {"ev": "start", "t": 4.0, "client": "groupstream"},
        {"ev": "owned", "t": 5.0, "parts": [0], "why": "assign"},
        {"ev": "recs", "t": 6.0, "recs": [[0, 2, record_value("P.1", 2)]]},
        {"ev": "commit", "sent": 6.1, "t": 6.2, "ok": True, "offsets": [[0, 3]]},
        {"ev": "owned", "t": 7.0, "parts": [], "why": "revoke"},
        {"ev": "closed", "t": 7.5},
    ))  # fmt: skip
    (tmp_path / "nemesis.jsonl").write_text(lines(
        {"ev": "fault", "kind": "member-kill", "target": "a.1", "start": 4.5, "end": 4.6, "params": {}},
        {"ev": "member-kill", "member": "a.1", "t": 4.5},
        {"ev": "fault", "kind": "stall", "target": "", "start": 8.0, "end": 9.0, "params": {}},
    ))  # fmt: skip
    h = load_run(tmp_path)
    assert len(h.acks) == 3 and h.sent == {"P.1": 2} and len(h.final_log) == 3
    a = member(h, "a.1")
    assert (a.end_reason, a.ended, len(a.processed)) == ("killed", 4.5, 2)
    assert member(h, "b.1").end_reason == "closed"
    assert h.impairments == [Impairment("stall", 8.0, 9.0, "")]
    only(check(h))
    # b.1 assigned while a.1 still ran: the kill time bounds a.1's ownership, so moving the kill later is caught
    (tmp_path / "nemesis.jsonl").write_text(lines({"ev": "member-kill", "member": "a.1", "t": 5.5}))
    only(check(load_run(tmp_path)), double_owner=1)


@pytest.mark.parametrize(("lo", "hi", "covers", "left"), [
    (0.0, 10.0, [], 10.0),
    (0.0, 10.0, [(2.0, 4.0), (3.0, 5.0)], 7.0),
    (0.0, 10.0, [(-1.0, 11.0)], 0.0),
    (0.0, 10.0, [(8.0, 12.0), (-5.0, 1.0)], 7.0),
])  # fmt: skip
def test_uncovered(lo: float, hi: float, covers: list[tuple[float, float]], left: float) -> None:
    from .checker import _uncovered

    assert _uncovered(lo, hi, covers) == pytest.approx(left)
