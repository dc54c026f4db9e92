"""TxnOffsetCommit (key 28): offsets committed inside a transaction, visible when it commits.

Versions 0-5 (what Kafka 4.x serves; v3+ carries the member's generation for fencing, KIP-447). Peers:
librdkafka 2.15+ and kafka-python 3.0 send up to 3, aiokafka 0.14 sends 0.
"""

from groupstream.protocol.schema import NULL, Api, Array, Field, Struct

API = Api(
    key=28,
    name="TxnOffsetCommit",
    valid="0-5",
    flexible="3+",
    request=Struct(
        "TxnOffsetCommitRequest",
        Field("transactional_id", "string"),
        Field("group_id", "string"),
        Field("producer_id", "int64"),
        Field("producer_epoch", "int16"),
        Field("generation_id", "int32", versions="3+", default=-1),
        Field("member_id", "string", versions="3+", default=""),
        Field("group_instance_id", "string", versions="3+", nullable="3+", default=NULL),
        Field(
            "topics",
            Array(
                Struct(
                    "TxnOffsetCommitRequestTopic",
                    Field("name", "string"),
                    Field(
                        "partitions",
                        Array(
                            Struct(
                                "TxnOffsetCommitRequestPartition",
                                Field("partition_index", "int32"),
                                Field("committed_offset", "int64"),
                                Field(
                                    "committed_leader_epoch",
                                    "int32",
                                    versions="2+",
                                    default=-1,
                                    ignorable=True,
                                ),
                                Field("committed_metadata", "string", nullable="0+"),
                            )
                        ),
                    ),
                )
            ),
        ),
    ),
    response=Struct(
        "TxnOffsetCommitResponse",
        Field("throttle_time_ms", "int32"),
        Field(
            "topics",
            Array(
                Struct(
                    "TxnOffsetCommitResponseTopic",
                    Field("name", "string"),
                    Field(
                        "partitions",
                        Array(
                            Struct(
                                "TxnOffsetCommitResponsePartition",
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
