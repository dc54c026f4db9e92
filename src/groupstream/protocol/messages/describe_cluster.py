"""DescribeCluster (key 60): cluster id, controller and brokers, as the admin client asks for them.

Versions 0-2 (what Kafka 4.x serves; v2 can include fenced brokers). Peers: kafka-python 3.0 sends up to 2.
"""

from groupstream.protocol.messages.common_structs import NO_AUTHORIZED_OPERATIONS
from groupstream.protocol.schema import NULL, Api, Array, Field, Struct

API = Api(
    key=60,
    name="DescribeCluster",
    valid="0-2",
    flexible="0+",
    request=Struct(
        "DescribeClusterRequest",
        Field("include_cluster_authorized_operations", "bool"),
        Field("endpoint_type", "int8", versions="1+", default=1),
        Field("include_fenced_brokers", "bool", versions="2+"),
    ),
    response=Struct(
        "DescribeClusterResponse",
        Field("throttle_time_ms", "int32"),
        Field("error_code", "int16"),
        Field("error_message", "string", nullable="0+", default=NULL),
        Field("endpoint_type", "int8", versions="1+", default=1),
        Field("cluster_id", "string"),
        Field("controller_id", "int32", default=-1),
        Field(
            "brokers",
            Array(
                Struct(
                    "DescribeClusterBroker",
                    Field("broker_id", "int32"),
                    Field("host", "string"),
                    Field("port", "int32"),
                    Field("rack", "string", nullable="0+", default=NULL),
                    Field("is_fenced", "bool", versions="2+"),
                )
            ),
        ),
        Field("cluster_authorized_operations", "int32", default=NO_AUTHORIZED_OPERATIONS),
    ),
)
