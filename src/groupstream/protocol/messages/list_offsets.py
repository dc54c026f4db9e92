"""ListOffsets (key 2): the offset for a timestamp, or earliest/latest (-2/-1) and friends.

Versions 0-11 (Kafka 4.x serves 1-11; v0 is kept because its layout is known and cheap: it asks for up to
``max_num_offsets`` offsets and gets them in ``old_style_offsets``). Peers: librdkafka 2.15+ sends up to 7,
kafka-python 3.0 up to 11 (at least 1 when it asks by timestamp), aiokafka 0.14 up to 3 (its v4-5
structs are unused, and mistype the leader epoch as int64).
"""

from groupstream.protocol.schema import Api, Array, Field, Struct

API = Api(
    key=2,
    name="ListOffsets",
    valid="0-11",
    flexible="6+",
    request=Struct(
        "ListOffsetsRequest",
        Field("replica_id", "int32"),
        Field("isolation_level", "int8", versions="2+"),
        Field(
            "topics",
            Array(
                Struct(
                    "ListOffsetsTopic",
                    Field("name", "string"),
                    Field(
                        "partitions",
                        Array(
                            Struct(
                                "ListOffsetsPartition",
                                Field("partition_index", "int32"),
                                Field(
                                    "current_leader_epoch", "int32", versions="4+", default=-1, ignorable=True
                                ),
                                Field("timestamp", "int64"),
                                Field("max_num_offsets", "int32", versions="0", default=1),
                            )
                        ),
                    ),
                )
            ),
        ),
        Field("timeout_ms", "int32", versions="10+", ignorable=True),
    ),
    response=Struct(
        "ListOffsetsResponse",
        Field("throttle_time_ms", "int32", versions="2+", ignorable=True),
        Field(
            "topics",
            Array(
                Struct(
                    "ListOffsetsTopicResponse",
                    Field("name", "string"),
                    Field(
                        "partitions",
                        Array(
                            Struct(
                                "ListOffsetsPartitionResponse",
                                Field("partition_index", "int32"),
                                Field("error_code", "int16"),
                                Field("old_style_offsets", Array("int64"), versions="0"),
                                Field("timestamp", "int64", versions="1+", default=-1),
                                Field("offset", "int64", versions="1+", default=-1),
                                Field("leader_epoch", "int32", versions="4+", default=-1),
                            )
                        ),
                    ),
                )
            ),
        ),
    ),
)
