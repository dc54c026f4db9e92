from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from storagekit import make_batch, read_all

from groupstream.storage import (
    Catalog,
    CatalogCorruptError,
    InvalidConfigError,
    InvalidPartitionsError,
    InvalidTopicError,
    LogConfig,
    TopicExistsError,
    UnknownTopicError,
)


def test_topics_persist_across_reopen(tmp_path: Path) -> None:
    cat = Catalog(tmp_path, now_ms=0)
    tid = uuid.UUID("12345678-1234-5678-1234-567812345678")
    a = cat.create_topic("orders", 3, {"retention.ms": "1000", "segment.bytes": "4096"}, topic_id=tid)
    b = cat.create_topic("__consumer_offsets", 2, {"cleanup.policy": "compact"})
    assert a.topic_id == tid and b.topic_id.version == 4
    cat.log("orders", 2).append(make_batch(payload=b"kept"), now_ms=0)
    cat.close()

    again = Catalog(tmp_path, now_ms=0)
    assert [(t.name, t.topic_id, t.partitions, dict(t.configs)) for t in again.topics()] == [
        ("__consumer_offsets", b.topic_id, 2, {"cleanup.policy": "compact"}),
        ("orders", tid, 3, {"retention.ms": "1000", "segment.bytes": "4096"}),
    ]
    assert again.topic_config("orders").segment_bytes == 4096
    assert again.log("orders", 2).config.retention_ms == 1000
    assert next(raw for _, _, raw in read_all(again.log("orders", 2))).endswith(b"kept")
    assert again.topic_by_id(tid) == again.topic("orders")
    assert again.get_topic("missing") is None and again.topic_by_id(uuid.uuid4()) is None
    assert sorted((t, p) for t, p, _ in again.logs()) == [
        ("__consumer_offsets", 0),
        ("__consumer_offsets", 1),
        ("orders", 0),
        ("orders", 1),
        ("orders", 2),
    ]
    doc = json.loads((tmp_path / "catalog.json").read_text())
    assert doc["version"] == 1 and len(doc["topics"]) == 2
    again.close()


def test_defaults_apply_under_overrides(tmp_path: Path) -> None:
    cat = Catalog(tmp_path, LogConfig(segment_bytes=2048, retention_bytes=10), now_ms=0)
    cat.create_topic("t", 1, {"retention.bytes": "20"})
    config = cat.log("t", 0).config
    assert (config.segment_bytes, config.retention_bytes) == (2048, 20)
    cat.close()


@pytest.mark.parametrize(
    "name", ["", ".", "..", "a" * 250, "with space", "slash/name", "ümlaut", "semi;colon"]
)
def test_invalid_topic_names(tmp_path: Path, name: str) -> None:
    cat = Catalog(tmp_path, now_ms=0)
    with pytest.raises(InvalidTopicError):
        cat.create_topic(name, 1)
    assert cat.topics() == []


def test_legal_topic_names(tmp_path: Path) -> None:
    cat = Catalog(tmp_path, now_ms=0)
    for name in ["a" * 249, "A-b_c.9", "...x", "t-1"]:
        cat.create_topic(name, 1)
    cat.create_topic("t", 2)  # "t-1" (topic) and "t" partition 1 share no directory name
    assert (tmp_path / "t-1-0").is_dir() and (tmp_path / "t-1").is_dir()
    cat.close()


def test_errors(tmp_path: Path) -> None:
    cat = Catalog(tmp_path, now_ms=0)
    cat.create_topic("a.b", 1)
    with pytest.raises(TopicExistsError, match=r"a\.b"):
        cat.create_topic("a.b", 1)
    with pytest.raises(InvalidTopicError, match="collides"):
        cat.create_topic("a_b", 1)
    with pytest.raises(InvalidPartitionsError):
        cat.create_topic("z", 0)
    with pytest.raises(InvalidConfigError, match=r"segment\.bytes"):
        cat.create_topic("z", 1, {"segment.bytes": "tiny"})
    with pytest.raises(InvalidConfigError, match=r"no\.such"):
        cat.create_topic("z", 1, {"no.such": "1"})
    with pytest.raises(InvalidTopicError, match="already used"):
        cat.create_topic("z", 1, topic_id=cat.topic("a.b").topic_id)
    with pytest.raises(UnknownTopicError):
        cat.topic("z")
    with pytest.raises(UnknownTopicError):
        cat.delete_topic("z")
    with pytest.raises(UnknownTopicError, match=r"partitions 0\.\.0"):
        cat.log("a.b", 1)
    with pytest.raises(InvalidPartitionsError):
        cat.add_partitions("a.b", 1)
    assert [t.name for t in cat.topics()] == ["a.b"]
    assert not (tmp_path / "z-0").exists()
    cat.validate_new_topic("z", 1)
    assert cat.get_topic("z") is None


