"""Data loss between two positions of a stream, as Spark's Kafka source defines it, and better. Pure: no I/O.

A stream's position is its offsets and the ids of the topics they were taken in. Between the start of a
micro-batch and its end (where every partition is now) three things lose records the query was to read:

* a partition's offset **went back** (Spark: ``Partition t-0's offset was changed from X to Y, some data may
  have been missed``): its log was truncated, or, when topic ids are unknown, perhaps deleted and created again;
* a topic was **recreated**: deleted and created again under the same name, seen by its new topic id, also when
  the new topic's offsets are already past the old ones (Spark's source cannot see that case and silently skips
  the new topic's first records);
* a partition is **gone**: its topic was deleted (and not, or not yet, created again).

With ``failOnDataLoss`` true each is an error that fails the query; with false each is logged once, and the
query goes on: a recreated topic (or a partition that went back while ids are unknown, most likely the same
thing) is read from its earliest offsets, so nothing of the new topic is lost; a partition that went back in the
same topic goes on from its new end, as Spark does; a gone partition is dropped from the position, so it is read
from its earliest offset if it comes back.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum

__all__ = [
    "ClusterView",
    "DataLoss",
    "LossKind",
    "Position",
    "error_text",
    "find_losses",
    "next_end",
    "starts",
    "warning_text",
]

from groupstream.protocol.topic_partition import TopicPartition


@dataclass(frozen=True)
class Position:
    """Offsets of a stream, and the ids of the topics they belong to (absent: unknown)."""

    offsets: Mapping[TopicPartition, int]
    topic_ids: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ClusterView:
    """What the driver sees of the subscribed partitions at one moment: the log end of every partition that
    exists, the ids of their topics, and the topics that exist but answered with an error (a leader being
    elected): those are neither read nor taken for gone until they answer again."""

    latest: Mapping[TopicPartition, int]
    topic_ids: Mapping[str, str] = field(default_factory=dict)
    unsettled: frozenset[str] = frozenset()


class LossKind(StrEnum):
    WENT_BACK = "went back"
    RECREATED = "recreated"
    GONE = "gone"


@dataclass(frozen=True)
class DataLoss:
    """One event: a topic's partitions that went back, were recreated or are gone, each with the offset the
    query had reached (``was``) and where the partition is now (``now``, None when it does not exist)."""

    kind: LossKind
    topic: str
    partitions: tuple[tuple[int, int, int | None], ...]  # (partition, was, now)
    old_id: str | None = None
    new_id: str | None = None
    topic_gone: bool = False  # GONE: the whole topic (else some of its partitions)

    def describe(self) -> str:
        t = self.topic
        if self.kind is LossKind.GONE:
            listed = ", ".join(f"{t}-{p} (at offset {was})" for p, was, _ in self.partitions)
            are = "Partitions {} are" if len(self.partitions) > 1 else "Partition {} is"
            cause = f"topic {t} was deleted" if self.topic_gone else f"topic {t} has fewer partitions now"
            return f"{are.format(listed)} gone, some data may have been missed: {cause}"
        changes = []
        for p, was, now in self.partitions:
            if now is None:
                changes.append(f"partition {t}-{p} (at offset {was}) is gone")
            elif not changes:
                changes.append(f"Partition {t}-{p}'s offset was changed from {was} to {now}")
            else:
                changes.append(f"partition {t}-{p}'s from {was} to {now}")
        text = ", ".join(changes)
        text = text[0].upper() + text[1:]
        if self.kind is LossKind.RECREATED:
            return (
                f"{text}, some data may have been missed: topic {t} was deleted and created again "
                f"(topic id {self.old_id} is now {self.new_id})"
            )
        if self.old_id is None:
            return f"{text}, some data may have been missed (was topic {t} deleted and created again?)"
        return f"{text}, some data may have been missed"

    @property
    def reads_from_earliest(self) -> bool:
        """With failOnDataLoss false: read the partitions again from their earliest offsets (a new topic)."""
        return self.kind is LossKind.RECREATED or (self.kind is LossKind.WENT_BACK and self.old_id is None)


def error_text(what: str) -> str:
    """The error of failOnDataLoss=true, in the words of Spark's Kafka source."""
    return (
        f"{what}. Some data may have been lost because it is not in Kafka any more: either retention deleted it, "
        "or the topic was deleted (and perhaps created again) before all of it was read. If you don't want your "
        "query to fail in such cases, set the source option failOnDataLoss to false."
    )


