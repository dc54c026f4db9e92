"""DescribeConfigs (key 32): topic and broker configuration, as admin tools and kcat show it.

Versions 0-4 (Kafka 4.x serves 1-4; v0 differs only by its ``is_default`` flag in place of a config source).
Peers: librdkafka 2.15+ sends up to 1, kafka-python 3.0 up to 4, aiokafka 0.14 up to 2.
"""

from groupstream.protocol.schema import Api, Array, Field, Struct

API = Api(
    key=32,
    name="DescribeConfigs",
    valid="0-4",
    flexible="4+",
    request=Struct(
        "DescribeConfigsRequest",
        Field(
            "resources",
            Array(
                Struct(
                    "DescribeConfigsResource",
                    Field("resource_type", "int8"),
                    Field("resource_name", "string"),
                    Field("configuration_keys", Array("string"), nullable="0+"),
                )
            ),
        ),
        Field("include_synonyms", "bool", versions="1+", default=False),
        Field("include_documentation", "bool", versions="3+", default=False),
    ),
    response=Struct(
        "DescribeConfigsResponse",
        Field("throttle_time_ms", "int32"),
        Field(
            "results",
            Array(
                Struct(
                    "DescribeConfigsResult",
                    Field("error_code", "int16"),
                    Field("error_message", "string", nullable="0+"),
                    Field("resource_type", "int8"),
                    Field("resource_name", "string"),
                    Field(
                        "configs",
                        Array(
                            Struct(
                                "DescribeConfigsResourceResult",
                                Field("name", "string"),
                                Field("value", "string", nullable="0+"),
                                Field("read_only", "bool"),
                                Field("is_default", "bool", versions="0"),
                                Field("config_source", "int8", versions="1+", default=-1, ignorable=True),
                                Field("is_sensitive", "bool"),
                                Field(
                                    "synonyms",
                                    Array(
                                        Struct(
                                            "DescribeConfigsSynonym",
                                            Field("name", "string", versions="1+"),
                                            Field("value", "string", versions="1+", nullable="0+"),
                                            Field("source", "int8", versions="1+"),
                                        )
                                    ),
                                    versions="1+",
                                    ignorable=True,
                                ),
                                Field("config_type", "int8", versions="3+", default=0, ignorable=True),
                                Field(
                                    "documentation", "string", versions="3+", nullable="0+", ignorable=True
                                ),
                            )
                        ),
                    ),
                )
            ),
        ),
    ),
)
