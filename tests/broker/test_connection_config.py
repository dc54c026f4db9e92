"""Connection-limit properties under Kafka's names: parsed, validated with errors that name the property, and
resolved into the limits the listener enforces (the derived max.connections rule included)."""

from __future__ import annotations

from pathlib import Path

import pytest

from groupstream.broker.config import BrokerConfig, ConfigError
from groupstream.broker.descriptors import (
    RESERVE_MIN,
    UNLIMITED_CONNECTIONS,
    default_max_connections,
    descriptor_reserve,
)
from groupstream.broker.listener import ConnectionLimits


def config(**props: str) -> BrokerConfig:
    c = BrokerConfig(data_dir=Path("unused"))
    c.apply(props)
    return c


def test_defaults() -> None:
    c = config()
    assert c.max_connections is None  # derived at start
    assert c.max_connections_per_ip is None  # unlimited
    assert c.connections_max_idle_ms == 600_000  # Kafka's default
    assert c.partial_request_bytes_limit == 2 * c.max_frame


def test_values_are_applied() -> None:
    c = config(**{"max.connections": "100", "max.connections.per.ip": "7", "connections.max.idle.ms": "1500",
                  "queued.max.request.bytes": "1048576"})  # fmt: skip
    assert (c.max_connections, c.max_connections_per_ip, c.connections_max_idle_ms) == (100, 7, 1500)
    assert c.partial_request_bytes_limit == 1 << 20


def test_queued_max_request_bytes_minus_one_is_unbounded_and_the_default_follows_the_frame_size() -> None:
    assert config(**{"queued.max.request.bytes": "-1"}).partial_request_bytes_limit is None
    assert config(**{"socket.request.max.bytes": "2048"}).partial_request_bytes_limit == 4096


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("max.connections", "0", "max.connections must be at least 1, got 0"),
        ("max.connections", "many", "max.connections must be an integer, got 'many'"),
        ("max.connections.per.ip", "0", "max.connections.per.ip must be at least 1, got 0"),
        ("max.connections.per.ip", "1.5", "max.connections.per.ip must be an integer, got '1.5'"),
        ("connections.max.idle.ms", "0", "connections.max.idle.ms must be at least 1, got 0"),
        ("connections.max.idle.ms", "", "connections.max.idle.ms must be an integer, got ''"),
        ("queued.max.request.bytes", "0", "queued.max.request.bytes must be -1 (unbounded) or at least 1, got 0"),
        ("queued.max.request.bytes", "-2", "queued.max.request.bytes must be -1 (unbounded) or at least 1, got -2"),
        ("queued.max.request.bytes", "1MB", "queued.max.request.bytes must be an integer, got '1MB'"),
    ],
)
def test_bad_values_name_the_property(name: str, value: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        config(**{name: value})
    assert str(info.value) == message


def test_unknown_property_lists_the_connection_properties() -> None:
    with pytest.raises(ConfigError) as info:
        config(**{"max.connection": "5"})
    for name in ("max.connections", "max.connections.per.ip", "connections.max.idle.ms", "queued.max.request.bytes"):
        assert name in str(info.value)


def test_default_max_connections_leaves_the_reserve_for_the_logs() -> None:
    # limit 1024 with 100 descriptors open once the logs are loaded: an eighth (128) stays for the logs
    assert descriptor_reserve(1024) == 128
    assert default_max_connections(1024, 100) == 1024 - 100 - 128
    # a low limit still keeps RESERVE_MIN, and never goes below one connection
    assert descriptor_reserve(256) == RESERVE_MIN
    assert default_max_connections(256, 100) == 256 - 100 - RESERVE_MIN
    assert default_max_connections(128, 100) == 1
    # an unlimited descriptor limit: Kafka's default, Int.MaxValue
    assert default_max_connections(None, 100) == UNLIMITED_CONNECTIONS


def test_limits_resolve_defaults_and_keep_explicit_values() -> None:
    derived = ConnectionLimits.resolve(config(), descriptor_limit=1024, in_use=100)
    assert derived.max_connections == default_max_connections(1024, 100)
    assert derived.max_connections_derived
    assert derived.descriptor_reserve == 128
    assert "derived from the descriptor limit 1024" in derived.describe()
    explicit = ConnectionLimits.resolve(config(**{"max.connections": "50000"}), descriptor_limit=1024, in_use=100)
    assert explicit.max_connections == 50000 and not explicit.max_connections_derived
    # the descriptor reserve still applies to an explicit max.connections (the listener stops at it)
    assert explicit.descriptor_reserve == 128
    unlimited = ConnectionLimits.resolve(config(), descriptor_limit=None, in_use=None)
    assert unlimited.descriptor_reserve == 0 and unlimited.max_connections == UNLIMITED_CONNECTIONS
