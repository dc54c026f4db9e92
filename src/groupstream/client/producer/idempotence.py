"""Idempotence bookkeeping (KIP-98, KIP-360) and the InitProducerId request manager. Pure.

The producer gets a producer id and epoch from InitProducerId before its first batch goes out. Each batch is
stamped at its first send with the partition's next sequence; the broker keeps each producer's last five
batches per partition, so a resent batch (same id, epoch, sequence) is recognised as a duplicate and not
written twice, and a gap is refused with OUT_OF_ORDER_SEQUENCE_NUMBER.

When the sequences of a partition can no longer be trusted (the broker lost the producer's state:
UNKNOWN_PRODUCER_ID; or refuses the first unacknowledged batch as out of order; or a batch with a sequence
failed for good and left a gap), the epoch is bumped, as KIP-360 lets an idempotent producer do: once no
request is in flight, InitProducerId is sent with the current id and epoch (v3+; older brokers hand out a new
id instead), every partition's sequence restarts at 0 and the queued batches are renumbered in order.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from groupstream.client.errors import KafkaError
from groupstream.client.net.config import exponential_backoff_ms
from groupstream.client.net.requests import ClientResponse, PollResult, UnsentRequest
from groupstream.client.producer.batch import ProducerBatch
from groupstream.protocol.error_codes import ErrorCode
from groupstream.protocol.messages import by_name

log = logging.getLogger("groupstream.client.producer")

_INIT_PRODUCER_ID = by_name("InitProducerId")
SEQUENCE_MODULUS = 2**31  # sequences wrap from int32 max to 0
MAX_EPOCH = 32767
_INT32_MAX = 2**31 - 1
_RETRIABLE_INIT = frozenset(
    {
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.CONCURRENT_TRANSACTIONS,
        ErrorCode.REQUEST_TIMED_OUT,
        ErrorCode.NETWORK_EXCEPTION,
    }
)


def add_sequence(sequence: int, count: int) -> int:
    return (sequence + count) % SEQUENCE_MODULUS


@dataclass
class PartitionSequence:
    next_sequence: int = 0
    last_acked: int = -1  # last sequence the broker acknowledged at the current epoch


class IdempotenceManager:
    """Owns the producer id, the epoch and every partition's sequences; polled before the sender."""

    def __init__(
        self,
        *,
        retry_backoff_ms: int,
        retry_backoff_max_ms: int,
        in_flight_batches: Callable[[], int],
    ) -> None:
        self.producer_id = -1
        self.producer_epoch = -1
        self.bump_required = False
        self.bump_reason = ""
        self.fatal_error: BaseException | None = None
        self.epoch_changes = 0
        # a transactional producer's id and epoch come from its transaction manager (InitProducerId with the
        # transactional id, at its coordinator), which also does the bumps: this manager sends nothing then
        self.transactional = False
        self._retry_backoff_ms = retry_backoff_ms
        self._retry_backoff_max_ms = retry_backoff_max_ms
        self._in_flight_batches = in_flight_batches
        self._partitions: dict[tuple[str, int], PartitionSequence] = {}
        self._request_out = False
        self._attempts = 0
        self._retry_at_ms = 0
        # set by the sender: renumber the queued batches after the epoch changed
        self.on_new_epoch: Callable[[], None] = lambda: None

    # --- producer id ------------------------------------------------------------------------------------------

    @property
    def ready(self) -> bool:
        """Batches may be stamped and sent: an id is known and no bump is waiting."""
        return self.producer_id >= 0 and not self.bump_required and self.fatal_error is None

    def request_bump(self, reason: str) -> None:
        if not self.bump_required:
            log.info(
                "producer %s epoch %s: bumping the epoch (%s)", self.producer_id, self.producer_epoch, reason
            )
        self.bump_required = True
        self.bump_reason = reason

    def poll(self, now_ms: int) -> PollResult:
        if self.fatal_error is not None or self._request_out or self.transactional:
            return PollResult()
        if self.producer_id >= 0 and not self.bump_required:
            return PollResult()
        if self.bump_required and self._in_flight_batches() > 0:
            return PollResult()  # a response is awaited; it wakes the loop
        if now_ms < self._retry_at_ms:
            return PollResult((), self._retry_at_ms - now_ms)
        self._request_out = True
        bump = self.bump_required and self.producer_id >= 0 and self.producer_epoch < MAX_EPOCH
        pid, epoch = (self.producer_id, self.producer_epoch) if bump else (-1, -1)
        request = UnsentRequest(_INIT_PRODUCER_ID, lambda v: self._body(v, pid, epoch), self._on_response)
        return PollResult((request,), None)

    @staticmethod
    def _body(version: int, pid: int, epoch: int) -> Any:
        R: Any = _INIT_PRODUCER_ID.Request
        if version < 3:
            pid, epoch = -1, -1  # no KIP-360 bump before v3: a fresh id does the same job
        return R(
            transactional_id=None, transaction_timeout_ms=_INT32_MAX, producer_id=pid, producer_epoch=epoch
        )

    def _on_response(self, response: ClientResponse) -> None:
        self._request_out = False
        now = response.received_ms
        body = response.body
        code = ErrorCode.NETWORK_EXCEPTION if response.error is not None or body is None else body.error_code
        if code == ErrorCode.NONE:
            self._attempts = 0
            self._set_producer(body.producer_id, body.producer_epoch)
            return
        if code in _RETRIABLE_INIT:
            self._attempts += 1
            self._retry_at_ms = now + exponential_backoff_ms(
                self._retry_backoff_ms, self._retry_backoff_max_ms, self._attempts
            )
            log.debug("InitProducerId failed (%s); retrying", response.error or ErrorCode(code).name)
            return
        self.fatal_error = KafkaError(code, resource="InitProducerId")

    def _set_producer(self, producer_id: int, epoch: int) -> None:
        changed = self.producer_id >= 0
        self.producer_id = producer_id
        self.producer_epoch = epoch
        self.bump_required = False
        for seq in self._partitions.values():
            seq.next_sequence = 0
            seq.last_acked = -1
        if changed:
            self.epoch_changes += 1
            self.on_new_epoch()

    # --- sequences --------------------------------------------------------------------------------------------

    def _partition(self, tp: tuple[str, int]) -> PartitionSequence:
        seq = self._partitions.get(tp)
        if seq is None:
            seq = self._partitions[tp] = PartitionSequence()
        return seq

    def next_sequence(self, tp: tuple[str, int]) -> int:
        return self._partition(tp).next_sequence

    def assign(self, batch: ProducerBatch) -> None:
        """Stamp a batch with the current id, epoch and the partition's next sequence."""
        seq = self._partition(batch.tp)
        batch.stamp(self.producer_id, self.producer_epoch, seq.next_sequence, self.transactional)
        seq.next_sequence = add_sequence(seq.next_sequence, batch.record_count)

    def acknowledged(self, batch: ProducerBatch) -> None:
        if batch.producer_epoch != self.producer_epoch or batch.producer_id != self.producer_id:
            return  # an answer from before the bump says nothing about the new sequences
        seq = self._partition(batch.tp)
        seq.last_acked = add_sequence(batch.base_sequence, batch.record_count - 1)

    def is_next_unacknowledged(self, batch: ProducerBatch) -> bool:
        """Whether ``batch`` is the first one the broker has not acknowledged for its partition: an
        OUT_OF_ORDER_SEQUENCE_NUMBER for it means the broker lost our state, not that an earlier batch failed."""
        seq = self._partition(batch.tp)
        return batch.base_sequence == add_sequence(seq.last_acked, 1)

    def last_acknowledged(self, tp: tuple[str, int]) -> int:
        return self._partition(tp).last_acked
