"""Metadata (key 3): brokers, topics, partitions and leaders; also how a producer auto-creates topics.

Versions 0-13 (what Kafka 4.x serves; v13 adds a top-level error code). Peers: librdkafka 2.15+ sends up to 13
(10 when it has no topic ids to ask for), kafka-python 3.0 up to 13, aiokafka 0.14 up to 5.
"""

from groupstream.protocol.messages.common_structs import NO_AUTHORIZED_OPERATIONS
from groupstream.protocol.schema import NULL, Api, Array, Field, Struct

API = Api(
    key=3,
    name="Metadata",
    valid="0-13",
    flexible="9+",
    request=Struct(
        "MetadataRequest",
        Field(
            "topics",
            Array(
                Struct(
                    "MetadataRequestTopic",
                    Field("topic_id", "uuid", versions="10+", ignorable=True),
                    Field("name", "string", nullable="10+"),
                )
            ),
            nullable="1+",
        ),
        Field("allow_auto_topic_creation", "bool", versions="4+", default=True),
        Field("include_cluster_authorized_operations", "bool", versions="8-10"),
        Field("include_topic_authorized_operations", "bool", versions="8+"),
    ),
    response=Struct(
        "MetadataResponse",
        Field("throttle_time_ms", "int32", versions="3+", ignorable=True),
        Field(
            "brokers",
            Array(
                Struct(
                    "MetadataResponseBroker",
                    Field("node_id", "int32"),
                    Field("host", "string"),
                    Field("port", "int32"),
                    Field("rack", "string", versions="1+", nullable="1+", default=NULL, ignorable=True),
                )
            ),
        ),
        Field("cluster_id", "string", versions="2+", nullable="2+", default=NULL, ignorable=True),
        Field("controller_id", "int32", versions="1+", default=-1, ignorable=True),
        Field(
            "topics",
            Array(
                Struct(
                    "MetadataResponseTopic",
                    Field("error_code", "int16"),
                    Field("name", "string", nullable="12+"),
                    Field("topic_id", "uuid", versions="10+", ignorable=True),
                    Field("is_internal", "bool", versions="1+", default=False, ignorable=True),
                    Field(
                        "partitions",
                        Array(
                            Struct(
                                "MetadataResponsePartition",
                                Field("error_code", "int16"),
                                Field("partition_index", "int32"),
                                Field("leader_id", "int32"),
                                Field("leader_epoch", "int32", versions="7+", default=-1, ignorable=True),
                                Field("replica_nodes", Array("int32")),
                                Field("isr_nodes", Array("int32")),
                                Field("offline_replicas", Array("int32"), versions="5+", ignorable=True),
                            )
                        ),
                    ),
                    Field(
                        "topic_authorized_operations",
                        "int32",
                        versions="8+",
                        default=NO_AUTHORIZED_OPERATIONS,
                    ),
                )
            ),
        ),
        Field("cluster_authorized_operations", "int32", versions="8-10", default=NO_AUTHORIZED_OPERATIONS),
        Field("error_code", "int16", versions="13+", ignorable=True),
    ),
)
