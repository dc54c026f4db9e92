"""The output ledger: the region's merged checkpoint for pipelines whose members checkpoint on their own.

Several pipeline instances (Spark queries in separate processes, or on separate clusters sharing a file
system) share one consumer group and one output table. Each micro-batch of a member is that member's
checkpoint: it read exact offset ranges of the partitions it owns, and its output is published together with
the offsets it covers, in one atomic step. The ledger is the sequence of those steps, and its latest entry
holds, per partition, the offset up to which output is published: the merge of every member's checkpoints.
After a rebalance (or a crash, or a restart) each member resets its partitions to the ledger's offsets.

Publishing is a compare-and-set per partition: a batch is published only if, for every partition it read, its
range starts exactly where the ledger says that partition's published output ends. A member that lost a
partition and did not notice yet (its batch was planned before the rebalance) can therefore never publish
records the new owner also publishes: whichever batch comes second no longer starts at the ledger's offset
and is dropped, and its member re-reads from the ledger. So the output holds every record exactly once
whatever the timing of rebalances, crashes and retries.

The ledger also keeps the id of the topic each partition's offset belongs to, when the batch says. A topic
deleted and created again under the same name starts its offsets anew: a batch that reads the new topic from
its start says which published offset and topic id it replaces (``expected``), and the compare-and-set is on
that pair, so a batch planned against the old topic can never be published over the new one, nor two restarts
of the same partition both.

On disk, under the table directory: ``_ledger/<seq>.json`` entries, created with an exclusive link (two
members racing for the same sequence number: one wins, the other re-checks against the winner's entry), and the
output files each entry lists, moved from ``_staging`` into the table after the entry exists. The entry is the
commit point; a member that finds listed files still staged (its publisher died between the two steps) moves
them (``recover``). Names starting with ``_`` are invisible to Spark and pyarrow readers of the table.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from groupstream.protocol.topic_partition import TopicPartition
from groupstream.storage.fileio import fsync_directory

"""(topic, partition): plain tuples, as the Spark source plans them."""

__all__ = ["LEDGER_DIR", "STAGING_DIR", "LedgerEntry", "OffsetLedger", "PublishRejected"]

LEDGER_DIR = "_ledger"
STAGING_DIR = "_staging"
_KEEP_ENTRIES = 100
"""Older entries are retired: the latest entry alone holds the merged offsets."""

Ranges = Mapping[TopicPartition, tuple[int, int]]
Expected = Mapping[TopicPartition, tuple[int, str | None]]
"""Per partition, the published offset and topic id a batch was planned against (default: its range start and
the topic id it read)."""


class PublishRejected(Exception):
    """A batch's ranges no longer start where the ledger says: another member published those offsets."""

    def __init__(self, conflicts: Mapping[TopicPartition, tuple[int, int | None]]) -> None:
        self.conflicts = dict(conflicts)
        shown = ", ".join(
            f"{t}-{p}: batch starts at {s}, published up to {e}" for (t, p), (s, e) in sorted(conflicts.items())
        )
        super().__init__(f"batch not published, its ranges are stale ({shown})")


@dataclass(frozen=True, slots=True)
class LedgerEntry:
    seq: int
    member: str
    batch: str
    offsets: dict[TopicPartition, int]
    """Every partition's published end after this entry (the merged checkpoint)."""
    files: tuple[tuple[str, str], ...]
    """(name in the table, path in the staging area) of each output file it publishes."""
    topic_ids: dict[TopicPartition, str] = field(default_factory=dict)
    """The id of the topic each partition's offset belongs to, where known."""

    def to_json(self) -> str:
        rows = [[t, p, o, *([self.topic_ids[TopicPartition(t, p)]] if (t, p) in self.topic_ids else [])]
                for (t, p), o in sorted(self.offsets.items())]  # fmt: skip
        return json.dumps(
            {
                "seq": self.seq,
                "member": self.member,
                "batch": self.batch,
                "offsets": rows,
                "files": [list(f) for f in self.files],
            },
            sort_keys=True,
        )

    @classmethod
    def from_json(cls, text: str) -> LedgerEntry:
        raw = json.loads(text)
        rows = raw["offsets"]  # [topic, partition, offset] or, with the topic id, [..., id]
        return cls(
            seq=int(raw["seq"]),
            member=str(raw["member"]),
            batch=str(raw["batch"]),
            offsets={TopicPartition(str(r[0]), int(r[1])): int(r[2]) for r in rows},
            files=tuple((str(name), str(staged)) for name, staged in raw["files"]),
            topic_ids={TopicPartition(str(r[0]), int(r[1])): str(r[3]) for r in rows if len(r) > 3},
        )


def _remove_if_empty(directory: Path, stop: Path) -> None:
    if directory != stop and directory.exists() and not any(directory.iterdir()):
        directory.rmdir()


