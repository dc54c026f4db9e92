"""ElectLeaders (key 43): elect partition leaders (KIP-183, election types from KIP-460).

Versions 0-2, flexible from 2 (what Kafka 4.x serves). Our broker is one node, so a data partition's leader is
always its preferred replica; on an `__consumer_offsets` partition the election moves the group coordinator
(unload and reload of its shard), which is how coordinator failover is driven from outside the broker.
"""

from groupstream.protocol.schema import NULL, Api, Array, Field, Struct

API = Api(
    key=43,
    name="ElectLeaders",
    valid="0-2",
    flexible="2+",
    request=Struct(
        "ElectLeadersRequest",
        Field("election_type", "int8", versions="1+"),
        Field(
            "topic_partitions",
            Array(
                Struct(
                    "TopicPartitions",
                    Field("topic", "string"),
                    Field("partitions", Array("int32")),
                )
            ),
            nullable="0+",
        ),
        Field("timeout_ms", "int32", default=60000),
    ),
    response=Struct(
        "ElectLeadersResponse",
        Field("throttle_time_ms", "int32"),
        Field("error_code", "int16", versions="1+"),
        Field(
            "replica_election_results",
            Array(
                Struct(
                    "ReplicaElectionResult",
                    Field("topic", "string"),
                    Field(
                        "partition_result",
                        Array(
                            Struct(
                                "PartitionResult",
                                Field("partition_id", "int32"),
                                Field("error_code", "int16"),
                                Field("error_message", "string", nullable="0+", default=NULL),
                            )
                        ),
                    ),
                )
            ),
        ),
    ),
)