def warning_text(loss: DataLoss) -> str:
    """The one warning of failOnDataLoss=false, saying how the query goes on."""
    if loss.reads_from_earliest:
        what = f"the query reads topic {loss.topic}'s partitions from their earliest offsets"
    elif loss.kind is LossKind.WENT_BACK:
        what = "the query goes on from the new offsets"
    else:
        what = "the query goes on without them (it reads them from their earliest offsets if they come back)"
    return f"{loss.describe()}; failOnDataLoss=false, so {what}"


def _by_topic(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[int, int]]:
    out: dict[str, dict[int, int]] = {}
    for (t, p), o in sorted(offsets.items()):
        out.setdefault(t, {})[p] = o
    return out


def next_end(begin: Position, view: ClusterView, target: Position | None = None) -> Position:
    """Where the next micro-batch ends before read limits: every partition where it is now. Nothing is lifted
    to where the query was (a partition that went back ends below its start, a gone one is left out), so that
    `find_losses` sees what happened. Unsettled topics keep their place.

    ``target`` (Trigger.AvailableNow: the position when the run began) caps partitions of the topic it saw; a
    partition it did not see stays where it was, and so does a topic recreated since the run began, under its
    old id, so that the next run notices the new topic."""
    offsets = {tp: o for tp, o in view.latest.items() if tp[0] not in view.unsettled}
    ids = {t: i for t, i in view.topic_ids.items() if t not in view.unsettled}
    for t in view.unsettled:
        offsets.update({tp: o for tp, o in begin.offsets.items() if tp[0] == t})
        if t in begin.topic_ids:
            ids[t] = begin.topic_ids[t]
    if target is not None:
        for t in sorted({tp[0] for tp in offsets}):
            parts = [tp for tp in offsets if tp[0] == t]
            if target.topic_ids.get(t) == ids.get(t):
                for tp in parts:
                    if tp in target.offsets:
                        offsets[tp] = min(offsets[tp], target.offsets[tp])
                    elif tp in begin.offsets:
                        offsets[tp] = begin.offsets[tp]
                    else:
                        del offsets[tp]
            else:  # not the topic the run began with: it waits for the next run
                for tp in parts:
                    del offsets[tp]
                offsets.update({tp: o for tp, o in begin.offsets.items() if tp[0] == t})
                ids.pop(t, None)
                if t in begin.topic_ids:
                    ids[t] = begin.topic_ids[t]
    return Position(offsets, {t: i for t, i in ids.items() if any(tp[0] == t for tp in offsets)})


def find_losses(begin: Position, end: Position) -> list[DataLoss]:
    """The data-loss events between two positions, one per topic and kind, in topic order."""
    out: list[DataLoss] = []
    ends = _by_topic(end.offsets)
    for t, was in _by_topic(begin.offsets).items():
        now = ends.get(t, {})
        old, new = begin.topic_ids.get(t), end.topic_ids.get(t)
        if not now:
            out.append(DataLoss(LossKind.GONE, t, tuple((p, o, None) for p, o in was.items()), old, None, True))
        elif old is not None and new is not None and old != new:
            out.append(DataLoss(LossKind.RECREATED, t, tuple((p, o, now.get(p)) for p, o in was.items()), old, new))
        else:
            gone = tuple((p, o, None) for p, o in was.items() if p not in now)
            if gone:
                out.append(DataLoss(LossKind.GONE, t, gone, old, new))
            back = tuple((p, o, now[p]) for p, o in was.items() if p in now and now[p] < o)
            if back:
                out.append(DataLoss(LossKind.WENT_BACK, t, back, old, new))
    return out


def starts(
    begin: Position,
    end: Position,
    losses: Iterable[DataLoss],
    earliest: Callable[[list[TopicPartition]], Mapping[TopicPartition, int]],
) -> dict[TopicPartition, int]:
    """Where each partition of ``end`` is read from when the query goes on past ``losses``: where it was,
    except new partitions and those `DataLoss.reads_from_earliest` (their earliest offsets, from
    ``earliest(tps)``) and partitions that went back in the same topic (their new end: nothing is read)."""
    again = {(loss.topic, p) for loss in losses if loss.reads_from_earliest for p, _, _ in loss.partitions}
    again |= {tp for loss in losses if loss.kind is LossKind.RECREATED for tp in end.offsets if tp[0] == loss.topic}
    fresh = sorted(tp for tp in end.offsets if tp not in begin.offsets or tp in again)
    out = dict(earliest(fresh)) if fresh else {}
    for tp, e in end.offsets.items():
        if tp not in out:
            out[tp] = min(begin.offsets[tp], e)
    return out
