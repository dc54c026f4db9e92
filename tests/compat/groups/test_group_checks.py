"""The group checks of `group_harness` catch what they claim to catch: fed made-up member histories (no
broker, no process), a correct history passes and each kind of violation fails with its message."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from group_harness import Member, check_delivery, check_group

T = "t"


def member(name: str, *events: dict[str, Any], killed_at: float | None = None) -> Member:
    m = Member(name, {}, Path("/nonexistent"))
    m.events = list(events)
    m.killed_at = killed_at
    return m


def owned(t: float, *parts: int) -> dict[str, Any]:
    return {"ev": "owned", "t": t, "parts": [[T, p] for p in parts]}


def recs(t: float, p: int, first: int, last: int) -> dict[str, Any]:
    return {"ev": "recs", "t": t, "recs": [[T, p, o] for o in range(first, last + 1)]}


def commit(t: float, p: int, offset: int, ok: bool = True) -> list[dict[str, Any]]:
    rows = [[T, p, offset]]
    return [{"ev": "committing", "t": t, "offsets": rows},
            {"ev": "commit", "t": t + 0.001, "sent": t, "ok": ok, "err": None, "offsets": rows}]  # fmt: skip


def produced(p: int, n: int) -> set[tuple[str, int, int]]:
    return {(T, p, o) for o in range(n)}


def good_history() -> list[Member]:
    """A owns p0, commits 5, revokes; B takes over at 5 and reads to 10."""
    a = member("A", owned(1, 0), recs(2, 0, 0, 4), *commit(2.1, 0, 5), owned(3, ))
    b = member("B", owned(4, 0), recs(5, 0, 5, 9), *commit(5.1, 0, 10))
    return [a, b]


def test_a_correct_history_passes() -> None:
    check_group(good_history(), produced(0, 10))


def test_overlapping_ownership_fails() -> None:
    a, b = good_history()
    b.events[0] = owned(2.5, 0)  # B assigned before A revoked at 3
    with pytest.raises(AssertionError, match=r"was assigned it at 2\.500 while A owned it until 3\.000"):
        check_group([a, b], produced(0, 10))


def test_commit_by_a_former_owner_fails() -> None:
    a, b = good_history()
    a.events += commit(4.5, 0, 7)  # A commits after B took over
    with pytest.raises(AssertionError, match=r"A committed 7 at 4\.500, but the latest owner then was B"):
        check_group([a, b], produced(0, 10))


def test_resuming_elsewhere_than_the_commit_fails() -> None:
    a, b = good_history()
    b.events[1] = recs(5, 0, 6, 9)  # B skipped offset 5
    with pytest.raises(AssertionError, match=r"B started at offset 6 .* last acknowledged commit before then was 5"):
        check_group([a, b], produced(0, 10))


def test_a_gap_within_one_ownership_fails() -> None:
    a, b = good_history()
    b.events[1:2] = [recs(5, 0, 5, 6), recs(5.05, 0, 8, 9)]
    with pytest.raises(AssertionError, match=r"skipped or repeated offsets within one ownership: \[\(6, 8\)\]"):
        check_group([a, b], produced(0, 10))


def test_a_killed_members_commit_in_flight_may_or_may_not_count() -> None:
    a = member("A", owned(1, 0), recs(2, 0, 0, 6), *commit(2.1, 0, 5), commit(2.5, 0, 7)[0], killed_at=2.6)
    for start in (5, 7):  # the broker stored the in-flight commit, or it did not
        b = member("B", owned(9, 0), recs(10, 0, start, 9), *commit(10.1, 0, 10))
        check_group([a, b], produced(0, 10))
    b = member("B", owned(9, 0), recs(10, 0, 6, 9))
    with pytest.raises(AssertionError, match=r"or one in doubt: \[7\]"):
        check_group([a, b], produced(0, 10))


def test_missing_and_extra_records_fail() -> None:
    with pytest.raises(AssertionError, match="1 produced records never processed"):
        check_delivery(good_history(), produced(0, 11))
    with pytest.raises(AssertionError, match="1 processed that were not produced"):
        check_delivery(good_history(), produced(0, 10) - {(T, 0, 9)})
