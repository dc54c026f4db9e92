"""SyncGroup (key 14): the leader hands out assignments; every member receives its own.

Versions 0-5 (what Kafka 4.x serves). Peers: librdkafka 2.15+ sends up to 3, kafka-python 3.0 up to 5,
aiokafka 0.14 sends 0, 1 or 3.
"""

from groupstream.protocol.schema import NULL, Api, Array, Field, Struct

API = Api(
    key=14,
    name="SyncGroup",
    valid="0-5",
    flexible="4+",
    request=Struct(
        "SyncGroupRequest",
        Field("group_id", "string"),
        Field("generation_id", "int32"),
        Field("member_id", "string"),
        Field("group_instance_id", "string", versions="3+", nullable="3+", default=NULL),
        Field("protocol_type", "string", versions="5+", nullable="5+", default=NULL, ignorable=True),
        Field("protocol_name", "string", versions="5+", nullable="5+", default=NULL, ignorable=True),
        Field(
            "assignments",
            Array(
                Struct(
                    "SyncGroupRequestAssignment",
                    Field("member_id", "string"),
                    Field("assignment", "bytes"),
                )
            ),
        ),
    ),
    response=Struct(
        "SyncGroupResponse",
        Field("throttle_time_ms", "int32", versions="1+", ignorable=True),
        Field("error_code", "int16"),
        Field("protocol_type", "string", versions="5+", nullable="5+", default=NULL, ignorable=True),
        Field("protocol_name", "string", versions="5+", nullable="5+", default=NULL, ignorable=True),
        Field("assignment", "bytes"),
    ),
)
