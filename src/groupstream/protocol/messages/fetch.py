"""Fetch (key 1): the long poll that reads record batches.

Versions 4-18 (Kafka 4.x serves 4-18; v13+ names topics by id; v18 adds the follower's high watermark).
Below v4 the answer carries message format v0/v1, which we do not store. Peers: librdkafka 2.15+ sends up to
16, kafka-python 3.0 up to 12, aiokafka 0.14 up to 11; librdkafka and aiokafka do not use fetch sessions.
"""

from groupstream.protocol.messages.common_structs import current_leader, node_endpoints
from groupstream.protocol.schema import NULL, Api, Array, Field, Struct

_MAX_INT32 = 0x7FFFFFFF
_MAX_INT64 = 0x7FFFFFFFFFFFFFFF

API = Api(
    key=1,
    name="Fetch",
    valid="4-18",
    flexible="12+",
    request=Struct(
        "FetchRequest",
        Field(
            "cluster_id",
            "string",
            versions="12+",
            nullable="12+",
            tag=0,
            tagged="12+",
            default=NULL,
            ignorable=True,
        ),
        Field("replica_id", "int32", versions="0-14", default=-1),
        Field(
            "replica_state",
            Struct(
                "ReplicaState",
                Field("replica_id", "int32", versions="15+", default=-1),
                Field("replica_epoch", "int64", versions="15+", default=-1),
            ),
            versions="15+",
            tag=1,
            tagged="15+",
        ),
        Field("max_wait_ms", "int32"),
        Field("min_bytes", "int32"),
        Field("max_bytes", "int32", versions="3+", default=_MAX_INT32, ignorable=True),
        Field("isolation_level", "int8", versions="4+", default=0, ignorable=True),
        Field("session_id", "int32", versions="7+", default=0, ignorable=True),
        Field("session_epoch", "int32", versions="7+", default=-1, ignorable=True),
        Field(
            "topics",
            Array(
                Struct(
                    "FetchTopic",
                    Field("topic", "string", versions="0-12", ignorable=True),
                    Field("topic_id", "uuid", versions="13+", ignorable=True),
                    Field(
                        "partitions",
                        Array(
                            Struct(
                                "FetchPartition",
                                Field("partition", "int32"),
                                Field(
                                    "current_leader_epoch", "int32", versions="9+", default=-1, ignorable=True
                                ),
                                Field("fetch_offset", "int64"),
                                Field("last_fetched_epoch", "int32", versions="12+", default=-1),
                                Field("log_start_offset", "int64", versions="5+", default=-1, ignorable=True),
                                Field("partition_max_bytes", "int32"),
                                Field(
                                    "replica_directory_id",
                                    "uuid",
                                    versions="17+",
                                    tag=0,
                                    tagged="17+",
                                    ignorable=True,
                                ),
                                Field(
                                    "high_watermark",
                                    "int64",
                                    versions="18+",
                                    tag=1,
                                    tagged="18+",
                                    default=_MAX_INT64,
                                    ignorable=True,
                                ),
                            )
                        ),
                    ),
                )
            ),
        ),
        Field(
            "forgotten_topics_data",
            Array(
                Struct(
                    "ForgottenTopic",
                    Field("topic", "string", versions="7-12", ignorable=True),
                    Field("topic_id", "uuid", versions="13+", ignorable=True),
                    Field("partitions", Array("int32"), versions="7+"),
                )
            ),
            versions="7+",
        ),
        Field("rack_id", "string", versions="11+", default="", ignorable=True),
    ),
    response=Struct(
        "FetchResponse",
        Field("throttle_time_ms", "int32", versions="1+", ignorable=True),
        Field("error_code", "int16", versions="7+", ignorable=True),
        Field("session_id", "int32", versions="7+", default=0),
        Field(
            "responses",
            Array(
                Struct(
                    "FetchableTopicResponse",
                    Field("topic", "string", versions="0-12", ignorable=True),
                    Field("topic_id", "uuid", versions="13+", ignorable=True),
                    Field(
                        "partitions",
                        Array(
                            Struct(
                                "PartitionData",
                                Field("partition_index", "int32"),
                                Field("error_code", "int16"),
                                Field("high_watermark", "int64"),
                                Field(
                                    "last_stable_offset", "int64", versions="4+", default=-1, ignorable=True
                                ),
                                Field("log_start_offset", "int64", versions="5+", default=-1, ignorable=True),
                                Field(
                                    "diverging_epoch",
                                    Struct(
                                        "EpochEndOffset",
                                        Field("epoch", "int32", versions="12+", default=-1),
                                        Field("end_offset", "int64", versions="12+", default=-1),
                                    ),
                                    versions="12+",
                                    tag=0,
                                    tagged="12+",
                                ),
                                current_leader(since=12, tag=1),
                                Field(
                                    "snapshot_id",
                                    Struct(
                                        "SnapshotId",
                                        Field("end_offset", "int64", default=-1),
                                        Field("epoch", "int32", default=-1),
                                    ),
                                    versions="12+",
                                    tag=2,
                                    tagged="12+",
                                ),
                                Field(
                                    "aborted_transactions",
                                    Array(
                                        Struct(
                                            "AbortedTransaction",
                                            Field("producer_id", "int64", versions="4+"),
                                            Field("first_offset", "int64", versions="4+"),
                                        )
                                    ),
                                    versions="4+",
                                    nullable="4+",
                                    ignorable=True,
                                ),
                                Field("preferred_read_replica", "int32", versions="11+", default=-1),
                                Field("records", "records", nullable="0+"),
                            )
                        ),
                    ),
                )
            ),
        ),
        node_endpoints(since=16),
    ),
)
