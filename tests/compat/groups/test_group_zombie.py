"""A member frozen past its session timeout (SIGSTOP) is a zombie: once it wakes (SIGCONT) its commit must be
rejected, because the group moved on without it, and the committed offsets never go backwards.

A (confluent-kafka, eager range) processes part of the topic, commits once, processes more without
committing and is frozen while it waits, not polling, holding those uncommitted offsets. B joins; the
coordinator removes A when its session times out and gives B every partition; B resumes from A's commit,
processes everything and commits the log ends. A is woken and immediately asked to commit what it held (it
does not poll first, so it cannot have rejoined): the commit fails, and the group's committed offsets, watched
throughout, only ever went forward and end at the log ends.
"""

from __future__ import annotations

import itertools
import threading
import time

import pytest
from group_harness import Members, create_topic, end_offsets, produce, unique, wait_for

from groupstream.client.admin import Admin
from support.brokers import BrokerProcess

pytestmark = [pytest.mark.compat, pytest.mark.slow]

PARTITIONS = 3
SESSION_TIMEOUT_MS = 6000


def test_zombie_commit_is_rejected(group_broker: BrokerProcess, members: Members) -> None:
    bs = group_broker.bootstrap
    topic, group = unique("zombie"), unique("g-zombie")
    create_topic(bs, topic, PARTITIONS)
    produced = produce(bs, topic, 900, PARTITIONS)
    ends = end_offsets(produced)
    all_parts = set(ends)
    members.common.update(
        client="confluent", bootstrap=bs, group=group, topics=[topic], strategy="range",
        session_timeout_ms=SESSION_TIMEOUT_MS, heartbeat_ms=500, max_poll_interval_ms=SESSION_TIMEOUT_MS + 60_000,
        max_records=20,
    )  # fmt: skip

    history: list[dict[tuple[str, int], int]] = []
    samples = [0]
    watching = threading.Event()
    watching.set()

    def watch() -> None:
        """Record the committed offsets as often as the coordinator answers, until the test ends."""
        with Admin({"bootstrap.servers": bs}) as admin:
            while watching.is_set():
                try:
                    snap = {tp: om.offset for tp, om in admin.list_group_offsets(group).items()}
                except Exception:  # the group is mid-rebalance or the answer was late: sample again
                    continue
                if not history or history[-1] != snap:
                    history.append(snap)
                samples[0] += 1
                time.sleep(0.02)  # sampling period of the watcher, not a wait for a condition

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        a = members.start("A", commit="manual", stop_after=120)
        members.wait_split([a], all_parts, timeout=40)
        wait_for(lambda: bool(a.of("idle")), 30, "A to process 120 records and wait")
        a.send("commit")
        wait_for(lambda: bool(a.of("commit")), 10, "A's first commit")
        assert a.of("commit")[-1]["ok"], a.of("commit")
        first_commit = {(t, p): o for t, p, o in a.of("commit")[-1]["offsets"]}
        a.send("more 120")  # more work, held uncommitted
        wait_for(lambda: len(a.of("idle")) >= 2, 30, "A to process 120 more records without committing")
        frozen_at = a.sigstop()
        held = len(a.processed)

        b = members.start("B", max_records=500)
        members.wait_split([b], all_parts, timeout=SESSION_TIMEOUT_MS / 1000 + 40)
        assert time.monotonic() - frozen_at >= SESSION_TIMEOUT_MS / 1000 * 0.9, "A was removed before its session timed out"
        wait_for(lambda: history and history[-1] == ends, 60, f"B to commit the log ends {ends}")

        a.sigcont()
        a.send("commit")
        wait_for(lambda: len(a.of("commit")) >= 2, 20, "A's commit after waking")
        late = a.of("commit")[-1]
        assert len(a.processed) == held
        assert late["ok"] is False, f"the zombie's commit {late['offsets']} was accepted"
        print(f"zombie commit rejected with {late['err']}")
        seen = samples[0]
        wait_for(lambda: samples[0] >= seen + 5, 10, "the watcher to sample the offsets after the rejected commit")
    finally:
        watching.clear()
        watcher.join(timeout=30)

    assert history and history[-1] == ends, f"committed offsets ended at {history[-1] if history else None}"
    for earlier, later in itertools.pairwise(history):
        back = {tp: (earlier[tp], later.get(tp)) for tp in earlier if later.get(tp, -1) < earlier[tp]}
        assert not back, f"a committed offset went backwards: {back}"
    # B started where A's only acknowledged commit left off
    for tp, o in first_commit.items():
        firsts = [r[2] for r in b.processed if r[:2] == tp]
        assert firsts and firsts[0] == o, f"{tp}: B began at {firsts[:1]}, A had committed {o}"
    b.close()
