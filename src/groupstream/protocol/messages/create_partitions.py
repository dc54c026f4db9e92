"""CreatePartitions (key 37): grow a topic's partition count.

Versions 0-3 (what Kafka 4.x serves). Peers: librdkafka 2.15+ sends up to 2, kafka-python 3.0 up to 3,
aiokafka 0.14 up to 1.
"""

from groupstream.protocol.schema import NULL, Api, Array, Field, Struct

API = Api(
    key=37,
    name="CreatePartitions",
    valid="0-3",
    flexible="2+",
    request=Struct(
        "CreatePartitionsRequest",
        Field(
            "topics",
            Array(
                Struct(
                    "CreatePartitionsTopic",
                    Field("name", "string"),
                    Field("count", "int32"),
                    Field(
                        "assignments",
                        Array(Struct("CreatePartitionsAssignment", Field("broker_ids", Array("int32")))),
                        nullable="0+",
                    ),
                )
            ),
        ),
        Field("timeout_ms", "int32"),
        Field("validate_only", "bool"),
    ),
    response=Struct(
        "CreatePartitionsResponse",
        Field("throttle_time_ms", "int32"),
        Field(
            "results",
            Array(
                Struct(
                    "CreatePartitionsTopicResult",
                    Field("name", "string"),
                    Field("error_code", "int16"),
                    Field("error_message", "string", nullable="0+", default=NULL),
                )
            ),
        ),
    ),
)
