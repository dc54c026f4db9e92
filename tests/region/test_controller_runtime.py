"""The region controller driving members through the control plane of our broker: commands out, answers in,
a member's reset request, a reset a member answers with an error, and a controller that restarts going on from
the last complete checkpoint.

The members here are the test itself publishing answers on its own control-plane connections, as member
processes do; everything travels through the real topic."""

from __future__ import annotations

import time

import pytest

from groupstream.region.control_plane import ControlPlane
from groupstream.region.control_records import Ack, Command, MemberRegistration
from groupstream.region.controller_runtime import RESET_REQUEST, ControllerRuntime
from support.brokers import BrokerProcess

pytestmark = pytest.mark.broker_ours


def until_commands(rt: ControllerRuntime, timeout_s: float = 10) -> list[Command]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        out = rt.step(min(1.0, deadline - time.monotonic()))
        if out:
            return out
    raise AssertionError("the controller issued no command")


def answer(planes: dict[str, ControlPlane], command: Command, error: str | None = None) -> None:
    for name, plane in planes.items():
        plane.publish(Ack(plane.region, name, command.seq, command.kind, error))


def test_the_controller_drives_cycles_and_resets_through_the_topic(groupstream_broker: BrokerProcess) -> None:
    bs = groupstream_broker.bootstrap
    with ControlPlane(bs, "rt") as ctl_plane, ControlPlane(bs, "rt") as a, ControlPlane(bs, "rt") as b:
        members = {"a": a, "b": b}
        for name, plane in members.items():
            plane.publish(MemberRegistration("rt", "g", name, 0))
        ctl_plane.wait_for(lambda v: True if len(v.members("g")) == 2 else None, 10)
        rt = ControllerRuntime(ctl_plane, "g", period_ms=None, reset_timeout_ms=30_000)
        assert rt.controller.members == {"a", "b"}

        (drain,) = rt.request_checkpoint()
        assert (drain.kind, drain.checkpoint_id) == ("drain", 1)
        assert a.wait_for(lambda v: v.command, 10) == drain  # members see the command
        answer(members, drain)
        (checkpoint,) = until_commands(rt)
        assert (checkpoint.kind, checkpoint.checkpoint_id) == ("checkpoint", 1)
        answer(members, checkpoint)
        (resume,) = until_commands(rt)
        assert resume.kind == "resume" and rt.controller.last_complete == 1

        a.publish(Ack("rt", "a", resume.seq, RESET_REQUEST, "partitions [t-0] were revoked"))
        (reset,) = until_commands(rt)
        assert (reset.kind, reset.checkpoint_id, reset.attempt) == ("reset", 1, 1)
        # b's commit of the cut is refused (the group is rebalancing): the reset is tried again soon
        answer({"a": a}, reset)
        answer({"b": b}, reset, "the commit of the cut failed: REBALANCE_IN_PROGRESS")
        (retry,) = until_commands(rt, timeout_s=5)
        assert (retry.kind, retry.checkpoint_id, retry.attempt) == ("reset", 1, 2)
        answer(members, retry)
        (resumed,) = until_commands(rt)
        assert resumed.kind == "resume" and rt.controller.resets == 1

        # a second drain that one member refuses: the cycle becomes a reset to checkpoint 1
        (drain2,) = rt.request_checkpoint()
        assert drain2.checkpoint_id == 2
        a.publish(Ack("rt", "a", drain2.seq, "drain", "waiting for a reset"))
        (reset2,) = until_commands(rt)
        assert (reset2.kind, reset2.checkpoint_id, reset2.attempt) == ("reset", 1, 3)

    # a new controller (the old one's process died) starts where the topic says, with a reset
    with ControlPlane(bs, "rt") as ctl_plane:
        ctl_plane.wait_for(lambda v: v.state, 10)
        again = ControllerRuntime(ctl_plane, "g", period_ms=None, reset_timeout_ms=30_000)
        assert (again.controller.last_complete, again.controller.checkpoint_id) == (1, 2)
        (restart_reset,) = until_commands(again)
        assert (restart_reset.kind, restart_reset.checkpoint_id, restart_reset.attempt) == ("reset", 1, 4)
        assert restart_reset.seq > reset2.seq
