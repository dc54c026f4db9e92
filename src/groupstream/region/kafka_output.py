"""A Kafka topic as a consistent region's output, exactly once for read_committed readers (issue 17).

The Parquet sink (`file_sink`) makes a checkpoint interval's rows durable in a prepared file and publishes it
when the region's checkpoint completes; this sink does the same with Kafka transactions (two-phase commit,
``client/producer/prepared.py``):

- the rows a member writes between two checkpoints go, as they come, into one open transaction of this member;
- when the member checkpoints (``prepare``), the transaction is prepared (every record acknowledged, the
  transaction left open) and its identity is recorded in ``<state dir>/_prepared/<checkpoint>-<member>.json``
  (fsynced, renamed into place), beside the region's checkpoint files;
- when the region's checkpoint is complete (``commit``), every recorded transaction of that checkpoint or older is
  committed (EndTxn, answered as done when repeated, so a member that died between the commit and removing the
  record commits again harmlessly) and its record removed;
- a reset (``reset``) aborts the open transaction, commits the recorded ones the checkpoint it resets to covers
  (the member may have died before it heard that checkpoint complete), aborts the later ones, and fences every
  transactional id this member may have left a transaction open on (a member killed mid-interval), so that no
  hanging transaction holds the last stable offset back until its timeout.

Transactional ids: ``<prefix>-<member>-<slot>``. A prepared transaction stays open until its checkpoint
completes, while the next interval's records are already being written, so each interval takes the lowest slot
no recorded transaction holds (two slots in the steady state). A new interval's producer runs
``init_transactions`` on its slot: one InitProducerId per member and checkpoint interval (and one EndTxn per
member and checkpoint) is this sink's cost, and read_committed readers see an interval's records when its
checkpoint completes. ``transaction.timeout.ms`` (producer property; default here 900000, the brokers' default
``transaction.max.timeout.ms``) must exceed two checkpoint periods plus the time a checkpoint takes to complete
plus a member's restart: a recorded transaction the coordinator aborted before its commit is lost.

Rows are mappings with ``value`` and optionally ``key`` (bytes or str).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Protocol

from groupstream.client.producer import Producer
from groupstream.client.producer.prepared import PreparedTransaction, complete_transaction
from groupstream.storage.fileio import fsync_directory

__all__ = ["KafkaCheckpointedSink", "RegionSink"]

log = logging.getLogger("groupstream.region")

PREPARED = "_prepared"
# a prepared transaction must outlive a member's crash and restart until its checkpoint's commit reaches it:
# Kafka's largest allowed timeout by default (transaction.max.timeout.ms), not the producer's 60 s
DEFAULT_TRANSACTION_TIMEOUT_MS = 900_000


class RegionSink(Protocol):
    """What a region member needs of its output: rows in, durable but invisible at a checkpoint, visible when
    the region's checkpoint completes, dropped back to a checkpoint on reset."""

    def write(self, rows: Iterable[Mapping[str, Any]]) -> None: ...

    def prepare(self, checkpoint_id: int) -> None: ...

    def has_prepared(self) -> bool: ...

    def commit(self, upto_checkpoint_id: int) -> int: ...

    def reset(self, to_checkpoint_id: int | None) -> None: ...


def _bytes(value: Any) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    return bytes(value)


