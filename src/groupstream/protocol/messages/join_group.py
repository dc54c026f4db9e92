"""JoinGroup (key 11): the first step of a classic-protocol rebalance.

Versions 0-9 (what Kafka 4.x serves). From v4 a first join without a member id gets MEMBER_ID_REQUIRED and
rejoins with the id it is given. Peers: librdkafka 2.15+ sends up to 5, kafka-python 3.0 up to 7, aiokafka 0.14
sends 0, 1, 2 or 5 (the highest of those our range allows).
"""

from groupstream.protocol.schema import NULL, Api, Array, Field, Struct

API = Api(
    key=11,
    name="JoinGroup",
    valid="0-9",
    flexible="6+",
    request=Struct(
        "JoinGroupRequest",
        Field("group_id", "string"),
        Field("session_timeout_ms", "int32"),
        Field("rebalance_timeout_ms", "int32", versions="1+", default=-1, ignorable=True),
        Field("member_id", "string"),
        Field("group_instance_id", "string", versions="5+", nullable="5+", default=NULL),
        Field("protocol_type", "string"),
        Field(
            "protocols",
            Array(
                Struct(
                    "JoinGroupRequestProtocol",
                    Field("name", "string"),
                    Field("metadata", "bytes"),
                )
            ),
        ),
        Field("reason", "string", versions="8+", nullable="8+", default=NULL, ignorable=True),
    ),
    response=Struct(
        "JoinGroupResponse",
        Field("throttle_time_ms", "int32", versions="2+", ignorable=True),
        Field("error_code", "int16"),
        Field("generation_id", "int32", default=-1),
        Field("protocol_type", "string", versions="7+", nullable="7+", default=NULL, ignorable=True),
        Field("protocol_name", "string", nullable="7+"),
        Field("leader", "string"),
        Field("skip_assignment", "bool", versions="9+", default=False),
        Field("member_id", "string"),
        Field(
            "members",
            Array(
                Struct(
                    "JoinGroupResponseMember",
                    Field("member_id", "string"),
                    Field(
                        "group_instance_id",
                        "string",
                        versions="5+",
                        nullable="5+",
                        default=NULL,
                        ignorable=True,
                    ),
                    Field("metadata", "bytes"),
                )
            ),
        ),
    ),
)
