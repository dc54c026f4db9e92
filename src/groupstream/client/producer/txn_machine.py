"""`TxnMachine`: the transactional producer's state and what an outcome does to it, the half of the transaction
manager (``transactions``) that sends nothing. It holds the state (``TxnState``, changed only through the
checked ``transition_to``), the open transaction, and the application call waited on, and turns outcomes into
steps: the transaction done (READY, ``produce`` refused until the next ``begin_transaction``), an abortable
error (ABORTABLE_ERROR: the call fails, ``produce`` is refused until ``abort_transaction``), a fatal one
(FATAL_ERROR for good: the idempotence manager's fatal error makes the sender fail every queued batch).
Which broker answer is which outcome is the manager's business (see ``txn_rules`` for the classes)."""

from __future__ import annotations

import logging
from collections.abc import Callable

from groupstream.client.producer.errors import (
    TransactionAbortableError,
    TransactionError,
    TransactionFatalError,
    TransactionStateError,
)
from groupstream.client.producer.idempotence import IdempotenceManager
from groupstream.client.producer.txn_calls import OpenTxn, PendingCall, wrong_state
from groupstream.client.producer.txn_rules import TRANSITIONS, TxnState, txn_error

__all__ = ["TxnMachine"]

log = logging.getLogger("groupstream.client.producer")

S = TxnState


class TxnMachine:
    """The state of one transactional producer. ``refuse(e)`` makes ``produce`` refuse records with ``e``;
    ``end_flush()`` ends the no-linger sending a commit began."""

    def __init__(
        self,
        transactional_id: str,
        idempotence: IdempotenceManager,
        *,
        refuse: Callable[[BaseException], None],
        end_flush: Callable[[], None],
    ) -> None:
        self.transactional_id = transactional_id
        self.state = TxnState.UNINITIALIZED
        self.fatal_error: TransactionError | None = None
        self._idem = idempotence
        self._refuse = refuse
        self._end_flush = end_flush
        self._pending: PendingCall | None = None
        self._txn = OpenTxn()
        self.transactions = 0  # completed (committed or aborted), for tests and metrics
        self._no_txn = TransactionStateError(
            f"produce() outside a transaction (transactional.id={transactional_id!r}): call "
            "init_transactions() once, then begin_transaction()"
        )
        refuse(self._no_txn)

    @property
    def open_txn(self) -> OpenTxn:
        """What the open transaction holds (a two-phase commit's ``prepare_transaction`` names it)."""
        return self._txn

    def transition_to(self, target: TxnState) -> None:
        """The one way the state changes: a step the table does not allow is our bug and raises."""
        previous = self.state
        self.state = TRANSITIONS.check(previous, target, f"transactional producer {self.transactional_id!r}")
        log.debug("transactional.id %s: %s -> %s", self.transactional_id, previous.value, target.value)

    def batch_failed(self, error: BaseException) -> None:
        """A batch of the transaction failed for good: the transaction can only be aborted."""
        if self.state in (S.IN_TRANSACTION, S.COMMITTING):
            self._abortable(
                TransactionAbortableError(f"a record of the transaction was not delivered: {error}")
            )

    def fenced(self, code: int, where: str) -> None:
        """A Produce answer said this producer was fenced (or is not authorized): fatal."""
        self._fatal(txn_error(code, f"transactional.id {self.transactional_id!r}: {where}"))

    def fail_pending(self, error: BaseException) -> None:
        """The producer closes: the call waited on fails with ``error``."""
        self._finish(error)

    def _require(self, kind: str, states: tuple[TxnState, ...]) -> None:
        if self.state not in states:
            raise wrong_state(kind, self.state)

    def _refuse_records(self, why: str) -> None:
        self._refuse(TransactionStateError(why))

    # --- outcomes ---------------------------------------------------------------------------------------------

    def _fail(self, err: TransactionError) -> None:
        """A broker's error that is not retried: fatal or abortable as its class says."""
        if isinstance(err, TransactionFatalError):
            self._fatal(err)
        else:
            self._abortable(err)

    def _abortable(self, err: TransactionError) -> None:
        if self.state in (S.IN_TRANSACTION, S.COMMITTING):
            log.info("transactional.id %s: the transaction must be aborted: %s", self.transactional_id, err)
            self._txn.error = err
            self.transition_to(S.ABORTABLE_ERROR)
            self._refuse_records(f"produce() after the transaction failed ({err}): call abort_transaction()")
            self._end_flush_if_committing()
            self._finish(err)
        elif self.state is S.ABORTABLE_ERROR:
            self._finish(err)

    def _finish_commit_failed(self) -> None:
        """A commit found the transaction failed meanwhile (a batch was not delivered): ABORTABLE_ERROR."""
        err = self._txn.error
        assert err is not None
        self.transition_to(S.ABORTABLE_ERROR)
        self._refuse_records(f"produce() after the transaction failed ({err}): call abort_transaction()")
        self._end_flush_if_committing()
        self._finish(err)

    def _end_flush_if_committing(self) -> None:
        if self._pending is not None and self._pending.kind == "commit":
            self._end_flush()

    def _fatal(self, err: TransactionError) -> None:
        if self.fatal_error is not None:
            return
        log.error("%s", err)  # the message names the transactional id
        self._end_flush_if_committing()
        self.fatal_error = err
        self.transition_to(S.FATAL_ERROR)
        self._idem.fatal_error = err  # the sender fails every batch and produce() raises it
        self._refuse(err)
        self._finish(err)

    def _completed(self) -> None:
        """EndTxn (and the bump after an abort, if one was due) done: READY for the next transaction."""
        kind = self._pending.kind if self._pending is not None else ""
        if kind == "commit":
            self._end_flush()
        self.transactions += 1
        self._txn = OpenTxn()
        self.transition_to(S.READY)
        self._refuse(self._no_txn)
        self._finish(None)

    def _finish(self, err: BaseException | None) -> None:
        """The call waited on is done: its future completes (with ``err``, if any)."""
        pending, self._pending = self._pending, None
        if pending is None or pending.future.done():
            return
        if err is None:
            pending.future.set_result(None)
        else:
            pending.future.set_exception(err)
