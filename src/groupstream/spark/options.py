"""The options of ``spark.read.format("groupstream")`` and its streaming and sink counterparts, parsed once on
the driver into plain values, with the names and meanings of Spark's own Kafka source so that a job moves from
``format("kafka")`` by changing the format name.

Every mistake is reported as a `SourceOptionError` that names the option and what was wrong with it; nothing
here talks to a broker.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "EARLIEST",
    "LATEST",
    "OffsetSpec",
    "SinkOptions",
    "SourceOptionError",
    "SourceOptions",
    "parse_sink_options",
    "parse_source_options",
]

EARLIEST = -2  # Spark's (and Kafka's ListOffsets) sentinels in per-partition offset JSON
LATEST = -1


class SourceOptionError(ValueError):
    """An option of the groupstream data source is missing, contradictory or malformed."""


@dataclass(frozen=True)
class OffsetSpec:
    """Where to start (or end): ``kind`` is earliest, latest, group, offsets (per partition, with -2/-1 meaning
    earliest/latest), timestamp (one for every partition) or timestamps (per partition)."""

    kind: str
    offsets: Mapping[tuple[str, int], int] = field(default_factory=dict)
    timestamp: int | None = None


@dataclass(frozen=True)
class SourceOptions:
    bootstrap_servers: str
    client_config: Mapping[str, str]  # the ``kafka.``-prefixed options, prefix removed
    topics: tuple[str, ...] = ()  # subscribe
    pattern: re.Pattern[str] | None = None  # subscribePattern
    assign: Mapping[str, tuple[int, ...]] | None = None  # assign
    starting: OffsetSpec = OffsetSpec("earliest")
    ending: OffsetSpec = OffsetSpec("latest")
    timestamp_strategy: str = "error"  # startingOffsetsByTimestampStrategy: error | latest
    min_partitions: int | None = None
    max_offsets_per_trigger: int | None = None
    fail_on_data_loss: bool = True
    include_headers: bool = False
    group_id: str | None = None
    fallback_reset: str = "earliest"  # where partitions without a committed offset start (startingOffsets=group)
    poll_timeout_ms: int = 120_000  # kafkaConsumer.pollTimeoutMs: how long a task waits for a fetch
    region_table: str | None = None  # region.table: the output table shared by the instances of a region
    region_member: str | None = None  # region.member: this instance's name in the region

    @property
    def subscription(self) -> str:
        if self.assign is not None:
            return "assign " + json.dumps({t: list(ps) for t, ps in self.assign.items()}, sort_keys=True)
        if self.pattern is not None:
            return f"subscribePattern {self.pattern.pattern!r}"
        return "subscribe " + ",".join(self.topics)


@dataclass(frozen=True)
class SinkOptions:
    bootstrap_servers: str
    client_config: Mapping[str, str]
    topic: str | None  # the ``topic`` option; rows may name their own topic instead


_SOURCE_KEYS = {
    "subscribe", "subscribepattern", "assign", "startingoffsets", "endingoffsets", "startingoffsetsbytimestamp",
    "endingoffsetsbytimestamp", "startingtimestamp", "endingtimestamp", "startingoffsetsbytimestampstrategy",
    "minpartitions", "maxoffsetspertrigger", "failondataloss", "includeheaders", "group.id",
    "kafkaconsumer.polltimeoutms", "bootstrap.servers", "path", "region.table", "region.member",
}  # fmt: skip
_SINK_KEYS = {"topic", "bootstrap.servers", "path", "checkpointlocation"}  # path, checkpointLocation: from Spark


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    """Spark hands options case-insensitively; we do too, keeping the ``kafka.`` client properties intact."""
    return {k.lower(): str(v) for k, v in options.items()}


def _client(options: Mapping[str, str]) -> tuple[str, dict[str, str]]:
    client = {k[len("kafka."):]: v for k, v in options.items() if k.startswith("kafka.")}
    bootstrap = client.pop("bootstrap.servers", None) or options.get("bootstrap.servers")
    if not bootstrap:
        raise SourceOptionError(
            "option 'kafka.bootstrap.servers' is required (host:port[,host:port...] of the brokers to read)"
        )
    return bootstrap, client


def _bool(options: Mapping[str, str], key: str, default: bool) -> bool:
    raw = options.get(key.lower())
    if raw is None:
        return default
    text = raw.strip().lower()
    if text not in ("true", "false"):
        raise SourceOptionError(f"option {key!r} must be true or false, got {raw!r}")
    return text == "true"


def _positive(options: Mapping[str, str], key: str) -> int | None:
    raw = options.get(key.lower())
    if raw is None:
        return None
    try:
        n = int(raw)
    except ValueError:
        raise SourceOptionError(f"option {key!r} must be a positive integer, got {raw!r}") from None
    if n <= 0:
        raise SourceOptionError(f"option {key!r} must be a positive integer, got {n}")
    return n


def _json_object(key: str, raw: str) -> dict[str, Any]:
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as e:
        raise SourceOptionError(f"option {key!r} is not valid JSON ({e.msg} at column {e.colno}): {raw!r}") from None
    if not isinstance(value, dict):
        raise SourceOptionError(f"option {key!r} must be a JSON object, got {raw!r}")
    return value


def _per_partition(key: str, raw: str) -> dict[tuple[str, int], int]:
    """``{"topic": {"0": 23, "1": -2}}`` into ``{(topic, 0): 23, (topic, 1): -2}``."""
    out: dict[tuple[str, int], int] = {}
    for topic, parts in _json_object(key, raw).items():
        if not isinstance(parts, dict):
            raise SourceOptionError(f"option {key!r}: topic {topic!r} must map partitions to numbers, got {parts!r}")
        for p, value in parts.items():
            try:
                partition = int(p)
            except ValueError:
                raise SourceOptionError(f"option {key!r}: {p!r} of topic {topic!r} is not a partition number") from None
            if isinstance(value, bool) or not isinstance(value, int):
                raise SourceOptionError(f"option {key!r}: {topic}-{partition} must be an integer, got {value!r}")
            out[(topic, partition)] = value
    return out


def _assign(raw: str) -> dict[str, tuple[int, ...]]:
    out: dict[str, tuple[int, ...]] = {}
    for topic, parts in _json_object("assign", raw).items():
        if not isinstance(parts, list) or not all(isinstance(p, int) and not isinstance(p, bool) for p in parts):
            raise SourceOptionError(f"option 'assign': topic {topic!r} must list partition numbers, got {parts!r}")
        out[topic] = tuple(sorted(set(parts)))
    if not out:
        raise SourceOptionError("option 'assign' names no partitions")
    return out


def _offsets(options: Mapping[str, str], which: str, streaming: bool) -> OffsetSpec | None:
    """``startingOffsets``/``endingOffsets`` and their by-timestamp forms; None when none is given."""
    given = [
        k for k in (f"{which}offsets", f"{which}offsetsbytimestamp", f"{which}timestamp") if k in options
    ]
    name = {"starting": "startingOffsets", "ending": "endingOffsets"}[which]
    if len(given) > 1:
        raise SourceOptionError(f"give only one of {name}, {name}ByTimestamp and {which}Timestamp")
    if not given:
        return None
    key = given[0]
    raw = options[key].strip()
    if key == f"{which}timestamp":
        try:
            return OffsetSpec("timestamp", timestamp=int(raw))
        except ValueError:
            raise SourceOptionError(f"option '{which}Timestamp' must be a timestamp in ms, got {raw!r}") from None
    if key == f"{which}offsetsbytimestamp":
        return OffsetSpec("timestamps", offsets=_per_partition(f"{name}ByTimestamp", raw))
    text = raw.lower()
    if text in ("earliest", "latest"):
        return OffsetSpec(text)
    if text == "group":
        if which != "starting" or not streaming:
            raise SourceOptionError(f"{name}=group is only for streaming queries (they start where group.id left off)")
        return OffsetSpec("group")
    return OffsetSpec("offsets", offsets=_per_partition(name, raw))


def parse_source_options(options: Mapping[str, str], streaming: bool) -> SourceOptions:
    opts = _lower(options)
    bootstrap, client = _client(opts)
    unknown = sorted(k for k in opts if k not in _SOURCE_KEYS and not k.startswith("kafka."))
    if unknown:
        raise SourceOptionError(
            f"unknown option {unknown[0]!r} (client properties take the prefix 'kafka.', e.g. 'kafka.{unknown[0]}')"
        )
    chosen = [k for k in ("subscribe", "subscribepattern", "assign") if k in opts]
    if len(chosen) != 1:
        raise SourceOptionError("give exactly one of the options 'subscribe', 'subscribePattern' and 'assign'")
    topics: tuple[str, ...] = ()
    pattern = None
    assign = None
    if chosen[0] == "subscribe":
        topics = tuple(sorted({t.strip() for t in opts["subscribe"].split(",") if t.strip()}))
        if not topics:
            raise SourceOptionError("option 'subscribe' names no topic")
    elif chosen[0] == "subscribepattern":
        try:
            pattern = re.compile(opts["subscribepattern"])
        except re.error as e:
            raise SourceOptionError(f"option 'subscribePattern' is not a valid regular expression: {e}") from None
    else:
        assign = _assign(opts["assign"])

    starting = _offsets(opts, "starting", streaming) or OffsetSpec("latest" if streaming else "earliest")
    ending = _offsets(opts, "ending", streaming)
    if streaming and ending is not None:
        raise SourceOptionError("endingOffsets is for batch queries only; a stream has no end")
    ending = ending or OffsetSpec("latest")
    if not streaming:
        if starting.kind == "latest" or (starting.offsets and LATEST in starting.offsets.values()):
            raise SourceOptionError("startingOffsets cannot be latest for a batch query (it would read nothing)")
        if ending.kind == "earliest" or (ending.offsets and EARLIEST in ending.offsets.values()):
            raise SourceOptionError("endingOffsets cannot be earliest for a batch query (it would read nothing)")
    for spec, name in ((starting, "startingOffsets"), (ending, "endingOffsets")):
        if assign is not None and spec.kind in ("offsets", "timestamps"):
            extra = sorted(tp for tp in spec.offsets if tp[1] not in assign.get(tp[0], ()))
            if extra:
                raise SourceOptionError(f"{name} names {extra[0][0]}-{extra[0][1]}, which 'assign' does not")
    strategy = opts.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise SourceOptionError(f"option 'startingOffsetsByTimestampStrategy' must be error or latest, got {strategy!r}")
    max_per_trigger = _positive(opts, "maxOffsetsPerTrigger")
    if max_per_trigger is not None and not streaming:
        raise SourceOptionError("maxOffsetsPerTrigger is for streaming queries only")
    group_id = client.pop("group.id", None) or opts.get("group.id")
    if starting.kind == "group" and not group_id:
        raise SourceOptionError("startingOffsets=group needs option 'group.id' (the group whose offsets to resume)")
    reset = client.pop("auto.offset.reset", "earliest").strip().lower()
    if reset not in ("earliest", "latest"):
        raise SourceOptionError(f"option 'kafka.auto.offset.reset' must be earliest or latest, got {reset!r}")
    poll_timeout = _positive(opts, "kafkaConsumer.pollTimeoutMs") or 120_000
    region_table, region_member = _region(opts, streaming, group_id, assign is not None)
    return SourceOptions(
        bootstrap_servers=bootstrap,
        client_config=client,
        topics=topics,
        pattern=pattern,
        assign=assign,
        starting=starting,
        ending=ending,
        timestamp_strategy=strategy,
        min_partitions=_positive(opts, "minPartitions"),
        max_offsets_per_trigger=max_per_trigger,
        fail_on_data_loss=_bool(opts, "failOnDataLoss", True),
        include_headers=_bool(opts, "includeHeaders", False),
        group_id=group_id,
        fallback_reset=reset,
        poll_timeout_ms=poll_timeout,
        region_table=region_table,
        region_member=region_member,
    )


_MEMBER_NAME = re.compile(r"[A-Za-z0-9_.]+")


def _region(opts: Mapping[str, str], streaming: bool, group_id: str | None, assigned: bool) -> tuple[
    str | None, str | None
]:
    """``region.table`` makes the stream one instance of a region: instances share ``group.id`` (the group
    splits the partitions among them) and the table, whose ledger is their merged checkpoint."""
    table, member = opts.get("region.table"), opts.get("region.member")
    if table is None:
        if member is not None:
            raise SourceOptionError("option 'region.member' needs 'region.table' (the region's shared output table)")
        return None, None
    if not streaming:
        raise SourceOptionError("option 'region.table' is for streaming queries only")
    if not group_id:
        raise SourceOptionError("option 'region.table' needs 'kafka.group.id': the group the instances share")
    if assigned:
        raise SourceOptionError("option 'region.table' needs 'subscribe' or 'subscribePattern'; the group assigns")
    if not member or not _MEMBER_NAME.fullmatch(member):
        raise SourceOptionError(
            f"option 'region.member' must name this instance with letters, digits, '_' and '.', got {member!r}"
        )
    return table, member


def parse_sink_options(options: Mapping[str, str]) -> SinkOptions:
    opts = _lower(options)
    bootstrap, client = _client(opts)
    unknown = sorted(k for k in opts if k not in _SINK_KEYS and not k.startswith("kafka."))
    if unknown:
        raise SourceOptionError(
            f"unknown option {unknown[0]!r} for the groupstream sink (producer properties take the prefix 'kafka.')"
        )
    topic = opts.get("topic")
    return SinkOptions(bootstrap, client, topic.strip() if topic else None)
