"""OffsetCommit (key 8): a group member (or a simple assign-mode consumer) stores its positions.

Versions 0-10 (Kafka 4.x serves 2-10; v0-1 layouts are known and cheap to keep; v1 alone carries a commit
timestamp, v2-4 a retention time; v10 names topics by id). Peers: librdkafka 2.15+ sends up to 9, kafka-python
3.0 up to 8, aiokafka 0.14 sends 2 or 3 (it defines 0-1 but no longer sends them).
"""

from groupstream.protocol.schema import NULL, Api, Array, Field, Struct

# A topic is named in requests and responses alike: by name up to v9, by id from v10 (KIP-516).
_TOPIC_KEY = (
    Field("name", "string", versions="0-9", ignorable=True),
    Field("topic_id", "uuid", versions="10+", ignorable=True),
)

API = Api(
    key=8,
    name="OffsetCommit",
    valid="0-10",
    flexible="8+",
    request=Struct(
        "OffsetCommitRequest",
        Field("group_id", "string"),
        Field("generation_id_or_member_epoch", "int32", versions="1+", default=-1, ignorable=True),
        Field("member_id", "string", versions="1+", ignorable=True),
        Field("group_instance_id", "string", versions="7+", nullable="7+", default=NULL),
        Field("retention_time_ms", "int64", versions="2-4", default=-1, ignorable=True),
        Field(
            "topics",
            Array(
                Struct(
                    "OffsetCommitRequestTopic",
                    *_TOPIC_KEY,
                    Field(
                        "partitions",
                        Array(
                            Struct(
                                "OffsetCommitRequestPartition",
                                Field("partition_index", "int32"),
                                Field("committed_offset", "int64"),
                                Field(
                                    "committed_leader_epoch",
                                    "int32",
                                    versions="6+",
                                    default=-1,
                                    ignorable=True,
                                ),
                                Field("commit_timestamp", "int64", versions="1", default=-1),
                                Field("committed_metadata", "string", nullable="0+"),
                            )
                        ),
                    ),
                )
            ),
        ),
    ),
    response=Struct(
        "OffsetCommitResponse",
        Field("throttle_time_ms", "int32", versions="3+", ignorable=True),
        Field(
            "topics",
            Array(
                Struct(
                    "OffsetCommitResponseTopic",
                    *_TOPIC_KEY,
                    Field(
                        "partitions",
                        Array(
                            Struct(
                                "OffsetCommitResponsePartition",
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
