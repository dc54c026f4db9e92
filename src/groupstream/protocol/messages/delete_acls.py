"""DeleteAcls (key 31): remove every ACL binding that matches each filter, answering what each removed.

Versions 1-3 (what Kafka 4.x serves; v2 is flexible, v3 only adds the USER resource type). Peers: the Java
Admin's ``deleteAcls`` (``kafka-acls --remove``), confluent-kafka's ``delete_acls``.
"""

from groupstream.protocol.messages.describe_acls import ACL_FILTER
from groupstream.protocol.schema import Api, Array, Field, Struct

API = Api(
    key=31,
    name="DeleteAcls",
    valid="1-3",
    flexible="2+",
    request=Struct(
        "DeleteAclsRequest",
        Field(
            "filters",
            Array(
                Struct(
                    "DeleteAclsFilter",
                    *ACL_FILTER,
                )
            ),
        ),
    ),
    response=Struct(
        "DeleteAclsResponse",
        Field("throttle_time_ms", "int32"),
        Field(
            "filter_results",
            Array(
                Struct(
                    "DeleteAclsFilterResult",
                    Field("error_code", "int16"),
                    Field("error_message", "string", nullable="0+"),
                    Field(
                        "matching_acls",
                        Array(
                            Struct(
                                "DeleteAclsMatchingAcl",
                                Field("error_code", "int16"),
                                Field("error_message", "string", nullable="0+"),
                                Field("resource_type", "int8"),
                                Field("resource_name", "string"),
                                Field("pattern_type", "int8", default=3),
                                Field("principal", "string"),
                                Field("host", "string"),
                                Field("operation", "int8"),
                                Field("permission_type", "int8"),
                            )
                        ),
                    ),
                )
            ),
        ),
    ),
)