def test_add_partitions(tmp_path: Path) -> None:
    cat = Catalog(tmp_path, now_ms=0)
    cat.create_topic("t", 1)
    assert cat.add_partitions("t", 3).partitions == 3
    cat.log("t", 2).append(make_batch(), now_ms=0)
    cat.close()
    again = Catalog(tmp_path, now_ms=0)
    assert again.topic("t").partitions == 3 and again.log("t", 2).log_end_offset == 1


def test_delete_and_recreate(tmp_path: Path) -> None:
    cat = Catalog(tmp_path, now_ms=0)
    old = cat.create_topic("t", 2)
    cat.log("t", 0).append(make_batch(payload=b"old"), now_ms=0)
    assert cat.delete_topic("t") == old
    assert not any(p.name.startswith("t-") for p in tmp_path.iterdir())
    with pytest.raises(UnknownTopicError):
        cat.log("t", 0)
    new = cat.create_topic("t", 1)
    assert new.topic_id != old.topic_id
    assert cat.log("t", 0).log_end_offset == 0
    cat.close()
    assert [t.topic_id for t in Catalog(tmp_path, now_ms=0).topics()] == [new.topic_id]


def test_debris_of_interrupted_operations_is_removed(tmp_path: Path) -> None:
    cat = Catalog(tmp_path, now_ms=0)
    cat.create_topic("t", 1)
    cat.close()
    # A create that crashed before the catalog was written (or a delete after it was), a partition
    # beyond the topic's count, and a directory that is not ours.
    (tmp_path / "ghost-0").mkdir()
    (tmp_path / "ghost-0" / f"{0:020d}.log").write_bytes(b"")
    (tmp_path / "t-5").mkdir()
    (tmp_path / "t-5" / "recovery-point").write_bytes(b"0\n0\n")
    (tmp_path / "photos-1").mkdir()
    (tmp_path / "photos-1" / "cat.jpg").write_bytes(b"meow")
    Catalog(tmp_path, now_ms=0).close()
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == ["photos-1", "t-0"]


def test_corrupt_catalog_is_refused(tmp_path: Path) -> None:
    (tmp_path / "catalog.json").write_text("{not json")
    with pytest.raises(CatalogCorruptError):
        Catalog(tmp_path, now_ms=0)


def test_enforce_retention_over_all_logs(tmp_path: Path) -> None:
    cat = Catalog(tmp_path, now_ms=0)
    cat.create_topic("t", 2, {"segment.bytes": "100", "retention.ms": "10"})
    for p in (0, 1):
        for _ in range(3):
            cat.log("t", p).append(make_batch(payload=b"x" * 30), now_ms=0)
    assert cat.enforce_retention(now_ms=1000) == 4
    assert all(log.log_start_offset == 2 for _, _, log in cat.logs())
    cat.close()


def test_replacing_topic_configs_reaches_open_logs_and_survives_reopen(tmp_path: Path) -> None:
    cat = Catalog(tmp_path, LogConfig(retention_ms=7_000), now_ms=0)
    cat.create_topic("t", 2, {"segment.bytes": "4096"})
    open_log = cat.log("t", 1)

    checked = cat.replace_topic_configs("t", {"retention.ms": "1000"}, validate_only=True)
    assert dict(checked.configs) == {"retention.ms": "1000"}
    assert dict(cat.topic("t").configs) == {"segment.bytes": "4096"} and open_log.config.retention_ms == 7_000

    cat.replace_topic_configs("t", {"retention.ms": "1000"})
    # the override replaces the old set whole: segment.bytes falls back to the default
    assert (open_log.config.retention_ms, open_log.config.segment_bytes) == (1000, LogConfig().segment_bytes)
    with pytest.raises(InvalidConfigError, match=r"retention\.ms"):
        cat.replace_topic_configs("t", {"retention.ms": "soon"})
    with pytest.raises(UnknownTopicError):
        cat.replace_topic_configs("missing", {})
    assert open_log.config.retention_ms == 1000
    cat.close()

    again = Catalog(tmp_path, LogConfig(retention_ms=7_000), now_ms=0)
    assert dict(again.topic("t").configs) == {"retention.ms": "1000"}
    assert again.log("t", 0).config.retention_ms == 1000
    again.close()
