"""FindCoordinator (key 10): which broker coordinates a group (key type 0) or a transactional id (1).

Versions 0-6 (what Kafka 4.x serves; v4+ looks up several keys at once). Peers: librdkafka 2.15+ sends up to 2,
kafka-python 3.0 up to 6 (3 from its admin client), aiokafka 0.14 up to 1.
"""

from groupstream.protocol.schema import Api, Array, Field, Struct

API = Api(
    key=10,
    name="FindCoordinator",
    valid="0-6",
    flexible="3+",
    request=Struct(
        "FindCoordinatorRequest",
        Field("key", "string", versions="0-3"),
        Field("key_type", "int8", versions="1+", default=0),
        Field("coordinator_keys", Array("string"), versions="4+"),
    ),
    response=Struct(
        "FindCoordinatorResponse",
        Field("throttle_time_ms", "int32", versions="1+", ignorable=True),
        Field("error_code", "int16", versions="0-3"),
        Field("error_message", "string", versions="1-3", nullable="1-3", ignorable=True),
        Field("node_id", "int32", versions="0-3"),
        Field("host", "string", versions="0-3"),
        Field("port", "int32", versions="0-3"),
        Field(
            "coordinators",
            Array(
                Struct(
                    "Coordinator",
                    Field("key", "string", versions="4+"),
                    Field("node_id", "int32", versions="4+"),
                    Field("host", "string", versions="4+"),
                    Field("port", "int32", versions="4+"),
                    Field("error_code", "int16", versions="4+"),
                    Field("error_message", "string", versions="4+", nullable="4+", ignorable=True),
                )
            ),
            versions="4+",
        ),
    ),
)
