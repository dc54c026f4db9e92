"""Failures other Python clients are known for, which ours must not have (issue 5), on our broker with the classic
and the ``consumer`` (KIP-848) protocol:

- a handler slower than ``max.poll.interval.ms`` gets the member removed; the commit that follows fails with a
  `CommitFailedError` that says why and how to fix it, the next ``poll`` rejoins, and the group settles again
  after that one rejoin (no endless rebalances after UNKNOWN_MEMBER_ID / FENCED_MEMBER_EPOCH);
- heartbeats do not wait for the application: a handler that takes several session timeouts (but less than
  ``max.poll.interval.ms``) keeps its membership and partitions;
- Ctrl+C interrupts a ``poll`` blocked on an empty topic at once.
"""

from __future__ import annotations

import select
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from test_consumer_brokers import Recorder, classic, kip848, new_topic

from groupstream import Consumer
from groupstream.client.admin import Admin
from groupstream.client.consumer.errors import CommitFailedError
from support.brokers import BrokerProcess
from support.waiting import wait_until

pytestmark = pytest.mark.broker_ours

PROTOCOLS = [pytest.param(classic("range"), id="classic"), pytest.param(kip848("uniform"), id="consumer")]


def _poll_until_owned(c: Consumer, listener: Recorder, n: int, what: str) -> list[Any]:
    got: list[Any] = []

    def owned() -> bool:
        got.extend(c.poll(0.2))
        return len(listener.owned) == n

    wait_until(owned, 60, what)
    return got


@pytest.mark.parametrize("settings", PROTOCOLS)
def test_a_slow_handler_is_told_why_its_commit_failed_and_rejoins_once(
    kip848_broker: BrokerProcess, settings: dict[str, Any]
) -> None:
    bs = kip848_broker.bootstrap
    topic = new_topic(bs, 2, 200)
    group = f"g-{uuid.uuid4().hex[:6]}"
    listener = Recorder()
    conf = {"bootstrap.servers": bs, "group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False,
            "max.poll.interval.ms": 1500, **settings}  # fmt: skip
    with Consumer(conf) as c:
        c.subscribe([topic], listener=listener)
        _poll_until_owned(c, listener, 2, "the member to own both partitions")
        with Admin({"bootstrap.servers": bs}) as admin:
            wait_until(lambda: len(admin.describe_groups([group])[group].members) == 1, 30, "the group to list it")
            # the slow handler: the application does not poll while the coordinator drops its member
            wait_until(lambda: not admin.describe_groups([group])[group].members, 30,
                       "the coordinator to drop the member that stopped polling")  # fmt: skip
            with pytest.raises(CommitFailedError) as failed:
                c.commit()
            assert "max.poll.interval.ms" in str(failed.value), str(failed.value)
            failed_at = len(listener.events)
            _poll_until_owned(c, listener, 2, "the member to rejoin on its next poll")
            c.commit()  # a member again: its commit is accepted
            rejoined_at = len(listener.events)
            rejoined = admin.describe_groups([group])[group]
            # one rejoin, then quiet: a few more heartbeat intervals of polling change nothing
            deadline = time.monotonic() + 3
            while time.monotonic() < deadline:
                c.poll(0.2)
            assert len(listener.events) == rejoined_at, f"rebalanced again: {listener.events[rejoined_at:]}"
            assert [kind for kind, _ in listener.events[failed_at:]] == ["assigned"], listener.events
            assert len(listener.owned) == 2
            settled = admin.describe_groups([group])[group]
            assert [m.member_id for m in settled.members] == [m.member_id for m in rejoined.members]
            assert settled.state == "Stable", settled


@pytest.mark.parametrize("settings", PROTOCOLS)
def test_heartbeats_go_on_while_the_application_is_busy(kip848_broker: BrokerProcess, settings: dict[str, Any]) -> None:
    """The broker's KIP-848 sessions are 6 s; the classic member's session is 6 s too (``classic``)."""
    bs = kip848_broker.bootstrap
    topic = new_topic(bs, 2, 200)
    group = f"g-{uuid.uuid4().hex[:6]}"
    listener = Recorder()
    conf = {"bootstrap.servers": bs, "group.id": group, "auto.offset.reset": "earliest",
            "max.poll.interval.ms": 60_000, **settings}  # fmt: skip
    with Consumer(conf) as c, Admin({"bootstrap.servers": bs}) as admin:
        c.subscribe([topic], listener=listener)
        _poll_until_owned(c, listener, 2, "the member to own both partitions")
        before = admin.describe_groups([group])[group]
        events = len(listener.events)
        # A handler busy for more than two session timeouts (6 s each), well within max.poll.interval.ms: the
        # application does not poll, and the group keeps listing the member all along.
        busy_until = time.monotonic() + 14.0
        while time.monotonic() < busy_until:
            listed = admin.describe_groups([group])[group]
            assert [m.member_id for m in listed.members] == [m.member_id for m in before.members], listed
        c.poll(0.2)
        after = admin.describe_groups([group])[group]
        assert len(listener.events) == events, listener.events[events:]
        assert [m.member_id for m in after.members] == [m.member_id for m in before.members]
        assert after.state == "Stable"


def test_ctrl_c_interrupts_a_blocking_poll(kip848_broker: BrokerProcess) -> None:
    topic = new_topic(kip848_broker.bootstrap, 1)
    # A job a non-interactive shell starts in the background (`.ci/run &`) has SIGINT ignored (POSIX), and Python
    # keeps an ignored SIGINT, so a child started from such a test run would never see Ctrl+C: the child takes
    # Python's usual handler back, as a program started from a terminal has it.
    script = textwrap.dedent(f"""
        import signal
        signal.signal(signal.SIGINT, signal.default_int_handler)
        from groupstream import Consumer
        c = Consumer({{"bootstrap.servers": "{kip848_broker.bootstrap}", "group.id": "ctrl-c"}})
        c.subscribe(["{topic}"])
        try:  # "polling" is printed inside the try: a Ctrl+C right after it must be caught too
            print("polling", flush=True)
            c.poll(120)
        except KeyboardInterrupt:
            print("interrupted", flush=True)
            c.close()
            raise SystemExit(7)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "polling"
        wait_until(lambda: _main_thread_sleeping(proc.pid), 10, "the child's poll to block")
        proc.send_signal(signal.SIGINT)
        # poll (asked to wait 120 s) must give way at once: within 10 s, room for a child that a loaded 2-core
        # machine does not schedule for a few seconds; the close that follows has its own bound (its 30 s timeout)
        ready, _, _ = select.select([proc.stdout], [], [], 10.0)
        assert ready, "poll did not give way to Ctrl+C within 10 s"
        assert proc.stdout.readline().strip() == "interrupted"
        assert proc.wait(40) == 7
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _main_thread_sleeping(pid: int) -> bool:
    """Whether the process's main thread is in an interruptible wait (state S): after printing "polling" that is
    the blocking poll, or, rarely, a wait for the GIL between the print and the poll, which is why the child's
    try begins before its print."""
    stat = Path(f"/proc/{pid}/task/{pid}/stat").read_text()
    return stat[stat.rindex(")") + 2] == "S"
