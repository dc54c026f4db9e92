from __future__ import annotations

import dataclasses

import pytest

from groupstream.storage import CleanupPolicy, FlushPolicy, LogConfig, TimestampType
from groupstream.storage.config import PROPERTY_NAMES


def test_defaults_follow_kafka() -> None:
    props = LogConfig().to_properties()
    assert props["segment.bytes"] == str(1 << 30)
    assert props["segment.ms"] == props["retention.ms"] == str(7 * 24 * 3600 * 1000)
    assert props["retention.bytes"] == "-1"
    assert props["index.interval.bytes"] == "4096"
    assert props["cleanup.policy"] == "delete"
    assert props["flush.policy"] == "interval"
    assert props["flush.interval.ms"] == "1000"
    assert props["message.timestamp.type"] == "CreateTime"


def test_every_field_has_a_property_name() -> None:
    props = LogConfig().to_properties()
    assert len(props) == len(dataclasses.fields(LogConfig)) - 1  # all but passthrough
    assert set(props) <= PROPERTY_NAMES


def test_properties_round_trip() -> None:
    config = LogConfig.from_properties(
        {
            "segment.bytes": "2048",
            "retention.ms": "-1",
            "cleanup.policy": "compact,delete",
            "flush.policy": "always",
            "message.timestamp.type": "LogAppendTime",
            "min.insync.replicas": "1",
        }
    )
    assert config.segment_bytes == 2048
    assert config.retention_ms == -1
    assert config.cleanup_policy == (CleanupPolicy.COMPACT, CleanupPolicy.DELETE)
    assert config.flush_policy is FlushPolicy.ALWAYS
    assert config.message_timestamp_type is TimestampType.LOG_APPEND_TIME
    assert config.to_properties()["min.insync.replicas"] == "1"
    assert LogConfig.from_properties(config.to_properties()) == config


def test_overrides_apply_on_top_of_a_base() -> None:
    base = LogConfig(segment_bytes=4096)
    config = LogConfig.from_properties({"retention.bytes": "100"}, base=base)
    assert (config.segment_bytes, config.retention_bytes) == (4096, 100)
    assert not LogConfig.from_properties({"cleanup.policy": "compact"}).deletes


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("segment.bytes", "13"),
        ("segment.bytes", "big"),
        ("segment.bytes", str(2**31)),
        ("segment.ms", "0"),
        ("retention.ms", "-2"),
        ("retention.bytes", "-5"),
        ("segment.index.bytes", "4"),
        ("index.interval.bytes", "-1"),
        ("cleanup.policy", "remove"),
        ("cleanup.policy", ""),
        ("flush.policy", "sometimes"),
        ("flush.interval.ms", "0"),
        ("max.message.bytes", "1.5"),
        ("message.timestamp.type", "WallClock"),
    ],
)
def test_invalid_values_name_the_property_and_value(name: str, value: str) -> None:
    with pytest.raises(ValueError, match=name.replace(".", r"\.")) as info:
        LogConfig.from_properties({name: value})
    assert repr(value) in str(info.value)


def test_unknown_property_is_rejected() -> None:
    with pytest.raises(ValueError, match=r"unknown configuration segment\.size"):
        LogConfig.from_properties({"segment.size": "1"})


def test_direct_construction_is_validated() -> None:
    with pytest.raises(ValueError, match=r"segment\.bytes"):
        LogConfig(segment_bytes=1)
