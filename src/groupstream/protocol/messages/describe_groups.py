"""DescribeGroups (key 15): classic groups' state, protocol and members, as admin tools show them.

Versions 0-6 (what Kafka 4.x serves; v6 answers GROUP_ID_NOT_FOUND for unknown groups). Peers: librdkafka
2.15+ sends up to 5, kafka-python 3.0 up to 6, aiokafka 0.14 up to 3.
"""

from groupstream.protocol.messages.common_structs import NO_AUTHORIZED_OPERATIONS
from groupstream.protocol.schema import NULL, Api, Array, Field, Struct

API = Api(
    key=15,
    name="DescribeGroups",
    valid="0-6",
    flexible="5+",
    request=Struct(
        "DescribeGroupsRequest",
        Field("groups", Array("string")),
        Field("include_authorized_operations", "bool", versions="3+"),
    ),
    response=Struct(
        "DescribeGroupsResponse",
        Field("throttle_time_ms", "int32", versions="1+", ignorable=True),
        Field(
            "groups",
            Array(
                Struct(
                    "DescribedGroup",
                    Field("error_code", "int16"),
                    Field("error_message", "string", versions="6+", nullable="6+", default=NULL),
                    Field("group_id", "string"),
                    Field("group_state", "string"),
                    Field("protocol_type", "string"),
                    Field("protocol_data", "string"),
                    Field(
                        "members",
                        Array(
                            Struct(
                                "DescribedGroupMember",
                                Field("member_id", "string"),
                                Field(
                                    "group_instance_id",
                                    "string",
                                    versions="4+",
                                    nullable="4+",
                                    default=NULL,
                                    ignorable=True,
                                ),
                                Field("client_id", "string"),
                                Field("client_host", "string"),
                                Field("member_metadata", "bytes"),
                                Field("member_assignment", "bytes"),
                            )
                        ),
                    ),
                    Field("authorized_operations", "int32", versions="3+", default=NO_AUTHORIZED_OPERATIONS),
                )
            ),
        ),
    ),
)
