"""ConsumerGroupHeartbeat (key 68): the whole KIP-848 ``consumer`` protocol in one request.

Versions 0-1 (what Kafka 4.x serves; v1 adds a server-side regular expression subscription). Member epoch 0
joins, -1 leaves, -2 leaves statically. Peers: librdkafka 2.15+ sends 1 (with ``group.protocol=consumer``);
kafka-python and aiokafka do not speak this protocol.
"""

from groupstream.protocol.schema import NULL, Api, Array, Field, Struct

JOIN_EPOCH = 0
"""The member epoch of a member that joins (or rejoins after being fenced)."""
LEAVE_EPOCH = -1
"""The member epoch of a member that leaves the group."""
STATIC_LEAVE_EPOCH = -2
"""The member epoch of a static member that leaves for now and keeps its assignment for its return."""

# A member's owned partitions (request) and its assignment (response) are the same struct: one definition,
# so they share one generated class.
_TOPIC_PARTITIONS = Struct(
    "TopicPartitions",
    Field("topic_id", "uuid"),
    Field("partitions", Array("int32")),
)

API = Api(
    key=68,
    name="ConsumerGroupHeartbeat",
    valid="0-1",
    flexible="0+",
    request=Struct(
        "ConsumerGroupHeartbeatRequest",
        Field("group_id", "string"),
        Field("member_id", "string"),
        Field("member_epoch", "int32"),
        Field("instance_id", "string", nullable="0+", default=NULL),
        Field("rack_id", "string", nullable="0+", default=NULL),
        Field("rebalance_timeout_ms", "int32", default=-1),
        Field("subscribed_topic_names", Array("string"), nullable="0+", default=NULL),
        Field("subscribed_topic_regex", "string", versions="1+", nullable="1+", default=NULL),
        Field("server_assignor", "string", nullable="0+", default=NULL),
        Field("topic_partitions", Array(_TOPIC_PARTITIONS), nullable="0+", default=NULL),
    ),
    response=Struct(
        "ConsumerGroupHeartbeatResponse",
        Field("throttle_time_ms", "int32"),
        Field("error_code", "int16"),
        Field("error_message", "string", nullable="0+", default=NULL),
        Field("member_id", "string", nullable="0+", default=NULL),
        Field("member_epoch", "int32"),
        Field("heartbeat_interval_ms", "int32"),
        Field(
            "assignment",
            Struct(
                "Assignment",
                Field("topic_partitions", Array(_TOPIC_PARTITIONS)),
            ),
            nullable="0+",
            default=NULL,
        ),
    ),
)
