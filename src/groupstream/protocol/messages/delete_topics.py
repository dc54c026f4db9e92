"""DeleteTopics (key 20): by name before v6, by name or id from v6.

Versions 0-6 (Kafka 4.x serves 1-6; v0 shares v1's layout). Peers: librdkafka 2.15+ sends up to 4,
kafka-python 3.0 up to 6, aiokafka 0.14 up to 3.
"""

from groupstream.protocol.schema import NULL, Api, Array, Field, Struct

API = Api(
    key=20,
    name="DeleteTopics",
    valid="0-6",
    flexible="4+",
    request=Struct(
        "DeleteTopicsRequest",
        Field(
            "topics",
            Array(
                Struct(
                    "DeleteTopicState",
                    Field("name", "string", versions="6+", nullable="6+", default=NULL),
                    Field("topic_id", "uuid", versions="6+"),
                )
            ),
            versions="6+",
        ),
        Field("topic_names", Array("string"), versions="0-5", ignorable=True),
        Field("timeout_ms", "int32"),
    ),
    response=Struct(
        "DeleteTopicsResponse",
        Field("throttle_time_ms", "int32", versions="1+", ignorable=True),
        Field(
            "responses",
            Array(
                Struct(
                    "DeletableTopicResult",
                    Field("name", "string", nullable="6+"),
                    Field("topic_id", "uuid", versions="6+", ignorable=True),
                    Field("error_code", "int16"),
                    Field(
                        "error_message", "string", versions="5+", nullable="5+", default=NULL, ignorable=True
                    ),
                )
            ),
        ),
    ),
)
