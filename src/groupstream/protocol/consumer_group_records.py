"""The KIP-848 ``consumer`` group records of `__consumer_offsets`, in Kafka's key and value formats.

Record types (Kafka's numbering, so Kafka's own tools and lag exporters read our topic):

- 3 ConsumerGroupMetadata, key (group): the group epoch (tagged: metadata hash, creation time);
- 4 ConsumerGroupPartitionMetadata, key (group): topics the group subscribes to, their partition counts and
  racks, at the group epoch (Kafka 4.1+ replaced it by the hash, but still reads it);
- 5 ConsumerGroupMemberMetadata, key (group, member): the member's subscription, instance id, rack, client
  id and host, rebalance timeout, server assignor (tagged: a classic member's session timeout and protocols);
- 6 ConsumerGroupTargetAssignmentMetadata, key (group): the target assignment's epoch (tagged: timestamp);
- 7 ConsumerGroupTargetAssignmentMember, key (group, member): the member's target partitions;
- 8 ConsumerGroupCurrentMemberAssignment, key (group, member): the member's epoch, previous epoch, state,
  assigned partitions and partitions pending revocation (tagged: per-partition assignment epochs);
- 16 ConsumerGroupRegularExpression, key (group, regex): the topics a regex resolved to, with a version.

Keys are non-flexible structs after the int16 type; values are flexible v0 structs after an int16 version.
Importing this module registers the types with `group_records`.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from groupstream.protocol.compiler import CompiledStruct
from groupstream.protocol.group_records import RecordType, register_record_type
from groupstream.protocol.schema import NULL, Array, Field, Struct

__all__ = [
    "CONSUMER_GROUP_RECORD_TYPES",
    "ClassicProtocol",
    "ConsumerGroupKey",
    "ConsumerMemberKey",
    "CurrentMemberAssignmentValue",
    "GroupMetadataValue848",
    "MemberMetadataValue",
    "PartitionMetadataValue",
    "RegexKey",
    "RegexValue",
    "TargetAssignmentMemberValue",
    "TargetAssignmentMetadataValue",
    "TopicMetadata",
    "TopicPartitions",
]

GROUP_METADATA, PARTITION_METADATA, MEMBER_METADATA = 3, 4, 5
TARGET_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT, REGULAR_EXPRESSION = 6, 7, 8, 16
CONSUMER_GROUP_RECORD_TYPES = (3, 4, 5, 6, 7, 8, 16)


# --- keys --------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ConsumerGroupKey:
    group: str


@dataclass(frozen=True, slots=True)
class ConsumerMemberKey:
    group: str
    member_id: str


@dataclass(frozen=True, slots=True)
class RegexKey:
    group: str
    regex: str


_GROUP_KEY = CompiledStruct("ConsumerGroupKey", Struct("ConsumerGroupKey", Field("group_id", "string")), "0")
_MEMBER_KEY = CompiledStruct(
    "ConsumerMemberKey", Struct("ConsumerMemberKey", Field("group_id", "string"), Field("member_id", "string")), "0"
)
_REGEX_KEY = CompiledStruct(
    "RegexKey", Struct("RegexKey", Field("group_id", "string"), Field("regular_expression", "string")), "0"
)

# --- values ------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GroupMetadataValue848:
    epoch: int
    metadata_hash: int = 0
    creation_time_ms: int = -1


@dataclass(frozen=True, slots=True)
class TopicMetadata:
    topic_id: uuid.UUID
    name: str
    partitions: int
    racks: tuple[tuple[int, tuple[str, ...]], ...] = ()


@dataclass(frozen=True, slots=True)
class PartitionMetadataValue:
    epoch: int
    topics: tuple[TopicMetadata, ...]


@dataclass(frozen=True, slots=True)
class ClassicProtocol:
    name: str
    metadata: bytes


@dataclass(frozen=True, slots=True)
class MemberMetadataValue:
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topics: tuple[str, ...]
    subscribed_regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None
    classic_protocols: tuple[ClassicProtocol, ...] | None = None
    # ClassicMemberMetadata.SessionTimeoutMs: a classic member's session timeout (from its JoinGroup), which
    # its session in a consumer group keeps (meaningful only with ``classic_protocols``).
    classic_session_timeout_ms: int = -1

    @property
    def uses_classic_protocol(self) -> bool:
        """A classic (JoinGroup/SyncGroup) member of a consumer group (Kafka's online migration)."""
        return self.classic_protocols is not None


@dataclass(frozen=True, slots=True)
class TargetAssignmentMetadataValue:
    epoch: int
    timestamp_ms: int = 0


@dataclass(frozen=True, slots=True)
class TopicPartitions:
    topic_id: uuid.UUID
    partitions: tuple[int, ...]
    assignment_epochs: tuple[int, ...] | None = None


@dataclass(frozen=True, slots=True)
class TargetAssignmentMemberValue:
    partitions: tuple[TopicPartitions, ...]


@dataclass(frozen=True, slots=True)
class CurrentMemberAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned: tuple[TopicPartitions, ...]
    pending_revocation: tuple[TopicPartitions, ...]


@dataclass(frozen=True, slots=True)
class RegexValue:
    topics: tuple[str, ...]
    version: int
    timestamp_ms: int


def _value(name: str, *fields: Field) -> CompiledStruct:
    return CompiledStruct(name, Struct(name, *fields), "0", flexible="0+")


_TOPIC_PARTITIONS = Struct(
    "TopicPartitions",
    Field("topic_id", "uuid"),
    Field("partitions", Array("int32")),
    Field("assignment_epochs", Array("int32"), nullable="0+", tag=0, tagged="0+", default=NULL, ignorable=True),
)
_GROUP_VALUE = _value(
    "ConsumerGroupMetadataValue",
    Field("epoch", "int32"),
    Field("metadata_hash", "int64", tag=0, tagged="0+", default=0, ignorable=True),
    Field("creation_time_ms", "int64", tag=1, tagged="0+", default=-1, ignorable=True),
)
_PARTITION_VALUE = _value(
    "ConsumerGroupPartitionMetadataValue",
    Field("epoch", "int32"),
    Field("topics", Array(Struct(
        "TopicMetadata",
        Field("topic_id", "uuid"),
        Field("topic_name", "string"),
        Field("num_partitions", "int32"),
        Field("partition_racks", Array(Struct("PartitionMetadata", Field("partition", "int32"),
                                              Field("racks", Array("string"))))),
    ))),
)  # fmt: skip
_MEMBER_VALUE = _value(
    "ConsumerGroupMemberMetadataValue",
    Field("instance_id", "string", nullable="0+"),
    Field("rack_id", "string", nullable="0+"),
    Field("client_id", "string"),
    Field("client_host", "string"),
    Field("subscribed_topic_names", Array("string")),
    Field("subscribed_topic_regex", "string", nullable="0+"),
    Field("rebalance_timeout_ms", "int32", default=-1),
    Field("server_assignor", "string", nullable="0+"),
    Field("classic_member_metadata", Struct(
        "ClassicMemberMetadata",
        Field("session_timeout_ms", "int32"),
        Field("supported_protocols", Array(Struct("ClassicProtocol", Field("name", "string"),
                                                  Field("metadata", "bytes")))),
    ), nullable="0+", tag=0, tagged="0+", default=NULL, ignorable=True),
)  # fmt: skip
_TARGET_METADATA_VALUE = _value(
    "ConsumerGroupTargetAssignmentMetadataValue",
    Field("assignment_epoch", "int32"),
    Field("assignment_timestamp", "int64", tag=0, tagged="0+", default=0, ignorable=True),
)
_TARGET_MEMBER_VALUE = _value(
    "ConsumerGroupTargetAssignmentMemberValue",
    Field("topic_partitions", Array(Struct("TopicPartition", Field("topic_id", "uuid"),
                                           Field("partitions", Array("int32"))))),
)  # fmt: skip
_CURRENT_VALUE = _value(
    "ConsumerGroupCurrentMemberAssignmentValue",
    Field("member_epoch", "int32"),
    Field("previous_member_epoch", "int32"),
    Field("state", "int8"),
    Field("assigned_partitions", Array(_TOPIC_PARTITIONS)),
    Field("partitions_pending_revocation", Array(_TOPIC_PARTITIONS)),
)
_REGEX_VALUE = _value(
    "ConsumerGroupRegularExpressionValue",
    Field("topics", Array("string")),
    Field("version", "int64"),
    Field("timestamp", "int64"),
)


# --- conversions -------------------------------------------------------------------------------------------


def _tp_to_wire(t: Any, tps: tuple[TopicPartitions, ...]) -> list[Any]:
    # The tuples as they are: the encoder reads an array's length and items, whatever its sequence type.
    return [t.TopicPartitions(topic_id=x.topic_id, partitions=x.partitions, assignment_epochs=x.assignment_epochs)
            for x in tps]  # fmt: skip


def _tp_from_wire(items: Any) -> tuple[TopicPartitions, ...]:
    return tuple(
        TopicPartitions(x.topic_id, tuple(x.partitions), None if x.assignment_epochs is None else tuple(x.assignment_epochs))
        for x in items
    )


def _group_key(kind: type[Any]) -> tuple[Any, Any]:
    return (lambda k: _GROUP_KEY.Type(group_id=k.group)), (lambda m: kind(str(m.group_id)))


def _member_key() -> tuple[Any, Any]:
    return (lambda k: _MEMBER_KEY.Type(group_id=k.group, member_id=k.member_id)), (
        lambda m: ConsumerMemberKey(str(m.group_id), str(m.member_id))
    )


def _member_value_to_wire(v: MemberMetadataValue) -> Any:
    T = _MEMBER_VALUE.Type
    classic = None
    if v.classic_protocols is not None:
        classic = T.ClassicMemberMetadata(
            session_timeout_ms=v.classic_session_timeout_ms,
            supported_protocols=[T.ClassicMemberMetadata.ClassicProtocol(name=p.name, metadata=p.metadata)
                                 for p in v.classic_protocols])  # fmt: skip
    return T(instance_id=v.instance_id, rack_id=v.rack_id, client_id=v.client_id, client_host=v.client_host,
             subscribed_topic_names=list(v.subscribed_topics), subscribed_topic_regex=v.subscribed_regex,
             rebalance_timeout_ms=v.rebalance_timeout_ms, server_assignor=v.server_assignor,
             classic_member_metadata=classic)  # fmt: skip


def _member_value_from_wire(m: Any) -> MemberMetadataValue:
    classic = m.classic_member_metadata
    protocols = None if classic is None else tuple(
        ClassicProtocol(str(p.name), bytes(p.metadata)) for p in classic.supported_protocols)  # fmt: skip
    return MemberMetadataValue(m.instance_id, m.rack_id, str(m.client_id), str(m.client_host),
                               tuple(m.subscribed_topic_names), m.subscribed_topic_regex,
                               int(m.rebalance_timeout_ms), m.server_assignor, protocols,
                               -1 if classic is None else int(classic.session_timeout_ms))  # fmt: skip


def _partition_value_to_wire(v: PartitionMetadataValue) -> Any:
    T = _PARTITION_VALUE.Type
    M = T.TopicMetadata
    topics = [M(topic_id=t.topic_id, topic_name=t.name, num_partitions=t.partitions,
                partition_racks=[M.PartitionMetadata(partition=p, racks=list(r)) for p, r in t.racks])
              for t in v.topics]  # fmt: skip
    return T(epoch=v.epoch, topics=topics)


def _partition_value_from_wire(m: Any) -> PartitionMetadataValue:
    return PartitionMetadataValue(int(m.epoch), tuple(
        TopicMetadata(t.topic_id, str(t.topic_name), int(t.num_partitions),
                      tuple((int(r.partition), tuple(r.racks)) for r in t.partition_racks))
        for t in m.topics))  # fmt: skip


def _register() -> None:
    gk_to, gk_from = _group_key(ConsumerGroupKey)
    mk_to, mk_from = _member_key()
    types: dict[int, RecordType] = {
        GROUP_METADATA: RecordType(
            "ConsumerGroupMetadata", _GROUP_KEY, _GROUP_VALUE, gk_to, gk_from,
            lambda v: _GROUP_VALUE.Type(epoch=v.epoch, metadata_hash=v.metadata_hash,
                                        creation_time_ms=v.creation_time_ms),
            lambda m: GroupMetadataValue848(int(m.epoch), int(m.metadata_hash), int(m.creation_time_ms)),
        ),
        PARTITION_METADATA: RecordType(
            "ConsumerGroupPartitionMetadata", _GROUP_KEY, _PARTITION_VALUE, gk_to, gk_from,
            _partition_value_to_wire, _partition_value_from_wire,
        ),
        MEMBER_METADATA: RecordType(
            "ConsumerGroupMemberMetadata", _MEMBER_KEY, _MEMBER_VALUE, mk_to, mk_from,
            _member_value_to_wire, _member_value_from_wire,
        ),
        TARGET_METADATA: RecordType(
            "ConsumerGroupTargetAssignmentMetadata", _GROUP_KEY, _TARGET_METADATA_VALUE, gk_to, gk_from,
            lambda v: _TARGET_METADATA_VALUE.Type(assignment_epoch=v.epoch, assignment_timestamp=v.timestamp_ms),
            lambda m: TargetAssignmentMetadataValue(int(m.assignment_epoch), int(m.assignment_timestamp)),
        ),
        TARGET_MEMBER: RecordType(
            "ConsumerGroupTargetAssignmentMember", _MEMBER_KEY, _TARGET_MEMBER_VALUE, mk_to, mk_from,
            lambda v: _TARGET_MEMBER_VALUE.Type(topic_partitions=[
                _TARGET_MEMBER_VALUE.Type.TopicPartition(topic_id=x.topic_id, partitions=x.partitions)
                for x in v.partitions]),
            lambda m: TargetAssignmentMemberValue(tuple(TopicPartitions(x.topic_id, tuple(x.partitions))
                                                        for x in m.topic_partitions)),
        ),
        CURRENT_ASSIGNMENT: RecordType(
            "ConsumerGroupCurrentMemberAssignment", _MEMBER_KEY, _CURRENT_VALUE, mk_to, mk_from,
            lambda v: _CURRENT_VALUE.Type(
                member_epoch=v.member_epoch, previous_member_epoch=v.previous_member_epoch, state=v.state,
                assigned_partitions=_tp_to_wire(_CURRENT_VALUE.Type, v.assigned),
                partitions_pending_revocation=_tp_to_wire(_CURRENT_VALUE.Type, v.pending_revocation)),
            lambda m: CurrentMemberAssignmentValue(int(m.member_epoch), int(m.previous_member_epoch), int(m.state),
                                                   _tp_from_wire(m.assigned_partitions),
                                                   _tp_from_wire(m.partitions_pending_revocation)),
        ),
        REGULAR_EXPRESSION: RecordType(
            "ConsumerGroupRegularExpression", _REGEX_KEY, _REGEX_VALUE,
            lambda k: _REGEX_KEY.Type(group_id=k.group, regular_expression=k.regex),
            lambda m: RegexKey(str(m.group_id), str(m.regular_expression)),
            lambda v: _REGEX_VALUE.Type(topics=list(v.topics), version=v.version, timestamp=v.timestamp_ms),
            lambda m: RegexValue(tuple(m.topics), int(m.version), int(m.timestamp)),
        ),
    }  # fmt: skip
    for record_type, fmt in types.items():
        register_record_type(record_type, fmt)


_register()
