"""Two-phase commit with Kafka transactions (issue 17): a producer finishes writing a transaction without ending
it, and whoever holds the transaction's identity ends it later, from another process if need be.

Why: a Spark task or a consistent region's member writes its share of an output; only the driver (or the
region's checkpoint) knows whether every share was written, so the one that decides must be able to commit the
others' transactions. Kafka's coordinator ends a transaction given its transactional id, producer id and epoch
(EndTxn), whoever sends it, so that triple is all the decision needs:

- ``prepare_transaction(producer, timeout)`` sends every record of the open transaction and waits until each
  batch is acknowledged (the partitions are registered with the coordinator before a batch may go), then
  returns a `PreparedTransaction`. The transaction stays open on the broker: closing the producer does not end
  it (our producer, like Java's, sends no EndTxn on close); a later ``init_transactions`` with the same id (a
  retried task) aborts it, and so does the coordinator after ``transaction.timeout.ms``, so that timeout must
  exceed the time from the first record to the decision.
- ``complete_transaction(config, prepared, commit)`` finds the id's coordinator (FindCoordinator key_type 1) and
  sends EndTxn(commit or abort) with that producer id and epoch through the network core's `SyncClient` (the
  Admin client's channels). A retry of the same decision is answered NONE by the coordinator (Kafka's
  TransactionCoordinator, and ours, answer a repeated commit of a CompleteCommit transaction, or a repeated
  abort of a CompleteAbort one, with NONE at the same epoch), so the decider may complete again after a crash
  without knowing whether its first EndTxn arrived. EndTxn is sent at v4 at most: v5 (KIP-890 part 2) makes
  the coordinator bump the epoch at each end, after which a retry carries a stale epoch; with v4 the epoch is
  the one the producer had, which is what the prepared identity records. v4 also ends a transaction a producer
  opened with transaction.version 2 (partitions added by Produce v12), as observed on Kafka 4.4 (the
  coordinator appears to pick the ending's protocol by the EndTxn version): committed, its repeat answered
  NONE, the epoch kept.
- An abort that finds the epoch bumped or the id remapped (PRODUCER_FENCED, INVALID_PRODUCER_EPOCH,
  INVALID_PRODUCER_ID_MAPPING) is done: a newer producer of the id, or the coordinator's timeout, has already
  aborted whatever was open. A commit that finds them is not: the records are lost to read_committed readers
  and `PreparedTransactionLost` says so (raise the transaction timeout).
- A transaction to which nothing was added (no record, no offsets) is not open on the coordinator at all:
  ``partitions`` is empty and completing it does nothing (EndTxn would be refused with INVALID_TXN_STATE).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from groupstream.client.admin.types import _COORDINATOR_ERRORS, _Retry
from groupstream.client.errors import KafkaError, check
from groupstream.client.net.config import NETWORK_PROPERTIES
from groupstream.client.producer.errors import TransactionStateError
from groupstream.protocol.error_codes import ErrorCode
from groupstream.protocol.messages import by_name

if TYPE_CHECKING:
    from groupstream.client.producer.producer import Producer

_TXN_KEY = 1  # FindCoordinator key type of a transactional id
_END_TXN_MAX = 4  # see the module docstring: v5 bumps the epoch at every end
_GONE = frozenset(
    {ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.INVALID_PRODUCER_ID_MAPPING}
)


class PreparedTransactionLost(KafkaError):
    """A commit decision came too late: the transaction was aborted meanwhile (its timeout passed, or a newer
    producer of the same transactional id started), so its records will never be visible to read_committed."""


@dataclass(frozen=True)
class PreparedTransaction:
    """An open transaction whose records are all on the broker, identified as its coordinator knows it.
    ``partitions`` are the ``(topic, partition)`` pairs it wrote; ``offsets`` says whether it holds a group's
    offsets (either makes it open on the coordinator)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    partitions: tuple[tuple[str, int], ...] = ()
    offsets: bool = False

    @property
    def empty(self) -> bool:
        """Nothing was added: no transaction is open on the coordinator, and there is nothing to complete."""
        return not self.partitions and not self.offsets

    def to_json(self) -> dict[str, Any]:
        """A JSON-able form, for a decision log or a checkpoint."""
        return {
            "transactional_id": self.transactional_id,
            "producer_id": self.producer_id,
            "producer_epoch": self.producer_epoch,
            "partitions": [[t, p] for t, p in self.partitions],
            "offsets": self.offsets,
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> PreparedTransaction:
        return cls(
            str(d["transactional_id"]),
            int(d["producer_id"]),
            int(d["producer_epoch"]),
            tuple((str(t), int(p)) for t, p in d.get("partitions", ())),
            bool(d.get("offsets", False)),
        )

    def dumps(self) -> str:
        return json.dumps(self.to_json(), sort_keys=True)


def prepare_transaction(producer: Producer, timeout: float | None = None) -> PreparedTransaction:
    """Send every record of ``producer``'s open transaction and wait (at most ``timeout`` seconds, None:
    ``max.block.ms``) until each is acknowledged; leave the transaction open and return its identity. The
    producer then refuses further records; close it, or commit/abort the transaction with it."""
    txn = producer._txn
    if txn is None:
        raise TransactionStateError(
            "prepare_transaction(): this producer has no transactional.id (set it to use transactions)"
        )
    from groupstream.client.producer.txn_rules import TxnState

    if txn.state is not TxnState.IN_TRANSACTION:
        raise TransactionStateError(
            f"prepare_transaction() in state {txn.state.value}: only an open transaction can be prepared"
        )
    wait = producer.config.max_block_ms / 1000 if timeout is None or timeout < 0 else timeout
    left = producer.flush(wait)
    if left:
        raise TransactionStateError(
            f"prepare_transaction(): {left} records not acknowledged within {wait} s; abort the transaction"
        )
    if txn.fatal_error is not None:
        raise txn.fatal_error
    failed = txn.open_txn.error
    if failed is not None or txn.state is not TxnState.IN_TRANSACTION:
        raise failed or TransactionStateError(
            f"prepare_transaction(): the transaction left IN_TRANSACTION ({txn.state.value}); abort it"
        )
    with producer._acc.lock:
        producer._acc.refuse(
            TransactionStateError(
                "produce() after prepare_transaction(): the prepared transaction takes no more records"
            )
        )
    idem = txn._idem
    return PreparedTransaction(
        txn.transactional_id,
        int(idem.producer_id),
        int(idem.producer_epoch),
        tuple(sorted(txn.open_txn.added)),
        bool(txn.open_txn.offsets_added),
    )


def complete_transaction(
    config: Mapping[str, Any], prepared: PreparedTransaction, commit: bool
) -> None:
    """End ``prepared`` (commit when ``commit``, else abort) on its coordinator, as reached with ``config``'s
    network properties (``bootstrap.servers``, security, timeouts; other keys, such as a producer's, are
    ignored). Idempotent for the same decision; retried while the coordinator moves, loads or is still writing
    an earlier transaction's markers, up to ``request.timeout.ms``."""
    if prepared.empty:
        return
    from groupstream.client.admin import Admin

    known = set(NETWORK_PROPERTIES)
    net = {k: v for k, v in config.items() if k in known or k.replace("_", ".") in known}
    what = f"transactional id {prepared.transactional_id!r}"
    R: Any = by_name("EndTxn").Request
    with Admin(net) as admin:

        def attempt() -> None:
            _node, host, port = admin._find_coordinator(prepared.transactional_id, _TXN_KEY)
            conn = admin._conn_to(host, port)
            version = conn.version_for("EndTxn", _END_TXN_MAX)
            body = R(
                transactional_id=prepared.transactional_id,
                producer_id=prepared.producer_id,
                producer_epoch=prepared.producer_epoch,
                committed=commit,
            )
            code = int(admin._request(conn, "EndTxn", body, version).error_code)
            if code in _COORDINATOR_ERRORS or code == ErrorCode.CONCURRENT_TRANSACTIONS:
                raise _Retry(code)
            if code in _GONE:
                if not commit:
                    return  # a newer epoch (or producer id) of this id: what was open is aborted already
                raise PreparedTransactionLost(
                    code,
                    "the transaction was aborted before its commit (transaction.timeout.ms passed, or a newer "
                    "producer of this id started); raise transaction.timeout.ms above the time to a decision",
                    resource=what,
                )
            check(code, resource=what)

        admin._retrying(what, attempt)
