"""OffsetFetch (key 9): the committed positions of a group (one group before v8, several from v8).

Versions 0-10 (Kafka 4.x serves 1-10; v0 shares v1's layout; v10 names topics by id).
Peers: librdkafka 2.15+ sends up to 9, kafka-python 3.0 up to 8, aiokafka 0.14 sends 1-3.
"""

from groupstream.protocol.schema import NULL, Api, Array, Field, Struct

# From v8 a request asks for several groups; their topics are named by name up to v9, by id from v10 (KIP-516).
_GROUP_TOPIC_KEY = (
    Field("name", "string", versions="8-9", ignorable=True),
    Field("topic_id", "uuid", versions="10+", ignorable=True),
)


def _partitions(struct_name: str, versions: str, epoch_versions: str) -> Field:
    """A topic's committed partitions: the same five fields in the single-group answer (v0-7) and in each group
    of the several-group answer (v8+); Kafka names the two structs apart, so the name is kept."""
    return Field(
        "partitions",
        Array(
            Struct(
                struct_name,
                Field("partition_index", "int32", versions=versions),
                Field("committed_offset", "int64", versions=versions),
                Field("committed_leader_epoch", "int32", versions=epoch_versions, default=-1, ignorable=True),
                Field("metadata", "string", versions=versions, nullable=versions),
                Field("error_code", "int16", versions=versions),
            )
        ),
        versions=versions,
    )


API = Api(
    key=9,
    name="OffsetFetch",
    valid="0-10",
    flexible="6+",
    request=Struct(
        "OffsetFetchRequest",
        Field("group_id", "string", versions="0-7"),
        Field(
            "topics",
            Array(
                Struct(
                    "OffsetFetchRequestTopic",
                    Field("name", "string", versions="0-7"),
                    Field("partition_indexes", Array("int32"), versions="0-7"),
                )
            ),
            versions="0-7",
            nullable="2-7",
        ),
        Field(
            "groups",
            Array(
                Struct(
                    "OffsetFetchRequestGroup",
                    Field("group_id", "string", versions="8+"),
                    Field("member_id", "string", versions="9+", nullable="9+", default=NULL, ignorable=True),
                    Field("member_epoch", "int32", versions="9+", default=-1, ignorable=True),
                    Field(
                        "topics",
                        Array(
                            Struct(
                                "OffsetFetchRequestTopics",
                                *_GROUP_TOPIC_KEY,
                                Field("partition_indexes", Array("int32"), versions="8+"),
                            )
                        ),
                        versions="8+",
                        nullable="8+",
                    ),
                )
            ),
            versions="8+",
        ),
        Field("require_stable", "bool", versions="7+", default=False),
    ),
    response=Struct(
        "OffsetFetchResponse",
        Field("throttle_time_ms", "int32", versions="3+", ignorable=True),
        Field(
            "topics",
            Array(
                Struct(
                    "OffsetFetchResponseTopic",
                    Field("name", "string", versions="0-7"),
                    _partitions("OffsetFetchResponsePartition", versions="0-7", epoch_versions="5-7"),
                )
            ),
            versions="0-7",
        ),
        Field("error_code", "int16", versions="2-7", default=0, ignorable=True),
        Field(
            "groups",
            Array(
                Struct(
                    "OffsetFetchResponseGroup",
                    Field("group_id", "string", versions="8+"),
                    Field(
                        "topics",
                        Array(
                            Struct(
                                "OffsetFetchResponseTopics",
                                *_GROUP_TOPIC_KEY,
                                _partitions(
                                    "OffsetFetchResponsePartitions", versions="8+", epoch_versions="8+"
                                ),
                            )
                        ),
                        versions="8+",
                    ),
                    Field("error_code", "int16", versions="8+", default=0),
                )
            ),
            versions="8+",
        ),
    ),
)
