"""The group coordinator's settings, under Kafka's broker property names and with Kafka's defaults.

Defaults are Kafka 4's, so a client tuned for Kafka behaves the same here; the one worth knowing about is
``group.initial.rebalance.delay.ms`` (3 s): the first rebalance of an empty group waits that long (and again,
up to the rebalance timeout, each time another member arrives) so that a fleet starting together forms one
generation instead of rebalancing once per member.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields

__all__ = ["MIGRATION_POLICIES", "PROPERTY_NAMES", "GroupCoordinatorConfig"]

_MINUTE_MS = 60_000
MIGRATION_POLICIES = ("bidirectional", "upgrade", "downgrade", "disabled")
"""Kafka 4's ``group.consumer.migration.policy`` values: which way a live group may change protocol."""


@dataclass(frozen=True, slots=True)
class GroupCoordinatorConfig:
    min_session_timeout_ms: int = 6_000
    max_session_timeout_ms: int = 1_800_000
    initial_rebalance_delay_ms: int = 3_000
    max_size: int = 2**31 - 1
    # Kafka hard-codes this (5 minutes): how long a new member's parked JoinGroup may wait before the member
    # is dropped, since it cannot heartbeat yet and a client that gave up would otherwise linger forever.
    new_member_join_timeout_ms: int = 300_000
    offsets_retention_ms: int = 10_080 * _MINUTE_MS
    offsets_retention_check_interval_ms: int = 600_000
    offset_metadata_max_bytes: int = 4_096
    # Ours: how long a static member may stay silent, while no heartbeat interval of it has been observed,
    # before a new process with its group.instance.id may take its place (0: at once, as Kafka does).
    static_member_liveness_ms: int = 4_500
    # The consumer protocol (KIP-848): the broker hands members their session and heartbeat interval.
    consumer_session_timeout_ms: int = 45_000
    consumer_heartbeat_interval_ms: int = 5_000
    consumer_max_size: int = 2**31 - 1
    # Ours (Kafka resolves regular expressions in the background on its own schedule): how often a group's
    # regular-expression subscriptions are matched against the topics again, so that new topics join it.
    consumer_regex_refresh_interval_ms: int = 10_000
    # Kafka 4.3 (KIP-1263): a group computes a new target assignment at most once per interval, so that
    # members joining together (a fleet starting, a storm) share one computation; the joins in between get
    # the last target's epoch and their share at the first heartbeat after the interval. 0: at every change.
    consumer_assignment_interval_ms: int = 1_000
    # Kafka 4 (KIP-848 online migration): a live classic group becomes a consumer group when a consumer
    # member joins it (upgrade), and a consumer group whose last consumer member leaves becomes a classic
    # group of its classic members (downgrade).
    consumer_migration_policy: str = "bidirectional"

    @property
    def upgrade_enabled(self) -> bool:
        return self.consumer_migration_policy in ("bidirectional", "upgrade")

    @property
    def downgrade_enabled(self) -> bool:
        return self.consumer_migration_policy in ("bidirectional", "downgrade")

    def __post_init__(self) -> None:
        if self.consumer_migration_policy not in MIGRATION_POLICIES:
            raise ValueError(f"group.consumer.migration.policy must be one of {', '.join(MIGRATION_POLICIES)}, "
                             f"got {self.consumer_migration_policy!r}")  # fmt: skip
        for f in fields(self):
            if f.name in _STRING_FIELDS:
                continue
            value = getattr(self, f.name)
            if not isinstance(value, int) or isinstance(value, bool):
                raise ValueError(f"{f.name} must be an integer, got {value!r}")
        if self.min_session_timeout_ms > self.max_session_timeout_ms:
            raise ValueError("group.min.session.timeout.ms must not exceed group.max.session.timeout.ms")
        if self.initial_rebalance_delay_ms < 0:
            raise ValueError("group.initial.rebalance.delay.ms must not be negative")
        if self.max_size < 1:
            raise ValueError("group.max.size must be at least 1")
        if self.offsets_retention_ms < _MINUTE_MS:
            raise ValueError("offsets.retention.minutes must be at least 1")
        if self.offsets_retention_check_interval_ms < 1:
            raise ValueError("offsets.retention.check.interval.ms must be at least 1")
        if self.offset_metadata_max_bytes < 0:
            raise ValueError("offset.metadata.max.bytes must not be negative")
        if self.static_member_liveness_ms < 0:
            raise ValueError("group.classic.static.member.liveness.ms must not be negative")
        if self.consumer_heartbeat_interval_ms < 1:
            raise ValueError("group.consumer.heartbeat.interval.ms must be at least 1")
        if self.consumer_session_timeout_ms <= self.consumer_heartbeat_interval_ms:
            raise ValueError("group.consumer.session.timeout.ms must exceed group.consumer.heartbeat.interval.ms")
        if self.consumer_max_size < 1:
            raise ValueError("group.consumer.max.size must be at least 1")
        if self.consumer_regex_refresh_interval_ms < 0:
            raise ValueError("group.consumer.regex.refresh.interval.ms must not be negative")
        if self.consumer_assignment_interval_ms < 0:
            raise ValueError("group.consumer.assignment.interval.ms must not be negative")

    @classmethod
    def from_properties(cls, props: Mapping[str, str | int]) -> GroupCoordinatorConfig:
        """Build from Kafka property names; names this coordinator does not use are ignored (they belong
        to other parts of the broker config)."""
        kwargs: dict[str, int | str] = {}
        for prop, attr in STRING_PROPERTY_NAMES.items():
            if prop in props:
                kwargs[attr] = str(props[prop]).strip().lower()  # Kafka parses the policy case-insensitively
        for prop, (attr, scale) in PROPERTY_NAMES.items():
            if prop in props:
                raw = props[prop]
                try:
                    kwargs[attr] = int(raw) * scale
                except ValueError:
                    raise ValueError(f"{prop} must be an integer, got {raw!r}") from None
        return cls(**kwargs)  # type: ignore[arg-type]


PROPERTY_NAMES: dict[str, tuple[str, int]] = {
    "group.min.session.timeout.ms": ("min_session_timeout_ms", 1),
    "group.max.session.timeout.ms": ("max_session_timeout_ms", 1),
    "group.initial.rebalance.delay.ms": ("initial_rebalance_delay_ms", 1),
    "group.max.size": ("max_size", 1),
    "offsets.retention.minutes": ("offsets_retention_ms", _MINUTE_MS),
    "offsets.retention.check.interval.ms": ("offsets_retention_check_interval_ms", 1),
    "offset.metadata.max.bytes": ("offset_metadata_max_bytes", 1),
    "group.classic.static.member.liveness.ms": ("static_member_liveness_ms", 1),
    "group.consumer.session.timeout.ms": ("consumer_session_timeout_ms", 1),
    "group.consumer.heartbeat.interval.ms": ("consumer_heartbeat_interval_ms", 1),
    "group.consumer.max.size": ("consumer_max_size", 1),
    "group.consumer.regex.refresh.interval.ms": ("consumer_regex_refresh_interval_ms", 1),
    "group.consumer.assignment.interval.ms": ("consumer_assignment_interval_ms", 1),
}
"""Kafka property name -> (attribute, multiplier to milliseconds)."""

STRING_PROPERTY_NAMES: dict[str, str] = {"group.consumer.migration.policy": "consumer_migration_policy"}
"""Kafka property name -> attribute, for the settings that are words, not numbers."""
_STRING_FIELDS = frozenset(STRING_PROPERTY_NAMES.values())
