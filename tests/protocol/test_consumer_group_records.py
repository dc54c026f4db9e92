"""KIP-848 `__consumer_offsets` records (types 3-8, 16): Kafka's byte layouts, and round trips."""

from __future__ import annotations

import uuid

from hypothesis import given
from hypothesis import strategies as st

from groupstream.protocol import consumer_group_records as c
from groupstream.protocol.group_records import CoordinatorRecord, decode_record, encode_record

TID = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")


def test_group_metadata_bytes_are_kafkas() -> None:
    key, value = encode_record(CoordinatorRecord(3, c.ConsumerGroupKey("g"), 0, c.GroupMetadataValue848(5)))
    assert key == b"\x00\x03" + b"\x00\x01g"  # int16 type, then a non-flexible string
    # int16 version 0, int32 epoch, no tagged fields (defaults are not written)
    assert value == b"\x00\x00" + b"\x00\x00\x00\x05" + b"\x00"
    _, tagged = encode_record(CoordinatorRecord(3, c.ConsumerGroupKey("g"), 0, c.GroupMetadataValue848(5, 7)))
    assert tagged == b"\x00\x00\x00\x00\x00\x05" + b"\x01" + b"\x00\x08" + (7).to_bytes(8, "big")


def test_current_member_assignment_bytes_are_kafkas() -> None:
    record = CoordinatorRecord(
        8, c.ConsumerMemberKey("g", "m"), 0,
        c.CurrentMemberAssignmentValue(3, 2, 1, (c.TopicPartitions(TID, (0, 4)),), ()),
    )  # fmt: skip
    key, value = encode_record(record)
    assert key == b"\x00\x08" + b"\x00\x01g" + b"\x00\x01m"
    assert value == (
        b"\x00\x00" + b"\x00\x00\x00\x03" + b"\x00\x00\x00\x02" + b"\x01"
        + b"\x02" + TID.bytes + b"\x03" + b"\x00\x00\x00\x00" + b"\x00\x00\x00\x04" + b"\x00"  # one topic
        + b"\x01"  # no partitions pending revocation
        + b"\x00"
    )  # fmt: skip
    assert decode_record(key, value) == record


def test_a_tombstone_decodes_to_its_key() -> None:
    record = CoordinatorRecord(5, c.ConsumerMemberKey("g", "m"), -1, None)
    assert encode_record(record)[1] is None
    assert decode_record(*encode_record(record)) == record


names = st.text(min_size=1, max_size=8)
partitions = st.builds(
    c.TopicPartitions, st.uuids(), st.lists(st.integers(0, 1000), max_size=4).map(tuple),
    st.none() | st.lists(st.integers(-1, 50), max_size=4).map(tuple),
)  # fmt: skip
members = st.builds(
    c.MemberMetadataValue, st.none() | names, st.none() | names, names, names,
    st.lists(names, max_size=3).map(tuple), st.none() | names, st.integers(-1, 2**31 - 1), st.none() | names,
    st.none() | st.lists(st.builds(c.ClassicProtocol, names, st.binary(max_size=8)), max_size=2).map(tuple),
)  # fmt: skip
records = st.one_of(
    st.builds(lambda g, e, h: CoordinatorRecord(3, c.ConsumerGroupKey(g), 0, c.GroupMetadataValue848(e, h)),
              names, st.integers(0, 2**31 - 1), st.integers(-(2**63), 2**63 - 1)),
    st.builds(lambda g, m, v: CoordinatorRecord(5, c.ConsumerMemberKey(g, m), 0, v), names, names, members),
    st.builds(lambda g, m, ps: CoordinatorRecord(7, c.ConsumerMemberKey(g, m), 0, c.TargetAssignmentMemberValue(
        tuple(c.TopicPartitions(p.topic_id, p.partitions) for p in ps))), names, names, st.lists(partitions, max_size=3)),
    st.builds(lambda g, m, e, a, r: CoordinatorRecord(8, c.ConsumerMemberKey(g, m), 0, c.CurrentMemberAssignmentValue(
        e, e - 1, 0, tuple(a), tuple(r))), names, names, st.integers(1, 1000), st.lists(partitions, max_size=3),
        st.lists(partitions, max_size=2)),
    st.builds(lambda g, x, t: CoordinatorRecord(16, c.RegexKey(g, x), 0, c.RegexValue(tuple(t), 1, 2)), names, names,
              st.lists(names, max_size=3)),
)  # fmt: skip


@given(records)
def test_every_record_round_trips(record: CoordinatorRecord) -> None:
    assert decode_record(*encode_record(record)) == record
