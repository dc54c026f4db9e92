"""DescribeTopicPartitions (key 75, KIP-966, Kafka 3.8+): topics' partitions with their eligible leader replicas.

Version 0 only, flexible (what Kafka 4.x serves). Paged: at most ``response_partition_limit`` partitions an
answer, and ``next_cursor`` names the topic and partition to ask from next. Peers: the Java 4.x Admin's
``describeTopics`` (so ``kafka-topics --describe``) asks with it first, and falls back to Metadata only
where a broker does not serve it.
"""

from groupstream.protocol.messages.common_structs import NO_AUTHORIZED_OPERATIONS
from groupstream.protocol.schema import NULL, Api, Array, Field, Struct

API = Api(
    key=75,
    name="DescribeTopicPartitions",
    valid="0",
    flexible="0+",
    request=Struct(
        "DescribeTopicPartitionsRequest",
        Field("topics", Array(Struct("TopicRequest", Field("name", "string")))),
        Field("response_partition_limit", "int32", default=2000),
        Field(
            "cursor",
            Struct("Cursor", Field("topic_name", "string"), Field("partition_index", "int32")),
            nullable="0+",
            default=NULL,
        ),
    ),
    response=Struct(
        "DescribeTopicPartitionsResponse",
        Field("throttle_time_ms", "int32", ignorable=True),
        Field(
            "topics",
            Array(
                Struct(
                    "DescribeTopicPartitionsResponseTopic",
                    Field("error_code", "int16"),
                    Field("name", "string", nullable="0+"),
                    Field("topic_id", "uuid", ignorable=True),
                    Field("is_internal", "bool", default=False, ignorable=True),
                    Field(
                        "partitions",
                        Array(
                            Struct(
                                "DescribeTopicPartitionsResponsePartition",
                                Field("error_code", "int16"),
                                Field("partition_index", "int32"),
                                Field("leader_id", "int32"),
                                Field("leader_epoch", "int32", default=-1, ignorable=True),
                                Field("replica_nodes", Array("int32")),
                                Field("isr_nodes", Array("int32")),
                                Field("eligible_leader_replicas", Array("int32"), nullable="0+", default=NULL),
                                Field("last_known_elr", Array("int32"), nullable="0+", default=NULL),
                                Field("offline_replicas", Array("int32"), ignorable=True),
                            )
                        ),
                    ),
                    Field("topic_authorized_operations", "int32", default=NO_AUTHORIZED_OPERATIONS),
                )
            ),
        ),
        Field(
            "next_cursor",
            Struct("Cursor", Field("topic_name", "string"), Field("partition_index", "int32")),
            nullable="0+",
            default=NULL,
        ),
    ),
)
