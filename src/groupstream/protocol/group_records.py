"""The key and value formats of `__consumer_offsets` records, as Kafka writes them.

Every key is an int16 *record type* followed by that type's key struct; every value is an int16 value version
followed by the value struct at that version; a missing value is a tombstone. The record types this module knows
(Kafka's numbering, so that lag tools and Kafka's own ``kafka-dump-log --offsets-decoder`` read our topic):

- 0 and 1: an offset commit, key (group, topic, partition). Type 0 is the legacy name of the same layout;
  we write 1, as Kafka 3.x+ does, and read both.
- 2: classic group metadata, key (group).
- 3 and up: the KIP-848 ``consumer`` group records (and later share/streams ones). They are not known yet;
  another module adds them with :func:`register_record_type`. Until then a key of an unknown type decodes to
  :class:`UnknownRecordKey`, which replay skips, so a log written by a newer build still loads.

Values are written at the versions Kafka 4 writes: OffsetCommitValue v3 (v1 when the commit carries an explicit
expire timestamp, from OffsetCommit v2-4's retention time), GroupMetadataValue v3. Both schemas have a
flexible v4 that Kafka does not write yet; we read it.

Values are decoded into small frozen dataclasses (not the compiler's named tuples) so that the coordinator's
state can hold and compare them under ``mypy --strict``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from groupstream.protocol import primitives as P
from groupstream.protocol.compiler import CompiledStruct
from groupstream.protocol.errors import LocalProtocolError, PeerProtocolError
from groupstream.protocol.records.batch import keyed_records
from groupstream.protocol.records.record import Record
from groupstream.protocol.schema import NULL, Array, Field, Struct

__all__ = [
    "GROUP_METADATA_KEY_TYPE",
    "GROUP_METADATA_VALUE_VERSION",
    "LEGACY_OFFSET_COMMIT_KEY_TYPE",
    "OFFSET_COMMIT_KEY_TYPE",
    "OFFSET_COMMIT_VALUE_EXPIRING_VERSION",
    "OFFSET_COMMIT_VALUE_VERSION",
    "CoordinatorRecord",
    "GroupMetadataKey",
    "GroupMetadataValue",
    "MemberMetadata",
    "OffsetCommitKey",
    "OffsetCommitValue",
    "RecordType",
    "UnknownRecordKey",
    "decode_record",
    "encode_record",
    "register_record_type",
]

LEGACY_OFFSET_COMMIT_KEY_TYPE = 0
OFFSET_COMMIT_KEY_TYPE = 1
GROUP_METADATA_KEY_TYPE = 2

OFFSET_COMMIT_VALUE_VERSION = 3
"""What Kafka 4 writes: the highest non-flexible version (leader epoch, no expire timestamp)."""
OFFSET_COMMIT_VALUE_EXPIRING_VERSION = 1
"""The only version with an expire timestamp; Kafka writes it when a commit asked for its own retention."""
GROUP_METADATA_VALUE_VERSION = 3


# --- the decoded forms -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CoordinatorRecord:
    """One `__consumer_offsets` record: a decoded key and value (None is a tombstone).

    ``key_version``/``value_version`` are Kafka's record-type versions that prefix the encoded key and value.
    It lives here, in the codec layer, so that the codec need not import the coordinator above it;
    ``groupstream.coordinator.result`` re-exports it as part of the handler contract.
    """

    key_version: int
    key: Any
    value_version: int
    value: Any | None


@dataclass(frozen=True, slots=True)
class OffsetCommitKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class OffsetCommitValue:
    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp: int = -1
    expire_timestamp: int = -1


@dataclass(frozen=True, slots=True)
class GroupMetadataKey:
    group: str


@dataclass(frozen=True, slots=True)
class MemberMetadata:
    """One member as persisted: ``subscription`` is its metadata for the group's selected protocol."""

    member_id: str
    client_id: str
    client_host: str
    session_timeout: int
    subscription: bytes
    assignment: bytes
    rebalance_timeout: int = -1
    group_instance_id: str | None = None


