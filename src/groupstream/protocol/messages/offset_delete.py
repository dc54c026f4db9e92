"""OffsetDelete (key 47): drop a group's committed offsets for partitions it no longer consumes.

Version 0 only (what Kafka 4.x serves; never flexible). Peers: librdkafka 2.15+ and kafka-python 3.0 send 0.
"""

from groupstream.protocol.schema import Api, Array, Field, Struct

API = Api(
    key=47,
    name="OffsetDelete",
    valid="0-0",
    flexible="",
    request=Struct(
        "OffsetDeleteRequest",
        Field("group_id", "string"),
        Field(
            "topics",
            Array(
                Struct(
                    "OffsetDeleteRequestTopic",
                    Field("name", "string"),
                    Field(
                        "partitions",
                        Array(Struct("OffsetDeleteRequestPartition", Field("partition_index", "int32"))),
                    ),
                )
            ),
        ),
    ),
    response=Struct(
        "OffsetDeleteResponse",
        Field("error_code", "int16"),
        Field("throttle_time_ms", "int32", ignorable=True),
        Field(
            "topics",
            Array(
                Struct(
                    "OffsetDeleteResponseTopic",
                    Field("name", "string"),
                    Field(
                        "partitions",
                        Array(
                            Struct(
                                "OffsetDeleteResponsePartition",
                                Field("partition_index", "int32"),
                                Field("error_code", "int16"),
                            )
                        ),
                    ),
                )
            ),
        ),
    ),
)
