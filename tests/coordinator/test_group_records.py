"""`__consumer_offsets` key and value formats: byte layouts as Kafka defines them, and round trips of every version."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from groupstream.coordinator.offsets import OffsetAndMetadata
from groupstream.coordinator.records import (
    group_metadata_record,
    group_tombstone,
    offset_commit_record,
    offset_tombstone,
)
from groupstream.coordinator.result import CoordinatorRecord as ReExported
from groupstream.protocol import group_records
from groupstream.protocol.errors import LocalProtocolError, PeerProtocolError
from groupstream.protocol.group_records import (
    CoordinatorRecord,
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    RecordType,
    UnknownRecordKey,
    decode_record,
    encode_record,
    record_type_name,
    register_record_type,
)


def _str(s: str) -> bytes:
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def _nullable(s: str | None) -> bytes:
    return struct.pack(">h", -1) if s is None else _str(s)


def _bytes(b: bytes) -> bytes:
    return struct.pack(">i", len(b)) + b


def test_coordinator_record_is_the_one_the_result_contract_exports() -> None:
    assert ReExported is CoordinatorRecord


def test_offset_commit_record_bytes_are_kafkas_layout() -> None:
    # Key: record type 1, then group, topic, partition. Value v3: offset, leader epoch, metadata, commit time.
    record = offset_commit_record("grp", "topic", 7, OffsetAndMetadata(42, 5, "meta", 1_700_000_000_000))
    key, value = encode_record(record)
    assert key == struct.pack(">h", 1) + _str("grp") + _str("topic") + struct.pack(">i", 7)
    assert value == struct.pack(">h", 3) + struct.pack(">qi", 42, 5) + _str("meta") + struct.pack(
        ">q", 1_700_000_000_000
    )


def test_offset_commit_with_its_own_retention_is_written_as_value_v1() -> None:
    record = offset_commit_record("grp", "t", 0, OffsetAndMetadata(1, -1, "", 100, 900))
    assert record.value_version == 1
    _, value = encode_record(record)
    # v1 has no leader epoch and carries the expire timestamp after the commit timestamp.
    assert value == struct.pack(">hq", 1, 1) + _str("") + struct.pack(">qq", 100, 900)


def test_group_metadata_record_bytes_are_kafkas_layout() -> None:
    member = MemberMetadata(
        member_id="m-1",
        group_instance_id="i-1",
        client_id="cid",
        client_host="/127.0.0.1",
        rebalance_timeout=30_000,
        session_timeout=10_000,
        subscription=b"\x00\x01sub",
        assignment=b"\x00\x00asg",
    )
    value = GroupMetadataValue("consumer", 3, "range", "m-1", 123, (member,))
    key, raw = encode_record(group_metadata_record("grp", value))
    assert key == struct.pack(">h", 2) + _str("grp")
    expected_member = (
        _str("m-1")
        + _nullable("i-1")
        + _str("cid")
        + _str("/127.0.0.1")
        + struct.pack(">ii", 30_000, 10_000)
        + _bytes(b"\x00\x01sub")
        + _bytes(b"\x00\x00asg")
    )
    assert raw == (
        struct.pack(">h", 3)
        + _str("consumer")
        + struct.pack(">i", 3)
        + _nullable("range")
        + _nullable("m-1")
        + struct.pack(">q", 123)
        + struct.pack(">i", 1)
        + expected_member
    )


def test_empty_group_metadata_has_null_protocol_and_leader() -> None:
    _, raw = encode_record(
        group_metadata_record("grp", GroupMetadataValue("consumer", 4, None, None, 55, ()))
    )
    assert raw == struct.pack(">h", 3) + _str("consumer") + struct.pack(">i", 4) + _nullable(
        None
    ) * 2 + struct.pack(">qi", 55, 0)


def test_tombstones_have_no_value_and_decode_back() -> None:
    for record in (group_tombstone("grp"), offset_tombstone("grp", "t", 3)):
        key, value = encode_record(record)
        assert value is None
        assert decode_record(key, None) == record


def test_legacy_offset_key_type_0_reads_as_an_offset_commit() -> None:
    key = struct.pack(">h", 0) + _str("grp") + _str("t") + struct.pack(">i", 1)
    value = struct.pack(">hq", 0, 9) + _str("m") + struct.pack(">q", 77)
    record = decode_record(key, value)
    assert record.key_version == 0
    assert record.key == OffsetCommitKey("grp", "t", 1)
    assert record.value == OffsetCommitValue(9, -1, "m", 77, -1)


def test_unknown_record_types_decode_to_a_skippable_marker() -> None:
    # Type 11 is a share group's record (KIP-932), which this build does not know: a newer broker may write it.
    key = struct.pack(">h", 11) + _str("grp")
    value = struct.pack(">h", 0) + struct.pack(">i", 5) + b"\x00"
    record = decode_record(key, value)
    assert record.key == UnknownRecordKey(11, key)
    assert record.value == value and record.value_version == 0
    assert decode_record(key, None).value is None
    with pytest.raises(LocalProtocolError):
        encode_record(record)


def test_known_type_with_bad_bytes_or_unknown_value_version_is_an_error() -> None:
    key = struct.pack(">h", 2) + _str("grp")
    with pytest.raises(PeerProtocolError):
        decode_record(key, struct.pack(">h", 9) + b"\x00" * 20)
    with pytest.raises(PeerProtocolError):
        decode_record(key[:3], None)
    with pytest.raises(PeerProtocolError):
        decode_record(b"\x00", None)


def test_a_new_record_type_can_be_registered_once() -> None:
    fmt = RecordType("Probe", *([None] * 6))  # type: ignore[arg-type]
    register_record_type(99, fmt)
    try:
        assert record_type_name(99) == "Probe"
        with pytest.raises(ValueError):
            register_record_type(99, fmt)
        with pytest.raises(ValueError):
            register_record_type(2, fmt)
    finally:
        group_records._REGISTRY.pop(99)
    assert record_type_name(99) is None


# --- round trips of every version ---------------------------------------------------------------------------

_text = st.text(max_size=10)
_i32 = st.integers(-(2**31), 2**31 - 1)
_i64 = st.integers(-(2**63), 2**63 - 1)


@st.composite
def _offset_value(draw: st.DrawFn, version: int) -> OffsetCommitValue:
    return OffsetCommitValue(
        offset=draw(_i64),
        leader_epoch=draw(_i32) if version >= 3 else -1,
        metadata=draw(_text),
        commit_timestamp=draw(_i64),
        expire_timestamp=draw(_i64) if version == 1 else -1,
    )


@st.composite
def _group_value(draw: st.DrawFn, version: int) -> GroupMetadataValue:
    members = draw(
        st.lists(
            st.builds(
                MemberMetadata,
                member_id=_text,
                client_id=_text,
                client_host=_text,
                session_timeout=_i32,
                subscription=st.binary(max_size=12),
                assignment=st.binary(max_size=12),
                rebalance_timeout=_i32 if version >= 1 else st.just(-1),
                group_instance_id=st.none() | _text if version >= 3 else st.none(),
            ),
            max_size=3,
        )
    )
    return GroupMetadataValue(
        protocol_type=draw(_text),
        generation=draw(_i32),
        protocol=draw(st.none() | _text),
        leader=draw(st.none() | _text),
        current_state_timestamp=draw(_i64) if version >= 2 else -1,
        members=tuple(members),
    )


@pytest.mark.parametrize("version", range(5))
@pytest.mark.parametrize("key_type", [0, 1])
def test_offset_commit_round_trips_at_every_version(key_type: int, version: int) -> None:
    @settings(max_examples=40, deadline=None)
    @given(key=st.builds(OffsetCommitKey, _text, _text, _i32), value=_offset_value(version))
    def check(key: OffsetCommitKey, value: OffsetCommitValue) -> None:
        record = CoordinatorRecord(key_type, key, version, value)
        raw_key, raw_value = encode_record(record)
        assert decode_record(raw_key, raw_value) == record
        assert decode_record(memoryview(raw_key), memoryview(raw_value or b"")) == record

    check()


@pytest.mark.parametrize("version", range(5))
def test_group_metadata_round_trips_at_every_version(version: int) -> None:
    @settings(max_examples=40, deadline=None)
    @given(group=_text, value=_group_value(version))
    def check(group: str, value: GroupMetadataValue) -> None:
        record = CoordinatorRecord(2, GroupMetadataKey(group), version, value)
        raw_key, raw_value = encode_record(record)
        assert decode_record(raw_key, raw_value) == record

    check()


def test_fields_a_version_lacks_are_dropped_not_an_error() -> None:
    # Kafka marks them ignorable: writing v0 simply leaves out leader epoch and instance ids.
    value = OffsetCommitValue(1, leader_epoch=4, metadata="", commit_timestamp=2)
    key, raw = encode_record(CoordinatorRecord(1, OffsetCommitKey("g", "t", 0), 0, value))
    assert decode_record(key, raw).value == OffsetCommitValue(1, -1, "", 2, -1)
