"""InitProducerId for idempotent producers: ids unique across restarts, epoch bumps per KIP-360.

With a transactional id the request belongs to the transaction coordinator (`handlers.transactions`).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from groupstream.broker.handlers import handles
from groupstream.broker.handlers.transactions import init_transactional_producer_id
from groupstream.protocol.bodies import INIT_PRODUCER_ID, InitProducerIdRequest, InitProducerIdResponse
from groupstream.protocol.connection import Request
from groupstream.protocol.error_codes import ErrorCode
from groupstream.security.acl import Operation, ResourceType
from groupstream.storage.errors import LogWriteError

if TYPE_CHECKING:
    from groupstream.broker.node import Broker

log = logging.getLogger("groupstream.broker.producer_id")

_MAX_EPOCH = 32766


@handles("InitProducerId")
def handle_init_producer_id(broker: Broker, request: Request) -> Any:
    req = INIT_PRODUCER_ID.body_of(request)
    if req.transactional_id is not None:  # the transaction coordinator's (a future of its answer)
        return init_transactional_producer_id(broker, request)
    return _idempotent_producer_id(broker, req)


def _idempotent_producer_id(broker: Broker, req: InitProducerIdRequest) -> InitProducerIdResponse:
    """An idempotent producer's id: a new one, or the next epoch of the one it names (KIP-360)."""
    R = INIT_PRODUCER_ID.Response
    auth = broker.authorizer
    # an idempotent producer needs IDEMPOTENT_WRITE on the cluster, or WRITE on some topic (KIP-679)
    may_write = auth.allowed_on_cluster(Operation.IDEMPOTENT_WRITE) or auth.allowed_on_some(
        Operation.WRITE, ResourceType.TOPIC
    )
    if not may_write:
        return R(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, producer_id=-1, producer_epoch=-1)
    pid, epoch = req.producer_id, req.producer_epoch  # -1, -1 before v3
    if pid >= 0 and 0 <= epoch < _MAX_EPOCH:
        # A producer that lost track of its sequences asks for the next epoch of the same id.
        return R(error_code=ErrorCode.NONE, producer_id=pid, producer_epoch=epoch + 1)
    try:
        pid = broker.producer_ids.allocate()
    except LogWriteError as e:  # retriable for every client: they ask again once the disk has room
        log.warning("InitProducerId answered COORDINATOR_NOT_AVAILABLE: %s", e)
        return R(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE, producer_id=-1, producer_epoch=-1)
    return R(error_code=ErrorCode.NONE, producer_id=pid, producer_epoch=0)