@dataclass(frozen=True, slots=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int = -1
    members: tuple[MemberMetadata, ...] = ()


@dataclass(frozen=True, slots=True)
class UnknownRecordKey:
    """The key of a record type this build does not know (written by a newer broker); replay skips it."""

    record_type: int
    raw: bytes


# --- schemas -----------------------------------------------------------------------------------------------

_OFFSET_COMMIT_KEY = CompiledStruct(
    "OffsetCommitKey",
    Struct(
        "OffsetCommitKey",
        Field("group", "string"),
        Field("topic", "string"),
        Field("partition", "int32"),
    ),
    valid="0",
)

_GROUP_METADATA_KEY = CompiledStruct(
    "GroupMetadataKey",
    Struct("GroupMetadataKey", Field("group", "string")),
    valid="0",
)

_OFFSET_COMMIT_VALUE = CompiledStruct(
    "OffsetCommitValue",
    Struct(
        "OffsetCommitValue",
        Field("offset", "int64"),
        Field("leader_epoch", "int32", versions="3+", default=-1, ignorable=True),
        Field("metadata", "string"),
        Field("commit_timestamp", "int64"),
        Field("expire_timestamp", "int64", versions="1", default=-1, ignorable=True),
    ),
    valid="0-4",
    flexible="4+",
)

_GROUP_METADATA_VALUE = CompiledStruct(
    "GroupMetadataValue",
    Struct(
        "GroupMetadataValue",
        Field("protocol_type", "string"),
        Field("generation", "int32"),
        Field("protocol", "string", nullable="0+"),
        Field("leader", "string", nullable="0+"),
        Field("current_state_timestamp", "int64", versions="2+", default=-1, ignorable=True),
        Field(
            "members",
            Array(
                Struct(
                    "MemberMetadata",
                    Field("member_id", "string"),
                    Field(
                        "group_instance_id",
                        "string",
                        versions="3+",
                        nullable="3+",
                        default=NULL,
                        ignorable=True,
                    ),
                    Field("client_id", "string"),
                    Field("client_host", "string"),
                    # v0 has none: Kafka reads its absence as "the session timeout" (we decode it as -1).
                    Field("rebalance_timeout", "int32", versions="1+", default=-1, ignorable=True),
                    Field("session_timeout", "int32"),
                    Field("subscription", "bytes"),
                    Field("assignment", "bytes"),
                )
            ),
        ),
    ),
    valid="0-4",
    flexible="4+",
)


# --- conversions between the dataclasses and the compiled structs ------------------------------------------


def _offset_key_to_wire(key: Any) -> Any:
    k: OffsetCommitKey = key
    return _OFFSET_COMMIT_KEY.Type(group=k.group, topic=k.topic, partition=k.partition)


def _offset_key_from_wire(msg: Any) -> Any:
    return OffsetCommitKey(str(msg.group), str(msg.topic), int(msg.partition))


def _offset_value_to_wire(value: Any) -> Any:
    v: OffsetCommitValue = value
    return _OFFSET_COMMIT_VALUE.Type(
        offset=v.offset,
        leader_epoch=v.leader_epoch,
        metadata=v.metadata,
        commit_timestamp=v.commit_timestamp,
        expire_timestamp=v.expire_timestamp,
    )


def _offset_value_from_wire(msg: Any) -> Any:
    return OffsetCommitValue(
        offset=int(msg.offset),
        leader_epoch=int(msg.leader_epoch),
        metadata=str(msg.metadata),
        commit_timestamp=int(msg.commit_timestamp),
        expire_timestamp=int(msg.expire_timestamp),
    )


def _group_key_to_wire(key: Any) -> Any:
    k: GroupMetadataKey = key
    return _GROUP_METADATA_KEY.Type(group=k.group)


def _group_key_from_wire(msg: Any) -> Any:
    return GroupMetadataKey(str(msg.group))


def _group_value_to_wire(value: Any) -> Any:
    v: GroupMetadataValue = value
    T = _GROUP_METADATA_VALUE.Type
    members = [
        T.MemberMetadata(
            member_id=m.member_id,
            group_instance_id=m.group_instance_id,
            client_id=m.client_id,
            client_host=m.client_host,
            rebalance_timeout=m.rebalance_timeout,
            session_timeout=m.session_timeout,
            subscription=m.subscription,
            assignment=m.assignment,
        )
        for m in v.members
    ]
    return T(
        protocol_type=v.protocol_type,
        generation=v.generation,
        protocol=v.protocol,
        leader=v.leader,
        current_state_timestamp=v.current_state_timestamp,
        members=members,
    )


def _group_value_from_wire(msg: Any) -> Any:
    members = tuple(
        MemberMetadata(
            member_id=str(m.member_id),
            group_instance_id=m.group_instance_id,
            client_id=str(m.client_id),
            client_host=str(m.client_host),
            rebalance_timeout=int(m.rebalance_timeout),
            session_timeout=int(m.session_timeout),
            subscription=bytes(m.subscription),
            assignment=bytes(m.assignment),
        )
        for m in msg.members
    )
    return GroupMetadataValue(
        protocol_type=str(msg.protocol_type),
        generation=int(msg.generation),
        protocol=msg.protocol,
        leader=msg.leader,
        current_state_timestamp=int(msg.current_state_timestamp),
        members=members,
    )


# --- the registry of record types --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RecordType:
    """How one record type's key and value go to and from bytes (after their int16 prefixes)."""

    name: str
    key: CompiledStruct
    value: CompiledStruct
    key_to_wire: Callable[[Any], Any]
    key_from_wire: Callable[[Any], Any]
    value_to_wire: Callable[[Any], Any]
    value_from_wire: Callable[[Any], Any]


_OFFSET_COMMIT = RecordType(
    "OffsetCommit",
    _OFFSET_COMMIT_KEY,
    _OFFSET_COMMIT_VALUE,
    _offset_key_to_wire,
    _offset_key_from_wire,
    _offset_value_to_wire,
    _offset_value_from_wire,
)
_GROUP_METADATA = RecordType(
    "GroupMetadata",
    _GROUP_METADATA_KEY,
    _GROUP_METADATA_VALUE,
    _group_key_to_wire,
    _group_key_from_wire,
    _group_value_to_wire,
    _group_value_from_wire,
)

_REGISTRY: dict[int, RecordType] = {
    LEGACY_OFFSET_COMMIT_KEY_TYPE: _OFFSET_COMMIT,
    OFFSET_COMMIT_KEY_TYPE: _OFFSET_COMMIT,
    GROUP_METADATA_KEY_TYPE: _GROUP_METADATA,
}

# Kafka's coordinator keys are all at struct version 0; the record type lives in the int16 prefix.
_KEY_STRUCT_VERSION = 0


def register_record_type(record_type: int, fmt: RecordType) -> None:
    """Teach the codec a new record type (KIP-848 records use 3 and up); a type is registered once."""
    if record_type in _REGISTRY:
        raise ValueError(f"record type {record_type} is already registered as {_REGISTRY[record_type].name}")
    _REGISTRY[record_type] = fmt


def record_type_name(record_type: int) -> str | None:
    fmt = _REGISTRY.get(record_type)
    return None if fmt is None else fmt.name


_KEY_BYTES: dict[tuple[int, Any], bytes] = {}
"""Encoded keys by (record type, key): a coordinator writes the same few keys over and over (a member's
metadata, target and current assignment at every rebalance), and encoding one costs more than looking it up.
A memo of a pure function, not state; emptied when full."""
_KEY_BYTES_MAX = 8192


def _encode_key(record_type: int, fmt: RecordType, key: Any) -> bytes:
    memo = (record_type, key)
    try:
        found = _KEY_BYTES.get(memo)
    except TypeError:  # an unhashable key object: encoded each time
        return P.I16.pack(record_type) + fmt.key.encode(fmt.key_to_wire(key), _KEY_STRUCT_VERSION)
    if found is None:
        found = P.I16.pack(record_type) + fmt.key.encode(fmt.key_to_wire(key), _KEY_STRUCT_VERSION)
        if len(_KEY_BYTES) >= _KEY_BYTES_MAX:
            _KEY_BYTES.clear()
        _KEY_BYTES[memo] = found
    return found


def encode_record(record: CoordinatorRecord) -> tuple[bytes, bytes | None]:
    """The key and value bytes of ``record``, each prefixed by its int16 version; a tombstone has no value."""
    fmt = _REGISTRY.get(record.key_version)
    if fmt is None:
        raise LocalProtocolError(f"cannot encode a record of unknown type {record.key_version}")
    key = _encode_key(record.key_version, fmt, record.key)
    if record.value is None:
        return key, None
    value = P.I16.pack(record.value_version) + fmt.value.encode(
        fmt.value_to_wire(record.value), record.value_version
    )
    return key, value


def _prefix(buf: bytes | memoryview, what: str) -> int:
    if len(buf) < 2:
        raise PeerProtocolError(f"{what} of {len(buf)} bytes has no version prefix")
    (version,) = P.I16.unpack_from(buf, 0)
    return int(version)


def decode_record(key: bytes | memoryview, value: bytes | memoryview | None) -> CoordinatorRecord:
    """Decode one `__consumer_offsets` record.

    A key of an unknown record type is not an error: it decodes to :class:`UnknownRecordKey` with the value
    left as raw bytes, so that loading skips records a newer broker wrote. A known type whose bytes do not
    parse (or whose value version is unknown) raises `PeerProtocolError`: that is corruption, not news.
    """
    record_type = _prefix(key, "record key")
    fmt = _REGISTRY.get(record_type)
    if fmt is None:
        value_version = -1 if value is None or len(value) < 2 else _prefix(value, "record value")
        return CoordinatorRecord(
            record_type,
            UnknownRecordKey(record_type, bytes(key)),
            value_version,
            None if value is None else bytes(value),
        )
    key_msg, _ = fmt.key.decode(key, _KEY_STRUCT_VERSION, 2)
    decoded_key = fmt.key_from_wire(key_msg)
    if value is None:
        return CoordinatorRecord(record_type, decoded_key, -1, None)
    value_version = _prefix(value, "record value")
    value_msg, _ = fmt.value.decode(value, value_version, 2)
    return CoordinatorRecord(record_type, decoded_key, value_version, fmt.value_from_wire(value_msg))


def coordinator_records(data: bytes | memoryview) -> Iterator[tuple[Record, CoordinatorRecord | PeerProtocolError]]:
    """The keyed records of a read of a ``__consumer_offsets`` partition, each decoded or with the error that
    says why not (`keyed_records`)."""
    return keyed_records(data, decode_record)
