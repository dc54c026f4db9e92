"""ElectLeaders: on one node, the only election with an effect is the group coordinator's.

A data partition's one replica is always its preferred leader, so electing it answers ELECTION_NOT_NEEDED, as
Kafka does for a partition already led by its preferred replica. An election on an `__consumer_offsets` (or
`__transaction_state`) partition is what a leader change does to a Kafka coordinator: the shard is unloaded (its parked requests and
every request until it serves again get NOT_COORDINATOR, so clients look the coordinator up again) and loaded
afresh from its log. This is our coordinator failover, reachable from any admin client and from
``groupstream leader-election``. A request naming no partitions (Kafka's "all partitions") elects nothing:
no partition here is led by anything but its preferred replica, and a coordinator move is only done on demand.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from groupstream.broker.handlers import handles
from groupstream.broker.offsets_topic import OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC
from groupstream.protocol.bodies import ELECT_LEADERS
from groupstream.protocol.connection import Request
from groupstream.protocol.error_codes import ErrorCode
from groupstream.security.acl import Operation

if TYPE_CHECKING:
    from groupstream.broker.node import Broker

PREFERRED, UNCLEAN = 0, 1


@handles("ElectLeaders")
def handle_elect_leaders(broker: Broker, request: Request) -> Any:
    req = ELECT_LEADERS.body_of(request)
    R = ELECT_LEADERS.Response
    election_type = req.election_type if request.version >= 1 else PREFERRED
    if not broker.authorizer.allowed_on_cluster(Operation.ALTER):
        return R(throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, replica_election_results=[])
    if election_type not in (PREFERRED, UNCLEAN):
        return R(throttle_time_ms=0, error_code=ErrorCode.INVALID_REQUEST, replica_election_results=[])
    wanted = req.topic_partitions or ()
    timeout_s = max(req.timeout_ms, 0) / 1000.0

    async def elect() -> Any:
        results = []
        for tp in wanted:
            outcomes = []
            for p in tp.partitions:
                code, message = await _elect(broker, tp.topic, p, timeout_s)
                outcomes.append(R.ReplicaElectionResult.PartitionResult(
                    partition_id=p, error_code=code, error_message=message))
            results.append(R.ReplicaElectionResult(topic=tp.topic, partition_result=outcomes))
        return R(throttle_time_ms=0, error_code=ErrorCode.NONE, replica_election_results=results)

    return asyncio.ensure_future(elect())


async def _elect(broker: Broker, topic: str, partition: int, timeout_s: float) -> tuple[int, str | None]:
    info = broker.catalog.get_topic(topic)
    if info is None or not 0 <= partition < info.partitions:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{topic}-{partition} does not exist"
    if topic == OFFSETS_TOPIC:
        runtime = broker.coordinator
    elif topic == TRANSACTION_STATE_TOPIC and broker.transactions.runtime is not None:
        runtime = broker.transactions.runtime
    else:
        return ErrorCode.ELECTION_NOT_NEEDED, f"{topic}-{partition} is already led by its preferred replica"
    runtime.unload(partition)
    try:
        await asyncio.wait_for(asyncio.shield(runtime.reload(partition)), timeout_s)
    except TimeoutError:
        return ErrorCode.REQUEST_TIMED_OUT, f"the coordinator for {topic}-{partition} is still loading"
    return ErrorCode.NONE, None
