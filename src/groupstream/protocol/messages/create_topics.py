"""CreateTopics (key 19): what admin clients and kcat's producers use to make topics.

Versions 0-7 (Kafka 4.x serves 2-7; 0-1 share the layout and are kept). Peers: librdkafka 2.15+ sends up to 4,
kafka-python 3.0 up to 7, aiokafka 0.14 up to 3.
"""

from groupstream.protocol.schema import Api, Array, Field, Struct

API = Api(
    key=19,
    name="CreateTopics",
    valid="0-7",
    flexible="5+",
    request=Struct(
        "CreateTopicsRequest",
        Field(
            "topics",
            Array(
                Struct(
                    "CreatableTopic",
                    Field("name", "string"),
                    Field("num_partitions", "int32"),
                    Field("replication_factor", "int16"),
                    Field(
                        "assignments",
                        Array(
                            Struct(
                                "CreatableReplicaAssignment",
                                Field("partition_index", "int32"),
                                Field("broker_ids", Array("int32")),
                            )
                        ),
                    ),
                    Field(
                        "configs",
                        Array(
                            Struct(
                                "CreatableTopicConfig",
                                Field("name", "string"),
                                Field("value", "string", nullable="0+"),
                            )
                        ),
                    ),
                )
            ),
        ),
        Field("timeout_ms", "int32", default=60000),
        Field("validate_only", "bool", versions="1+", default=False),
    ),
    response=Struct(
        "CreateTopicsResponse",
        Field("throttle_time_ms", "int32", versions="2+", ignorable=True),
        Field(
            "topics",
            Array(
                Struct(
                    "CreatableTopicResult",
                    Field("name", "string"),
                    Field("topic_id", "uuid", versions="7+", ignorable=True),
                    Field("error_code", "int16"),
                    Field("error_message", "string", versions="1+", nullable="0+", ignorable=True),
                    Field(
                        "topic_config_error_code", "int16", versions="5+", tag=0, tagged="5+", ignorable=True
                    ),
                    Field("num_partitions", "int32", versions="5+", default=-1, ignorable=True),
                    Field("replication_factor", "int16", versions="5+", default=-1, ignorable=True),
                    Field(
                        "configs",
                        Array(
                            Struct(
                                "CreatableTopicConfigs",
                                Field("name", "string", versions="5+"),
                                Field("value", "string", versions="5+", nullable="5+"),
                                Field("read_only", "bool", versions="5+"),
                                Field("config_source", "int8", versions="5+", default=-1, ignorable=True),
                                Field("is_sensitive", "bool", versions="5+"),
                            )
                        ),
                        versions="5+",
                        nullable="5+",
                        ignorable=True,
                    ),
                )
            ),
        ),
    ),
)
