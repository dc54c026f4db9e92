"""LeaveGroup (key 13): one member leaves (v0-2), or a batch of members, static ones included (v3+).

Versions 0-5 (what Kafka 4.x serves). Peers: librdkafka 2.15+ sends up to 1, kafka-python 3.0 up to 5 (2 when
its admin client removes members one by one), aiokafka 0.14 up to 1.
"""

from groupstream.protocol.schema import NULL, Api, Array, Field, Struct

API = Api(
    key=13,
    name="LeaveGroup",
    valid="0-5",
    flexible="4+",
    request=Struct(
        "LeaveGroupRequest",
        Field("group_id", "string"),
        Field("member_id", "string", versions="0-2"),
        Field(
            "members",
            Array(
                Struct(
                    "MemberIdentity",
                    Field("member_id", "string", versions="3+"),
                    Field("group_instance_id", "string", versions="3+", nullable="3+", default=NULL),
                    Field("reason", "string", versions="5+", nullable="5+", default=NULL, ignorable=True),
                )
            ),
            versions="3+",
        ),
    ),
    response=Struct(
        "LeaveGroupResponse",
        Field("throttle_time_ms", "int32", versions="1+", ignorable=True),
        Field("error_code", "int16"),
        Field(
            "members",
            Array(
                Struct(
                    "MemberResponse",
                    Field("member_id", "string", versions="3+"),
                    Field("group_instance_id", "string", versions="3+", nullable="3+"),
                    Field("error_code", "int16", versions="3+"),
                )
            ),
            versions="3+",
        ),
    ),
)