class KafkaCheckpointedSink:
    """See the module docstring. ``config`` holds the producer's properties (``bootstrap.servers``, security,
    ``transaction.timeout.ms``, ...); ``state_dir`` is where the prepared transactions are recorded."""

    def __init__(self, config: Mapping[str, Any], topic: str, state_dir: Path, member: str,
                 prefix: str = "groupstream-region") -> None:  # fmt: skip
        if "-" in member or "/" in member:
            raise ValueError(f"member name {member!r} cannot contain '-' or '/' (it names files)")
        self.config = {k: v for k, v in config.items() if k != "transactional.id"}
        self.topic = topic
        self.member = member
        self.prefix = prefix
        self.prepared_dir = Path(state_dir) / PREPARED
        self.prepared_dir.mkdir(parents=True, exist_ok=True)
        self._producer: Producer | None = None
        self._slot: int | None = None
        self._rows = 0

    # --- the open interval ------------------------------------------------------------------------------

    def transactional_id(self, slot: int) -> str:
        return f"{self.prefix}-{self.member}-{slot}"

    def _open(self) -> Producer:
        if self._producer is None:
            held = {s for _, s, _ in self._prepared()}
            slot = next(s for s in range(len(held) + 1) if s not in held)
            producer = Producer({"acks": "all", "linger.ms": 5, "transaction.timeout.ms": DEFAULT_TRANSACTION_TIMEOUT_MS,
                                 **self.config, "transactional.id": self.transactional_id(slot)})  # fmt: skip
            try:
                producer.init_transactions()  # fences whatever an earlier incarnation left open on this slot
                producer.begin_transaction()
            except BaseException:
                producer.close(5)
                raise
            self._producer, self._slot = producer, slot
        return self._producer

    def write(self, rows: Iterable[Mapping[str, Any]]) -> None:
        for row in rows:
            producer = self._open()
            # a row's input partition says nothing of the output topic's: the key (or the partitioner) decides
            producer.produce(self.topic, _bytes(row.get("value")), _bytes(row.get("key")))
            self._rows += 1

    @property
    def buffered(self) -> int:
        """Rows written in the open interval."""
        return self._rows

    def _close_open(self, abort: bool) -> None:
        producer, self._producer, self._slot, self._rows = self._producer, None, None, 0
        if producer is None:
            return
        try:
            if abort:
                producer.abort_transaction(10)
        except Exception as e:  # the slot's next init_transactions aborts it instead
            log.warning("member %s: aborting the open transaction failed: %s", self.member, e)
        finally:
            producer.close(10)

    # --- checkpoints ------------------------------------------------------------------------------------

    def prepare(self, checkpoint_id: int) -> None:
        """The member checkpoints: its records since the last checkpoint are acknowledged and the transaction
        holding them is recorded, not yet committed."""
        producer = self._producer
        if producer is None:
            return
        try:
            prepared = producer.prepare_transaction()
        except BaseException:
            self._close_open(abort=True)
            raise
        final = self.prepared_dir / f"{checkpoint_id:012d}-{self.member}.json"
        tmp = self.prepared_dir / f".{final.name}.tmp"
        with tmp.open("w", encoding="utf-8") as f:
            f.write(prepared.dumps())
            f.flush()
            os.fsync(f.fileno())
        tmp.replace(final)
        fsync_directory(self.prepared_dir)
        self._close_open(abort=False)

    def _prepared(self) -> list[tuple[int, int, Path]]:
        """(checkpoint id, slot, record path) of this member's recorded transactions, oldest first."""
        out = []
        for path in self.prepared_dir.glob(f"*-{self.member}.json"):
            cid, _, member = path.stem.partition("-")
            if member != self.member or not cid.isdigit():
                continue
            tid = PreparedTransaction.from_json(json.loads(path.read_text())).transactional_id
            slot = tid.rsplit("-", 1)[-1]
            out.append((int(cid), int(slot) if slot.isdigit() else -1, path))
        return sorted(out)

    def has_prepared(self) -> bool:
        return bool(self._prepared())

    def _complete(self, path: Path, commit: bool) -> None:
        prepared = PreparedTransaction.from_json(json.loads(path.read_text()))
        complete_transaction(self.config, prepared, commit)
        path.unlink()

    def commit(self, upto_checkpoint_id: int) -> int:
        """The region's checkpoint ``upto_checkpoint_id`` is complete: commit this member's recorded transactions
        of it and older ones. Returns how many."""
        done = 0
        for cid, _slot, path in self._prepared():
            if cid <= upto_checkpoint_id:
                self._complete(path, True)
                done += 1
        if done:
            fsync_directory(self.prepared_dir)
        return done

    def reset(self, to_checkpoint_id: int | None) -> None:
        """The region resets to ``to_checkpoint_id`` (None: its initial state): keep what that checkpoint covers,
        abort everything after it, and fence the slots an earlier incarnation may have left a transaction on."""
        self._close_open(abort=True)
        recorded = self._prepared()
        if to_checkpoint_id is not None:
            self.commit(to_checkpoint_id)
        for cid, _slot, path in self._prepared():
            if to_checkpoint_id is None or cid > to_checkpoint_id:
                self._complete(path, False)
        for tmp in self.prepared_dir.glob(f".*-{self.member}.json.tmp"):
            tmp.unlink()
        fsync_directory(self.prepared_dir)
        # the interval being written when an earlier incarnation died took the lowest slot its recorded
        # transactions did not hold: at most len(recorded)
        for slot in range(len(recorded) + 2):
            self._fence(slot)

    def _fence(self, slot: int) -> None:
        producer = Producer({**self.config, "transactional.id": self.transactional_id(slot)})
        try:
            producer.init_transactions()
        finally:
            producer.close(5)

    def close(self) -> None:
        """Stop: the open interval's records are aborted (they are read again after a restart)."""
        self._close_open(abort=True)
