"""CreateAcls (key 30): add ACL bindings, one result per binding in request order.

Versions 1-3 (what Kafka 4.x serves; v2 is flexible, v3 only adds the USER resource type). Peers: the Java
Admin's ``createAcls`` (``kafka-acls --add``), confluent-kafka's ``create_acls``.
"""

from groupstream.protocol.schema import Api, Array, Field, Struct

API = Api(
    key=30,
    name="CreateAcls",
    valid="1-3",
    flexible="2+",
    request=Struct(
        "CreateAclsRequest",
        Field(
            "creations",
            Array(
                Struct(
                    "AclCreation",
                    Field("resource_type", "int8"),
                    Field("resource_name", "string"),
                    Field("resource_pattern_type", "int8", default=3),
                    Field("principal", "string"),
                    Field("host", "string"),
                    Field("operation", "int8"),
                    Field("permission_type", "int8"),
                )
            ),
        ),
    ),
    response=Struct(
        "CreateAclsResponse",
        Field("throttle_time_ms", "int32"),
        Field(
            "results",
            Array(
                Struct(
                    "AclCreationResult",
                    Field("error_code", "int16"),
                    Field("error_message", "string", nullable="0+"),
                )
            ),
        ),
    ),
)
