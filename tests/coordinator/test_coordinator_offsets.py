"""OffsetCommit validation, OffsetFetch at every version, OffsetDelete and offsets retention."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from coordinator_harness import GROUP, Harness, StaticTopics, assignment

from groupstream.coordinator.classic_group import GroupState
from groupstream.coordinator.config import GroupCoordinatorConfig
from groupstream.coordinator.offsets import OffsetAndMetadata
from groupstream.protocol.error_codes import ErrorCode
from groupstream.protocol.group_records import OffsetCommitKey
from groupstream.protocol.messages import by_name

E = ErrorCode
S = GroupState


def test_a_simple_consumer_commits_to_a_group_nobody_joined() -> None:
    h = Harness()
    assert h.commit({("t", 0): 10, ("t", 1): 11}, metadata="m") == {("t", 0): E.NONE, ("t", 1): E.NONE}
    assert h.fetch({"t": [0, 1, 2]}) == {("t", 0): (10, "m"), ("t", 1): (11, "m"), ("t", 2): (-1, "")}
    group = h.group()
    assert group.state is S.EMPTY and group.protocol_type is None and group.in_log
    (listed,) = h.list_groups()
    assert (listed.group_id, listed.protocol_type, listed.group_state) == (GROUP, "", "Empty")


def test_commits_from_members_are_checked_against_generation_and_membership() -> None:
    h = Harness()
    (a, _b), generation = h.form_group(2)
    ok = {("t", 0): E.NONE}
    assert h.commit({("t", 0): 1}, generation=generation, member_id=a) == ok
    assert h.commit({("t", 0): 2}, generation=generation + 1, member_id=a) == {("t", 0): E.ILLEGAL_GENERATION}
    assert h.commit({("t", 0): 3}, generation=generation, member_id="ghost") == {
        ("t", 0): E.UNKNOWN_MEMBER_ID
    }
    # A simple commit is only for groups without members.
    assert h.commit({("t", 0): 4}) == {("t", 0): E.UNKNOWN_MEMBER_ID}
    assert h.fetch({"t": [0]}) == {("t", 0): (1, "")}


def test_commits_during_a_rebalance() -> None:
    h = Harness()
    (a, b), generation = h.form_group(2)
    ta = h.join(a)  # PreparingRebalance: the old generation may still commit what it processed
    assert h.commit({("t", 0): 5}, generation=generation, member_id=b) == {("t", 0): E.NONE}
    h.join(b)
    new_generation = h.answer(ta).generation_id
    assert h.state() is S.COMPLETING_REBALANCE
    # CompletingRebalance: the member knows the new generation but has no assignment yet.
    assert h.commit({("t", 0): 6}, generation=new_generation, member_id=b) == {
        ("t", 0): E.REBALANCE_IN_PROGRESS
    }
    assert h.commit({("t", 0): 6}, generation=generation, member_id=b) == {("t", 0): E.ILLEGAL_GENERATION}
    assert h.fetch({"t": [0]}) == {("t", 0): (5, "")}


def test_a_removed_members_late_commit_cannot_move_the_offset_back() -> None:
    # The SIGSTOP case: a member stalls past its session, its partitions move, the new owner commits, then the
    # stalled member wakes up and commits an older position.
    h = Harness()
    (a, b), generation = h.form_group(2, session=10_000)
    h.advance(6_000)
    assert h.heartbeat(a, generation) == E.NONE  # b is stopped
    h.advance(4_000)
    assert b not in h.group().members
    assert h.heartbeat(a, generation) == E.REBALANCE_IN_PROGRESS
    ta = h.join(a)
    new_generation = h.answer(ta).generation_id
    h.sync(a, new_generation, {a: assignment(("t", 0), ("t", 1))})
    assert h.commit({("t", 1): 100}, generation=new_generation, member_id=a) == {("t", 1): E.NONE}
    assert h.commit({("t", 1): 50}, generation=generation, member_id=b) == {("t", 1): E.UNKNOWN_MEMBER_ID}
    assert h.fetch({"t": [1]}) == {("t", 1): (100, "")}


def test_commits_to_a_group_that_does_not_exist() -> None:
    h = Harness()
    assert h.commit({("t", 0): 1}, generation=3, member_id="m", version=8) == {("t", 0): E.ILLEGAL_GENERATION}
    assert h.commit({("t", 0): 1}, generation=3, member_id="m", version=9) == {("t", 0): E.GROUP_ID_NOT_FOUND}
    assert h.commit({("t", 0): 1}, group="") == {("t", 0): E.INVALID_GROUP_ID}
    assert h.shard.group_ids() == []


def test_unknown_topics_and_partitions_fail_alone() -> None:
    h = Harness()
    result = h.commit({("t", 0): 1, ("t", 4): 1, ("t", -1): 1, ("nope", 0): 1, ("u", 1): 2})
    assert result == {
        ("t", 0): E.NONE,
        ("t", 4): E.UNKNOWN_TOPIC_OR_PARTITION,
        ("t", -1): E.UNKNOWN_TOPIC_OR_PARTITION,
        ("nope", 0): E.UNKNOWN_TOPIC_OR_PARTITION,
        ("u", 1): E.NONE,
    }
    # The partition check comes first, as in Kafka's request layer: a bad group does not hide it.
    assert h.commit({("t", 0): 1, ("nope", 0): 1}, group="") == {
        ("t", 0): E.INVALID_GROUP_ID,
        ("nope", 0): E.UNKNOWN_TOPIC_OR_PARTITION,
    }


def test_metadata_longer_than_the_limit_is_refused_per_partition() -> None:
    h = Harness(config=GroupCoordinatorConfig(offset_metadata_max_bytes=5))
    assert h.commit({("t", 0): 1}, metadata="12345") == {("t", 0): E.NONE}
    assert h.commit({("t", 1): 1}, metadata="123456") == {("t", 1): E.OFFSET_METADATA_TOO_LARGE}
    assert h.commit({("t", 2): 1}, metadata=None) == {("t", 2): E.NONE}
    assert h.fetch({"t": [0, 1, 2]}) == {("t", 0): (1, "12345"), ("t", 1): (-1, ""), ("t", 2): (1, "")}


def test_a_commit_keeps_a_members_session_alive() -> None:
    h = Harness()
    (a,), generation = h.form_group(1, session=10_000)
    for _ in range(4):
        h.advance(8_000)
        assert h.commit({("t", 0): h.now}, generation=generation, member_id=a) == {("t", 0): E.NONE}
    assert h.state() is S.STABLE


@pytest.mark.parametrize("version", range(10))
def test_commit_at_every_version_stores_what_the_version_carries(version: int) -> None:
    h = Harness()
    C = by_name("OffsetCommit").Request
    part: dict[str, Any] = {"partition_index": 2, "committed_offset": 77, "committed_metadata": "md"}
    if version >= 6:
        part["committed_leader_epoch"] = 9
    if version == 1:
        part["commit_timestamp"] = 123
    fields: dict[str, Any] = {"group_id": GROUP}
    if 2 <= version <= 4:
        fields["retention_time_ms"] = 60_000
    token = h.send(
        "OffsetCommit",
        version,
        topics=[
            C.OffsetCommitRequestTopic(
                name="t", partitions=[C.OffsetCommitRequestTopic.OffsetCommitRequestPartition(**part)]
            )
        ],
        **fields,
    )
    assert h.answer(token).topics[0].partitions[0].error_code == 0
    stored = h.shard.committed_offset(GROUP, "t", 2)
    assert stored == OffsetAndMetadata(
        77,
        9 if version >= 6 else -1,
        "md",
        123 if version == 1 else h.now,
        h.now + 60_000 if 2 <= version <= 4 else -1,
    )
    # A commit with its own retention is written as value v1, the only version with an expire timestamp.
    (record,) = h.records_since(len(h.log) - 1)
    assert record.key == OffsetCommitKey(GROUP, "t", 2)
    assert record.value_version == (1 if 2 <= version <= 4 else 3)


class TopicsWithIds(StaticTopics):
    """A view that also maps topic ids, as OffsetCommit/OffsetFetch v10 need."""

    def __init__(self, topics: dict[str, int]) -> None:
        super().__init__(topics)
        self.ids = {name: uuid.UUID(int=i + 1) for i, name in enumerate(sorted(topics))}

    def topic_id(self, topic: str) -> uuid.UUID | None:
        return self.ids.get(topic)

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        return next((n for n, i in self.ids.items() if i == topic_id), None)


def test_v10_names_topics_by_id() -> None:
    topics = TopicsWithIds({"t": 4, "u": 2})
    h = Harness(topics=topics)
    C = by_name("OffsetCommit").Request
    P = C.OffsetCommitRequestTopic.OffsetCommitRequestPartition
    token = h.send(
        "OffsetCommit",
        10,
        group_id=GROUP,
        topics=[
            C.OffsetCommitRequestTopic(
                topic_id=topics.ids["t"], partitions=[P(partition_index=1, committed_offset=5)]
            ),
            C.OffsetCommitRequestTopic(
                topic_id=uuid.UUID(int=99), partitions=[P(partition_index=0, committed_offset=5)]
            ),
        ],
    )
    answer = h.answer(token)
    assert [(t.topic_id, t.partitions[0].error_code) for t in answer.topics] == [
        (topics.ids["t"], 0),
        (uuid.UUID(int=99), E.UNKNOWN_TOPIC_ID),
    ]
    F = by_name("OffsetFetch").Request
    token = h.send("OffsetFetch", 10, groups=[F.OffsetFetchRequestGroup(group_id=GROUP, topics=None)])
    (group,) = h.answer(token).groups
    assert [
        (t.topic_id, [(p.partition_index, p.committed_offset) for p in t.partitions]) for t in group.topics
    ] == [(topics.ids["t"], [(1, 5)])]
    # Without a view that knows ids, a v10 commit cannot resolve any topic.
    plain = Harness()
    token = plain.send(
        "OffsetCommit",
        10,
        group_id=GROUP,
        topics=[
            C.OffsetCommitRequestTopic(
                topic_id=topics.ids["t"], partitions=[P(partition_index=1, committed_offset=5)]
            )
        ],
    )
    assert plain.answer(token).topics[0].partitions[0].error_code == E.UNKNOWN_TOPIC_ID


@pytest.mark.parametrize("version", range(10))
def test_fetch_at_every_version(version: int) -> None:
    h = Harness()
    h.commit({("t", 0): 5, ("t", 3): 8, ("u", 1): 9}, metadata="x")
    assert h.fetch({"t": [0, 1], "u": [1]}, version=version) == {
        ("t", 0): (5, "x"),
        ("t", 1): (-1, ""),
        ("u", 1): (9, "x"),
    }
    if version >= 2:  # a null topic list means every committed partition
        assert h.fetch(None, version=version) == {("t", 0): (5, "x"), ("t", 3): (8, "x"), ("u", 1): (9, "x")}
    assert h.fetch({"t": [0]}, group="unknown", version=version) == {("t", 0): (-1, "")}


def test_fetch_v8_answers_several_groups_and_require_stable_has_nothing_to_wait_for() -> None:
    h = Harness()
    h.commit({("t", 0): 1}, group="g1")
    h.commit({("t", 0): 2}, group="g2")
    F = by_name("OffsetFetch").Request
    token = h.send(
        "OffsetFetch",
        8,
        require_stable=True,
        groups=[
            F.OffsetFetchRequestGroup(group_id="g1", topics=None),
            F.OffsetFetchRequestGroup(
                group_id="g2",
                topics=[F.OffsetFetchRequestGroup.OffsetFetchRequestTopics(name="t", partition_indexes=[0])],
            ),
            F.OffsetFetchRequestGroup(group_id="", topics=None),
        ],
    )
    groups = h.answer(token).groups
    assert [
        (g.group_id, g.error_code, [(t.name, [p.committed_offset for p in t.partitions]) for t in g.topics])
        for g in groups
    ] == [
        ("g1", 0, [("t", [1])]),
        ("g2", 0, [("t", [2])]),
        ("", E.INVALID_GROUP_ID, []),
    ]


def test_fetch_before_v2_reports_a_group_error_on_each_partition() -> None:
    h = Harness()
    token = h.send(
        "OffsetFetch",
        1,
        group_id="",
        topics=[by_name("OffsetFetch").Request.OffsetFetchRequestTopic(name="t", partition_indexes=[0])],
    )
    (topic,) = h.answer(token).topics
    assert [p.error_code for p in topic.partitions] == [E.INVALID_GROUP_ID]


# --- OffsetDelete ----------------------------------------------------------------------------------------------


def _offset_delete(
    h: Harness, topics: dict[str, list[int]], group: str = GROUP
) -> tuple[int, dict[tuple[str, int], int]]:
    D = by_name("OffsetDelete").Request
    answer = h.answer(
        h.send(
            "OffsetDelete",
            0,
            group_id=group,
            topics=[
                D.OffsetDeleteRequestTopic(
                    name=t,
                    partitions=[
                        D.OffsetDeleteRequestTopic.OffsetDeleteRequestPartition(partition_index=p) for p in ps
                    ],
                )
                for t, ps in topics.items()
            ],
        )
    )
    return answer.error_code, {
        (t.name, p.partition_index): p.error_code for t in answer.topics for p in t.partitions
    }


def test_offset_delete_refuses_topics_the_group_consumes() -> None:
    h = Harness()
    (a,), generation = h.form_group(1)  # subscribed to "t"
    h.commit({("t", 0): 1, ("u", 0): 2}, generation=generation, member_id=a)
    error, parts = _offset_delete(h, {"t": [0], "u": [0, 1]})
    assert error == 0
    assert parts == {("t", 0): E.GROUP_SUBSCRIBED_TO_TOPIC, ("u", 0): 0, ("u", 1): 0}
    assert h.fetch({"t": [0], "u": [0]}) == {("t", 0): (1, ""), ("u", 0): (-1, "")}


def test_offset_delete_errors_for_the_whole_group() -> None:
    h = Harness()
    assert _offset_delete(h, {"t": [0]}, group="missing") == (E.GROUP_ID_NOT_FOUND, {})
    assert _offset_delete(h, {"t": [0]}, group="")[0] == E.INVALID_GROUP_ID
    (_a,), _ = h.form_group(1, group="conn", protocol_type="connect")
    assert _offset_delete(h, {"t": [0]}, group="conn") == (E.NON_EMPTY_GROUP, {})


def test_offset_delete_on_an_empty_group() -> None:
    h = Harness()
    h.commit({("t", 0): 1})
    mark = len(h.log)
    assert _offset_delete(h, {"t": [0, 1]}) == (0, {("t", 0): 0, ("t", 1): 0})
    assert len(h.records_since(mark)) == 1  # a tombstone only where an offset existed
    assert h.fetch({"t": [0]}) == {("t", 0): (-1, "")}


# --- retention -------------------------------------------------------------------------------------------------

RETENTION = GroupCoordinatorConfig(offsets_retention_ms=60_000, offsets_retention_check_interval_ms=10_000)


def test_offsets_of_an_empty_group_expire_retention_after_it_became_empty() -> None:
    h = Harness(config=RETENTION)
    (a,), generation = h.form_group(1, session=10_000)
    h.commit({("t", 0): 1}, generation=generation, member_id=a)
    for _ in range(24):  # two minutes Stable: longer than the retention, which does not count yet
        h.advance(5_000)
        assert h.heartbeat(a, generation) == E.NONE
    assert h.fetch({"t": [0]}) == {("t", 0): (1, "")}
    h.leave((a, None))
    emptied = h.now
    h.advance(59_000)
    assert h.fetch({"t": [0]}) == {("t", 0): (1, "")}
    h.advance(10_000)
    assert h.now - emptied >= 60_000
    assert h.fetch({"t": [0]}) == {("t", 0): (-1, "")}
    assert h.shard.group(GROUP) is None  # no offsets left: the empty group is deleted too
    h.restart()
    assert h.shard.group_ids() == []


def test_a_simple_groups_offsets_expire_from_their_commit() -> None:
    h = Harness(config=RETENTION)
    h.commit({("t", 0): 1})
    h.advance(30_000)
    h.commit({("t", 1): 2})
    h.advance(35_000)  # t-0 is 65 s old, t-1 35 s
    assert h.fetch({"t": [0, 1]}) == {("t", 0): (-1, ""), ("t", 1): (2, "")}
    assert h.shard.group(GROUP) is not None
    h.advance(30_000)
    assert h.shard.group(GROUP) is None


def test_a_stable_group_keeps_offsets_of_topics_it_consumes() -> None:
    h = Harness(config=RETENTION)
    (a,), generation = h.form_group(1, session=30_000)
    h.commit({("t", 0): 1, ("u", 0): 2}, generation=generation, member_id=a)
    for _ in range(8):
        h.advance(10_000)
        assert h.heartbeat(a, generation) == E.NONE
    assert h.fetch({"t": [0], "u": [0]}) == {("t", 0): (1, ""), ("u", 0): (-1, "")}
    assert h.state() is S.STABLE


def test_a_commits_own_retention_wins() -> None:
    h = Harness(config=GroupCoordinatorConfig(offsets_retention_check_interval_ms=1_000))
    h.commit({("t", 0): 1}, version=2, retention_ms=5_000)
    h.commit({("t", 1): 1}, version=2)
    h.advance(5_000)
    assert h.fetch({"t": [0, 1]}) == {("t", 0): (-1, ""), ("t", 1): (1, "")}