class OffsetLedger:
    def __init__(self, root: Path | str) -> None:
        self.root = Path(root)
        self.ledger_dir = self.root / LEDGER_DIR
        self.staging_dir = self.root / STAGING_DIR
        self.ledger_dir.mkdir(parents=True, exist_ok=True)
        self.staging_dir.mkdir(parents=True, exist_ok=True)

    # --- reading -----------------------------------------------------------------------------------------

    def _seqs(self) -> list[int]:
        return sorted(int(p.stem) for p in self.ledger_dir.glob("*.json") if p.stem.isdigit())

    def latest(self) -> LedgerEntry | None:
        seqs = self._seqs()
        if not seqs:
            return None
        return LedgerEntry.from_json((self.ledger_dir / f"{seqs[-1]:016d}.json").read_text())

    def offsets(self, partitions: Iterable[TopicPartition] | None = None) -> dict[TopicPartition, int]:
        """Published ends, of ``partitions`` (those the ledger knows) or of all."""
        entry = self.latest()
        known = {} if entry is None else entry.offsets
        if partitions is None:
            return dict(known)
        return {tp: known[tp] for tp in partitions if tp in known}

    def topic_ids(self) -> dict[TopicPartition, str]:
        """The topic id each published offset belongs to, where known."""
        entry = self.latest()
        return {} if entry is None else dict(entry.topic_ids)

    # --- publishing --------------------------------------------------------------------------------------

    def staging_path(self, member: str, batch: str) -> Path:
        """A fresh directory for a batch's output files before they are published."""
        path = self.staging_dir / f"{member}-{batch}-{uuid.uuid4().hex[:8]}"
        path.mkdir(parents=True)
        return path

    def check(
        self, ranges: Ranges, topic_ids: Mapping[TopicPartition, str] | None = None, expected: Expected | None = None
    ) -> dict[TopicPartition, tuple[int, int | None]]:
        """The partitions whose range was not planned against what is published now (empty: publishable now):
        by default, a range must start at the published end, and its topic id (``topic_ids``, where given)
        be the one the ledger has for that partition, where known; ``expected`` names another published offset
        and id for partitions read anew after a data loss. A partition the ledger has never seen accepts any
        start: its first owner sets it."""
        entry = self.latest()
        published = {} if entry is None else entry.offsets
        published_ids = {} if entry is None else entry.topic_ids
        ids, anew = topic_ids or {}, expected or {}
        out: dict[TopicPartition, tuple[int, int | None]] = {}
        for tp, (start, _end) in ranges.items():
            if tp not in published:
                continue
            offset, topic_id = anew.get(tp, (start, ids.get(tp)))
            have_id = published_ids.get(tp)
            if published[tp] != offset or (topic_id is not None and have_id is not None and topic_id != have_id):
                out[tp] = (start, published[tp])
        return out

    def publish(
        self,
        member: str,
        batch: str,
        ranges: Ranges,
        staged: Sequence[Path],
        topic_ids: Mapping[TopicPartition, str] | None = None,
        expected: Expected | None = None,
    ) -> LedgerEntry:
        """Publish ``staged`` output files (in this root's staging area) covering ``ranges`` atomically with
        the new offsets (and the ``topic_ids`` they were read in); raise `PublishRejected` (and delete the
        staged files) when a range is stale (see `check`)."""
        while True:
            entry = self.latest()
            conflicts = self.check(ranges, topic_ids, expected)
            if conflicts:
                self.discard(staged)
                raise PublishRejected(conflicts)
            offsets = {} if entry is None else dict(entry.offsets)
            offsets.update({tp: end for tp, (_start, end) in ranges.items()})
            ids = {} if entry is None else dict(entry.topic_ids)
            for tp in ranges:
                if topic_ids and tp in topic_ids:
                    ids[tp] = topic_ids[tp]
                else:
                    ids.pop(tp, None)
            seq = 1 if entry is None else entry.seq + 1
            files = tuple(
                (f"part-{seq:016d}-{i:04d}-{member}{p.suffix}", str(p.relative_to(self.staging_dir)))
                for i, p in enumerate(staged)
            )
            new = LedgerEntry(seq, member, batch, offsets, files, ids)
            if self._create_entry(new):
                break
            # another member took this sequence number first: check our ranges against its entry
        self._move_into_table(new)
        self._retire(seq)
        return new

    def _create_entry(self, entry: LedgerEntry) -> bool:
        tmp = self.ledger_dir / f".{entry.seq:016d}-{uuid.uuid4().hex[:8]}.tmp"
        with tmp.open("w") as f:
            f.write(entry.to_json())
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, self.ledger_dir / f"{entry.seq:016d}.json")  # fails if the name exists: our CAS
        except FileExistsError:
            return False
        finally:
            tmp.unlink()
        fsync_directory(self.ledger_dir)
        return True

    def _move_into_table(self, entry: LedgerEntry) -> None:
        moved = False
        for name, staged in entry.files:
            source = self.staging_dir / staged
            if source.exists():
                source.replace(self.root / name)
                moved = True
                _remove_if_empty(source.parent, self.staging_dir)
        if moved:
            fsync_directory(self.root)

    def recover(self, member: str) -> None:
        """Finish what a publisher that died left half done: files of entries that exist are moved into the
        table; ``member``'s staged files that no entry lists (a batch that never got published) are
        deleted, since their records will be read again."""
        listed: set[str] = set()
        for seq in self._seqs():
            entry = LedgerEntry.from_json((self.ledger_dir / f"{seq:016d}.json").read_text())
            self._move_into_table(entry)
            listed.update(staged for _name, staged in entry.files)
        for path in sorted(self.staging_dir.glob(f"{member}-*/**/*")):
            if path.is_file() and str(path.relative_to(self.staging_dir)) not in listed:
                path.unlink()
        for d in sorted(self.staging_dir.glob(f"{member}-*"), reverse=True):
            if d.is_dir():
                for sub in sorted((x for x in d.rglob("*") if x.is_dir()), key=lambda x: -len(x.parts)):
                    _remove_if_empty(sub, self.staging_dir)
                _remove_if_empty(d, self.staging_dir)

    def discard(self, staged: Sequence[Path]) -> None:
        for path in staged:
            path.unlink(missing_ok=True)
            _remove_if_empty(path.parent, self.staging_dir)

    def _retire(self, seq: int) -> None:
        for old in self._seqs():
            if old <= seq - _KEEP_ENTRIES:
                (self.ledger_dir / f"{old:016d}.json").unlink(missing_ok=True)

    def files(self) -> list[Path]:
        """The table's published files, in ledger order."""
        return sorted(self.root.glob("part-*"))
