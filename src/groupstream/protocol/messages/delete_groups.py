"""DeleteGroups (key 42): remove empty groups and their committed offsets.

Versions 0-2 (what Kafka 4.x serves). Peers: librdkafka 2.15+ sends up to 2, kafka-python 3.0 up to 2,
aiokafka 0.14 up to 1.
"""

from groupstream.protocol.schema import Api, Array, Field, Struct

API = Api(
    key=42,
    name="DeleteGroups",
    valid="0-2",
    flexible="2+",
    request=Struct(
        "DeleteGroupsRequest",
        Field("groups_names", Array("string")),
    ),
    response=Struct(
        "DeleteGroupsResponse",
        Field("throttle_time_ms", "int32"),
        Field(
            "results",
            Array(
                Struct(
                    "DeletableGroupResult",
                    Field("group_id", "string"),
                    Field("error_code", "int16"),
                )
            ),
        ),
    ),
)
