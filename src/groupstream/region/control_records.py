"""The records of a region's control plane, which lives on the log itself: one compacted topic that every
member and the controller both write and read from the start, so the region needs nothing but Kafka.

Seed 000 keeps this state in a job control plane (an MBean: the group's region index, the shared initial
offsets, the offset merges and their notifications). Here each of those is a record; keys carry the writer
where several may write, so compaction (which keeps the last value per key) can never change what an earlier
reader decided. Values are JSON, so the topic is readable with any Kafka tool.

Key layout (``/``-separated, region first so one topic serves several regions):

- ``<region>/member/<group>/<member>``: a member joined with its region index (value), or left (tombstone);
- ``<region>/initial/<group>/<member>``: initial offsets a member computed; the first one in the log wins;
- ``<region>/merge/<checkpoint>/<attempt>/<member>``: a member's contribution to a merge;
- ``<region>/command``: the controller's latest command (drain, checkpoint, resume, reset, retire);
- ``<region>/ack/<member>``: a member's latest answer to a command;
- ``<region>/checkpoint/<checkpoint>/<member>``: a member's operator checkpoint (the topic checkpoint store),
  tombstoned when the checkpoint is retired;
- ``<region>/state``: the controller's durable state (last complete checkpoint, ids used), so a controller
  that restarts goes on where the last one stopped.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from groupstream.assignment.types import TopicPartition

__all__ = [
    "Ack",
    "CheckpointData",
    "Command",
    "ControlRecord",
    "InitialOffsets",
    "MemberRegistration",
    "MergeContribution",
    "RegionState",
    "decode",
    "encode",
]

Offsets = dict[TopicPartition, int]


def _enc_offsets(offsets: Offsets) -> list[list[Any]]:
    return [[tp.topic, tp.partition, o] for tp, o in sorted(offsets.items())]


def _dec_offsets(rows: Any) -> Offsets:
    return {TopicPartition(str(t), int(p)): int(o) for t, p, o in rows}


@dataclass(frozen=True, slots=True)
class MemberRegistration:
    region: str
    group: str
    member: str
    region_index: int | None  # None: the member left (a tombstone)


@dataclass(frozen=True, slots=True)
class InitialOffsets:
    region: str
    group: str
    member: str
    offsets: Offsets


@dataclass(frozen=True, slots=True)
class MergeContribution:
    region: str
    checkpoint_id: int
    attempt: int
    member: str
    assignable: frozenset[TopicPartition]
    offsets: Offsets


@dataclass(frozen=True, slots=True)
class Command:
    """``kind``: drain, checkpoint, resume, reset (``checkpoint_id`` None = initial state) or retire."""

    region: str
    seq: int  # increases with every command, so a member answers each exactly once
    kind: str
    checkpoint_id: int | None = None
    attempt: int = 0


@dataclass(frozen=True, slots=True)
class Ack:
    """A member's answer to command ``seq``: ``error`` None when it did what was asked; ``kind`` repeats
    the command's, or is ``reset-request`` for a member asking the controller for a reset."""

    region: str
    member: str
    seq: int
    kind: str
    error: str | None = None


@dataclass(frozen=True, slots=True)
class CheckpointData:
    region: str
    checkpoint_id: int
    member: str
    data: str | None  # None: retired (a tombstone)


@dataclass(frozen=True, slots=True)
class RegionState:
    region: str
    last_complete: int | None
    checkpoint_id: int
    attempt: int


ControlRecord = (
    MemberRegistration | InitialOffsets | MergeContribution | Command | Ack | CheckpointData | RegionState
)


def encode(record: ControlRecord) -> tuple[bytes, bytes | None]:
    r = record
    value: dict[str, Any] | None
    if isinstance(r, MemberRegistration):
        value = None if r.region_index is None else {"region_index": r.region_index}
        return _key(r.region, "member", r.group, r.member), _json(value)
    if isinstance(r, InitialOffsets):
        return _key(r.region, "initial", r.group, r.member), _json({"offsets": _enc_offsets(r.offsets)})
    if isinstance(r, MergeContribution):
        value = {"assignable": [[tp.topic, tp.partition] for tp in sorted(r.assignable)],
                 "offsets": _enc_offsets(r.offsets)}  # fmt: skip
        return _key(r.region, "merge", str(r.checkpoint_id), str(r.attempt), r.member), _json(value)
    if isinstance(r, Command):
        value = {"seq": r.seq, "kind": r.kind, "checkpoint_id": r.checkpoint_id, "attempt": r.attempt}
        return _key(r.region, "command"), _json(value)
    if isinstance(r, RegionState):
        value = {"last_complete": r.last_complete, "checkpoint_id": r.checkpoint_id, "attempt": r.attempt}
        return _key(r.region, "state"), _json(value)
    if isinstance(r, CheckpointData):
        value = None if r.data is None else {"data": r.data}
        return _key(r.region, "checkpoint", str(r.checkpoint_id), r.member), _json(value)
    value = {"seq": r.seq, "kind": r.kind, "error": r.error}
    return _key(r.region, "ack", r.member), _json(value)


def decode(key: bytes, value: bytes | None) -> ControlRecord | None:
    """The record, or None for a key this version does not know (written by a newer one)."""
    parts = key.decode().split("/")
    if len(parts) < 2:
        return None
    region, kind = parts[0], parts[1]
    body: Any = None if value is None else json.loads(value)
    if kind == "member" and len(parts) == 4:
        return MemberRegistration(region, parts[2], parts[3], None if body is None else int(body["region_index"]))
    if kind == "checkpoint" and len(parts) == 4:
        return CheckpointData(region, int(parts[2]), parts[3], None if body is None else str(body["data"]))
    if body is None:
        return None  # a tombstone of a record kind that is simply gone
    if kind == "initial" and len(parts) == 4:
        return InitialOffsets(region, parts[2], parts[3], _dec_offsets(body["offsets"]))
    if kind == "merge" and len(parts) == 5:
        assignable = frozenset(TopicPartition(str(t), int(p)) for t, p in body["assignable"])
        return MergeContribution(region, int(parts[2]), int(parts[3]), parts[4], assignable,
                                 _dec_offsets(body["offsets"]))  # fmt: skip
    if kind == "command" and len(parts) == 2:
        cid = body["checkpoint_id"]
        return Command(region, int(body["seq"]), str(body["kind"]), None if cid is None else int(cid),
                       int(body["attempt"]))  # fmt: skip
    if kind == "state" and len(parts) == 2:
        last = body["last_complete"]
        return RegionState(region, None if last is None else int(last), int(body["checkpoint_id"]),
                           int(body["attempt"]))  # fmt: skip
    if kind == "ack" and len(parts) == 3:
        return Ack(region, parts[2], int(body["seq"]), str(body["kind"]), body["error"])
    return None


def _key(*parts: str) -> bytes:
    for p in parts:
        if "/" in p:
            raise ValueError(f"{p!r}: names in the region control plane cannot contain '/'")
    return "/".join(parts).encode()


def _json(value: Any) -> bytes | None:
    return None if value is None else json.dumps(value, separators=(",", ":"), sort_keys=True).encode()
