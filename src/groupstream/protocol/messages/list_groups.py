"""ListGroups (key 16): every group this broker coordinates, filtered by state (v4+) and type (v5+).

Versions 0-5 (what Kafka 4.x serves). Peers: librdkafka 2.15+ sends up to 5, kafka-python 3.0 up to 5,
aiokafka 0.14 up to 2.
"""

from groupstream.protocol.schema import Api, Array, Field, Struct

API = Api(
    key=16,
    name="ListGroups",
    valid="0-5",
    flexible="3+",
    request=Struct(
        "ListGroupsRequest",
        Field("states_filter", Array("string"), versions="4+"),
        Field("types_filter", Array("string"), versions="5+"),
    ),
    response=Struct(
        "ListGroupsResponse",
        Field("throttle_time_ms", "int32", versions="1+", ignorable=True),
        Field("error_code", "int16"),
        Field(
            "groups",
            Array(
                Struct(
                    "ListedGroup",
                    Field("group_id", "string"),
                    Field("protocol_type", "string"),
                    Field("group_state", "string", versions="4+", ignorable=True),
                    Field("group_type", "string", versions="5+", ignorable=True),
                )
            ),
        ),
    ),
)
