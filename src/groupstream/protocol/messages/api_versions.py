"""ApiVersions (key 18): what a client asks first. Always answered, even at versions we do not know.

Versions 0-4 (what Kafka 4.x serves). Peers: librdkafka 2.15+ first sends v3 and retries with the highest
version our error answer lists; kafka-python 3.0 knows up to 4; aiokafka 0.14 up to 2.
"""

from groupstream.protocol.schema import Api, Array, Field, Struct

API = Api(
    key=18,
    name="ApiVersions",
    valid="0-4",
    flexible="3+",
    request=Struct(
        "ApiVersionsRequest",
        Field("client_software_name", "string", versions="3+", ignorable=True),
        Field("client_software_version", "string", versions="3+", ignorable=True),
    ),
    response=Struct(
        "ApiVersionsResponse",
        Field("error_code", "int16"),
        Field(
            "api_keys",
            Array(
                Struct(
                    "ApiVersion",
                    Field("api_key", "int16"),
                    Field("min_version", "int16"),
                    Field("max_version", "int16"),
                )
            ),
        ),
        Field("throttle_time_ms", "int32", versions="1+", ignorable=True),
        Field(
            "supported_features",
            Array(
                Struct(
                    "SupportedFeatureKey",
                    Field("name", "string", versions="3+"),
                    Field("min_version", "int16", versions="3+"),
                    Field("max_version", "int16", versions="3+"),
                )
            ),
            versions="3+",
            tag=0,
            tagged="3+",
            ignorable=True,
        ),
        Field(
            "finalized_features_epoch", "int64", versions="3+", tag=1, tagged="3+", default=-1, ignorable=True
        ),
        Field(
            "finalized_features",
            Array(
                Struct(
                    "FinalizedFeatureKey",
                    Field("name", "string", versions="3+"),
                    Field("max_version_level", "int16", versions="3+"),
                    Field("min_version_level", "int16", versions="3+"),
                )
            ),
            versions="3+",
            tag=2,
            tagged="3+",
            ignorable=True,
        ),
        Field("zk_migration_ready", "bool", versions="3+", tag=3, tagged="3+", default=False, ignorable=True),
    ),
)
