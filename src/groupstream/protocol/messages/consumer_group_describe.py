"""ConsumerGroupDescribe (key 69): KIP-848 groups' epochs, members and their current and target assignments.

Versions 0-1 (what Kafka 4.x serves; v1 adds the member type). Peers: librdkafka 2.15+ sends 0; kafka-python
and aiokafka do not send it.
"""

from groupstream.protocol.messages.common_structs import NO_AUTHORIZED_OPERATIONS
from groupstream.protocol.schema import NULL, Api, Array, Field, Struct

_TOPIC_PARTITIONS = Struct(
    "TopicPartitions",
    Field("topic_id", "uuid"),
    Field("topic_name", "string"),
    Field("partitions", Array("int32")),
)

# One struct for both the current and the target assignment, as in Kafka's spec.
_ASSIGNMENT = Struct("Assignment", Field("topic_partitions", Array(_TOPIC_PARTITIONS)))

API = Api(
    key=69,
    name="ConsumerGroupDescribe",
    valid="0-1",
    flexible="0+",
    request=Struct(
        "ConsumerGroupDescribeRequest",
        Field("group_ids", Array("string")),
        Field("include_authorized_operations", "bool"),
    ),
    response=Struct(
        "ConsumerGroupDescribeResponse",
        Field("throttle_time_ms", "int32"),
        Field(
            "groups",
            Array(
                Struct(
                    "DescribedGroup",
                    Field("error_code", "int16"),
                    Field("error_message", "string", nullable="0+", default=NULL),
                    Field("group_id", "string"),
                    Field("group_state", "string"),
                    Field("group_epoch", "int32"),
                    Field("assignment_epoch", "int32"),
                    Field("assignor_name", "string"),
                    Field(
                        "members",
                        Array(
                            Struct(
                                "Member",
                                Field("member_id", "string"),
                                Field("instance_id", "string", nullable="0+", default=NULL),
                                Field("rack_id", "string", nullable="0+", default=NULL),
                                Field("member_epoch", "int32"),
                                Field("client_id", "string"),
                                Field("client_host", "string"),
                                Field("subscribed_topic_names", Array("string")),
                                Field("subscribed_topic_regex", "string", nullable="0+", default=NULL),
                                Field("assignment", _ASSIGNMENT),
                                Field("target_assignment", _ASSIGNMENT),
                                Field("member_type", "int8", versions="1+", default=-1, ignorable=True),
                            )
                        ),
                    ),
                    Field("authorized_operations", "int32", default=NO_AUTHORIZED_OPERATIONS),
                )
            ),
        ),
    ),
)
