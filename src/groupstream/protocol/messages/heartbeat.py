"""Heartbeat (key 12): a classic-protocol member's keep-alive, and how it learns of a rebalance.

Versions 0-4 (what Kafka 4.x serves). Peers: librdkafka 2.15+ sends up to 3, kafka-python 3.0 up to 4,
aiokafka 0.14 up to 1.
"""

from groupstream.protocol.schema import NULL, Api, Field, Struct

API = Api(
    key=12,
    name="Heartbeat",
    valid="0-4",
    flexible="4+",
    request=Struct(
        "HeartbeatRequest",
        Field("group_id", "string"),
        Field("generation_id", "int32"),
        Field("member_id", "string"),
        Field("group_instance_id", "string", versions="3+", nullable="3+", default=NULL),
    ),
    response=Struct(
        "HeartbeatResponse",
        Field("throttle_time_ms", "int32", versions="1+", ignorable=True),
        Field("error_code", "int16"),
    ),
)
