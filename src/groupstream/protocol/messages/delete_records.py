"""DeleteRecords (key 21): move a partition's log start offset forward.

Versions 0-2 (what Kafka 4.x serves). Peers: librdkafka 2.15+ sends up to 2, kafka-python 3.0 up to 2,
aiokafka 0.14 up to 2.
"""

from groupstream.protocol.schema import Api, Array, Field, Struct

API = Api(
    key=21,
    name="DeleteRecords",
    valid="0-2",
    flexible="2+",
    request=Struct(
        "DeleteRecordsRequest",
        Field(
            "topics",
            Array(
                Struct(
                    "DeleteRecordsTopic",
                    Field("name", "string"),
                    Field(
                        "partitions",
                        Array(
                            Struct(
                                "DeleteRecordsPartition",
                                Field("partition_index", "int32"),
                                Field("offset", "int64"),
                            )
                        ),
                    ),
                )
            ),
        ),
        Field("timeout_ms", "int32"),
    ),
    response=Struct(
        "DeleteRecordsResponse",
        Field("throttle_time_ms", "int32"),
        Field(
            "topics",
            Array(
                Struct(
                    "DeleteRecordsTopicResult",
                    Field("name", "string"),
                    Field(
                        "partitions",
                        Array(
                            Struct(
                                "DeleteRecordsPartitionResult",
                                Field("partition_index", "int32"),
                                Field("low_watermark", "int64"),
                                Field("error_code", "int16"),
                            )
                        ),
                    ),
                )
            ),
        ),
    ),
)
