"""DescribeProducers (key 61): a partition leader's active producers, for admin tools.

Version 0 only (what Kafka 4.x serves; flexible from 0). Kafka's Admin (``kafka-transactions.sh
describe-producers``, ``find-hanging`` and ``abort --start-offset``) asks it to find the producer whose open
transaction holds a partition's last stable offset back. librdkafka and kafka-python do not send it.
"""

from groupstream.protocol.schema import NULL, Api, Array, Field, Struct

API = Api(
    key=61,
    name="DescribeProducers",
    valid="0",
    flexible="0+",
    request=Struct(
        "DescribeProducersRequest",
        Field(
            "topics",
            Array(
                Struct(
                    "TopicRequest",
                    Field("name", "string"),
                    Field("partition_indexes", Array("int32")),
                )
            ),
        ),
    ),
    response=Struct(
        "DescribeProducersResponse",
        Field("throttle_time_ms", "int32"),
        Field(
            "topics",
            Array(
                Struct(
                    "TopicResponse",
                    Field("name", "string"),
                    Field(
                        "partitions",
                        Array(
                            Struct(
                                "PartitionResponse",
                                Field("partition_index", "int32"),
                                Field("error_code", "int16"),
                                Field("error_message", "string", nullable="0+", default=NULL),
                                Field(
                                    "active_producers",
                                    Array(
                                        Struct(
                                            "ProducerState",
                                            Field("producer_id", "int64"),
                                            Field("producer_epoch", "int32"),
                                            Field("last_sequence", "int32", default=-1),
                                            Field("last_timestamp", "int64", default=-1),
                                            Field("coordinator_epoch", "int32"),
                                            Field("current_txn_start_offset", "int64", default=-1),
                                        )
                                    ),
                                ),
                            )
                        ),
                    ),
                )
            ),
        ),
    ),
)
