"""The nemesis' schedule is a pure function of its seed: replayable, every kind of fault in every schedule,
the budget filled; and impairment targets name one member, a slot's incarnations, or everyone."""

from __future__ import annotations

from .history import Impairment
from .nemesis import KINDS, make_schedule, render_schedule

SLOTS = ["coop.groupstream1-", "coop.confluent2-", "kip848.confluent2-"]


def test_same_seed_same_schedule() -> None:
    a, b = make_schedule(7, 140, SLOTS), make_schedule(7, 140, SLOTS)
    assert a == b
    assert render_schedule(a) == render_schedule(b)
    assert make_schedule(8, 140, SLOTS) != a


def test_every_kind_first_then_until_the_budget() -> None:
    for seed in range(50):
        faults = make_schedule(seed, 140, SLOTS)
        assert {f.kind for f in faults[: len(KINDS)]} == set(KINDS), seed
        assert sum(f.cost_s for f in faults) >= 140
        assert sum(f.cost_s for f in faults[:-1]) < 140 or len(faults) == len(KINDS)
        for f in faults:
            assert f.hold_s > 0 and f.quiet_s > 0
            if f.kind.startswith("member-"):
                assert f.target in SLOTS
            if f.kind.startswith("broker-") or f.kind == "disk-full":
                assert f.target == ""


def test_without_a_kind() -> None:
    kinds = tuple(k for k in KINDS if k != "disk-full")
    assert all(f.kind != "disk-full" for f in make_schedule(3, 600, SLOTS, kinds))


def test_impairment_targets() -> None:
    assert Impairment("stall", 0, 1, "").applies_to("coop.groupstream1-3")
    slot = Impairment("stall", 0, 1, "coop.groupstream1-")
    assert slot.applies_to("coop.groupstream1-3") and slot.applies_to("coop.groupstream1-12")
    assert not slot.applies_to("coop.groupstream12-1")
    one = Impairment("member-pause", 0, 1, "coop.groupstream1-1")
    assert one.applies_to("coop.groupstream1-1")
    assert not one.applies_to("coop.groupstream1-12")
