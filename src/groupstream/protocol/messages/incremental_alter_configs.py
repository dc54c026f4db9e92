"""IncrementalAlterConfigs (key 44): set, delete, append to or subtract from config entries.

Versions 0-1 (what Kafka 4.x serves). Peers: librdkafka 2.15+ and kafka-python 3.0 send up to 1.
"""

from groupstream.protocol.schema import Api, Array, Field, Struct

API = Api(
    key=44,
    name="IncrementalAlterConfigs",
    valid="0-1",
    flexible="1+",
    request=Struct(
        "IncrementalAlterConfigsRequest",
        Field(
            "resources",
            Array(
                Struct(
                    "AlterConfigsResource",
                    Field("resource_type", "int8"),
                    Field("resource_name", "string"),
                    Field(
                        "configs",
                        Array(
                            Struct(
                                "AlterableConfig",
                                Field("name", "string"),
                                Field("config_operation", "int8"),
                                Field("value", "string", nullable="0+"),
                            )
                        ),
                    ),
                )
            ),
        ),
        Field("validate_only", "bool"),
    ),
    response=Struct(
        "IncrementalAlterConfigsResponse",
        Field("throttle_time_ms", "int32"),
        Field(
            "responses",
            Array(
                Struct(
                    "AlterConfigsResourceResponse",
                    Field("error_code", "int16"),
                    Field("error_message", "string", nullable="0+"),
                    Field("resource_type", "int8"),
                    Field("resource_name", "string"),
                )
            ),
        ),
    ),
)
