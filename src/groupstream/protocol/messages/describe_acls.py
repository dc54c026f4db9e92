"""DescribeAcls (key 29): the ACL bindings that match one filter, grouped by resource pattern.

Versions 1-3 (what Kafka 4.x serves: v0 was removed with its pattern-less filters; v2 is flexible; v3 only adds
the USER resource type). Peers: the Java Admin's ``describeAcls`` (so ``kafka-acls --list``), confluent-kafka's
``describe_acls``.
"""

from groupstream.protocol.schema import Api, Array, Field, Struct

ACL_FILTER = (
    Field("resource_type_filter", "int8"),
    Field("resource_name_filter", "string", nullable="0+"),
    Field("pattern_type_filter", "int8", default=3),
    Field("principal_filter", "string", nullable="0+"),
    Field("host_filter", "string", nullable="0+"),
    Field("operation", "int8"),
    Field("permission_type", "int8"),
)
"""Kafka's ACL binding filter (``AclBindingFilter``): the whole DescribeAcls request and each of DeleteAcls's
filters, the same seven fields in both messages' JSON."""

API = Api(
    key=29,
    name="DescribeAcls",
    valid="1-3",
    flexible="2+",
    request=Struct(
        "DescribeAclsRequest",
        *ACL_FILTER,
    ),
    response=Struct(
        "DescribeAclsResponse",
        Field("throttle_time_ms", "int32"),
        Field("error_code", "int16"),
        Field("error_message", "string", nullable="0+"),
        Field(
            "resources",
            Array(
                Struct(
                    "DescribeAclsResource",
                    Field("resource_type", "int8"),
                    Field("resource_name", "string"),
                    Field("pattern_type", "int8", default=3),
                    Field(
                        "acls",
                        Array(
                            Struct(
                                "AclDescription",
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
