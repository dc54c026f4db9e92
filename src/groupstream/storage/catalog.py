"""The topic catalog: which topics exist, their ids, partition counts and config overrides, and their logs.

Persisted as ``catalog.json`` in the data directory, replaced atomically (temp file, fsync, rename, fsync
of the directory). The catalog file is the truth: a partition directory with no catalog entry behind it is
debris from a crash mid-create or mid-delete and is removed on open (and by a later create of the same
name). Deleting a topic first commits the catalog, then closes and removes each partition: closing waits
for a flush in progress on another thread, so no flusher touches a directory being removed.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from groupstream.storage.checkpoint import CHECKPOINT_FILES
from groupstream.storage.config import LogConfig
from groupstream.storage.errors import (
    CatalogCorruptError,
    InvalidConfigError,
    InvalidPartitionsError,
    InvalidTopicError,
    LogWriteError,
    TopicExistsError,
    UnknownTopicError,
)
from groupstream.storage.fileio import atomic_write, fsync_directory
from groupstream.storage.log import PartitionLog
from groupstream.storage.segment import parse_file_name
from groupstream.storage.swap import is_swap_debris

CATALOG_FILE = "catalog.json"
MAX_TOPIC_NAME = 249
_LEGAL_NAME = re.compile(r"[a-zA-Z0-9._-]+")
_PARTITION_DIR = re.compile(r"(?P<topic>[a-zA-Z0-9._-]+)-(?P<partition>0|[1-9][0-9]*)")
_FORMAT_VERSION = 1

__all__ = [
    "Catalog",
    "CatalogCorruptError",
    "InvalidConfigError",
    "InvalidPartitionsError",
    "InvalidTopicError",
    "TopicExistsError",
    "TopicInfo",
    "UnknownTopicError",
    "partition_dir_name",
    "validate_topic_name",
]


def validate_topic_name(name: str) -> None:
    """Kafka's rules: 1..249 characters from [a-zA-Z0-9._-], and not "." or ".."."""
    if not isinstance(name, str) or not name:
        raise InvalidTopicError("topic name must be a non-empty string")
    if name in (".", ".."):
        raise InvalidTopicError(f"topic name {name!r} is not allowed")
    if len(name) > MAX_TOPIC_NAME:
        raise InvalidTopicError(f"topic name is {len(name)} characters long; the limit is {MAX_TOPIC_NAME}")
    if not _LEGAL_NAME.fullmatch(name):
        raise InvalidTopicError(
            f"topic name {name!r} contains characters other than ASCII letters, digits, '.', '_' and '-'"
        )


def _collision_key(name: str) -> str:
    """Kafka forbids topics differing only in '.' versus '_' (their metric names would collide)."""
    return name.replace(".", "_")


@dataclass(frozen=True, slots=True)
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    partitions: int
    configs: Mapping[str, str] = field(default_factory=dict)  # overrides only, Kafka property names

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "id": str(self.topic_id),
            "partitions": self.partitions,
            "configs": dict(sorted(self.configs.items())),
        }

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> TopicInfo:
        return cls(
            name=str(obj["name"]),
            topic_id=uuid.UUID(str(obj["id"])),
            partitions=int(obj["partitions"]),
            configs={str(k): str(v) for k, v in dict(obj.get("configs", {})).items()},
        )


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


class Catalog:
    """Owned by one thread, like the logs it opens (each ``PartitionLog`` may still be flushed elsewhere).

    Every partition log is opened when the catalog opens or when the partition is created, so ``log`` is
    a lookup. ``now_ms`` starts the ``segment.ms`` clock of logs found non-empty (None: at their next
    append); new partitions are empty, and an empty segment's clock starts at its first append.
    """

    def __init__(
        self, data_dir: str | os.PathLike[str], defaults: LogConfig | None = None, now_ms: int | None = None
    ) -> None:
        self.data_dir = Path(data_dir)
        self.defaults = defaults or LogConfig()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._topics: dict[str, TopicInfo] = {}
        self._logs: dict[tuple[str, int], PartitionLog] = {}
        self._closed = False
        self._load()
        self._remove_debris()
        for info in self._topics.values():
            config = self._config_for(info.configs)
            for p in range(info.partitions):
                self._open_log(info.name, p, config, now_ms)

    # -- persistence --------------------------------------------------------------------------------------

    def _load(self) -> None:
        path = self.data_dir / CATALOG_FILE
        try:
            text = path.read_text("utf-8")
        except FileNotFoundError:
            return
        try:
            doc = json.loads(text)
            if doc.get("version") != _FORMAT_VERSION:
                raise ValueError(f"unsupported catalog version {doc.get('version')!r}")
            topics = [TopicInfo.from_json(t) for t in doc["topics"]]
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise CatalogCorruptError(f"cannot read {path}: {exc}") from exc
        self._topics = {t.name: t for t in topics}

    def _save(self) -> None:
        doc = {"version": _FORMAT_VERSION, "topics": [t.to_json() for t in self.topics()]}
        atomic_write(self.data_dir / CATALOG_FILE, json.dumps(doc, indent=1).encode("utf-8"))

    def _remove_debris(self) -> None:
        """Remove partition directories the catalog does not know (or no longer knows)."""
        for entry in sorted(os.listdir(self.data_dir)):
            path = self.data_dir / entry
            if not path.is_dir():
                continue
            m = _PARTITION_DIR.fullmatch(entry)
            if m is None or not _looks_like_partition(path):
                continue
            info = self._topics.get(m["topic"])
            if info is None or int(m["partition"]) >= info.partitions:
                shutil.rmtree(path, ignore_errors=True)

    # -- topics -------------------------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise UnknownTopicError("the catalog is closed")

    def _config_for(self, overrides: Mapping[str, str]) -> LogConfig:
        try:
            return LogConfig.from_properties(overrides, base=self.defaults)
        except ValueError as exc:
            raise InvalidConfigError(str(exc)) from exc

    def topics(self) -> list[TopicInfo]:
        return [self._topics[name] for name in sorted(self._topics)]

    def topic(self, name: str) -> TopicInfo:
        info = self._topics.get(name)
        if info is None:
            raise UnknownTopicError(f"unknown topic {name!r}")
        return info

    def get_topic(self, name: str) -> TopicInfo | None:
        return self._topics.get(name)

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        for info in self._topics.values():
            if info.topic_id == topic_id:
                return info
        return None

    def topic_config(self, name: str) -> LogConfig:
        """The effective config of a topic: broker defaults with its overrides applied."""
        return self._config_for(self.topic(name).configs)

    def validate_new_topic(
        self, name: str, partitions: int, configs: Mapping[str, str] | None = None, topic_id: uuid.UUID | None = None
    ) -> LogConfig:
        """Every check ``create_topic`` makes, without creating (CreateTopics ``validate_only``); returns
        the topic's effective config."""
        self._check_open()
        validate_topic_name(name)
        if name in self._topics:
            raise TopicExistsError(f"topic {name!r} already exists")
        key = _collision_key(name)
        for other in self._topics:
            if _collision_key(other) == key:
                raise InvalidTopicError(f"topic {name!r} collides with existing topic {other!r} ('.' vs '_')")
        if not isinstance(partitions, int) or isinstance(partitions, bool) or partitions < 1:
            raise InvalidPartitionsError(f"number of partitions must be at least 1, got {partitions!r}")
        config = self._config_for(dict(configs or {}))
        if topic_id is not None and self.topic_by_id(topic_id) is not None:
            raise InvalidTopicError(f"topic id {topic_id} is already used by another topic")
        return config

    def create_topic(
        self,
        name: str,
        partitions: int,
        configs: Mapping[str, str] | None = None,
        topic_id: uuid.UUID | None = None,
    ) -> TopicInfo:
        """Create and persist a topic; ``topic_id`` defaults to a new uuid4."""
        config = self.validate_new_topic(name, partitions, configs, topic_id)
        info = TopicInfo(name, topic_id or uuid.uuid4(), partitions, dict(configs or {}))
        self._grow(info, 0, config)
        return info

    def _grow(self, info: TopicInfo, first: int, config: LogConfig) -> None:
        """Open partitions ``first..`` of ``info`` and commit the catalog, all or nothing: when the disk
        refuses any step (`LogWriteError`), the partitions opened so far are removed again and the catalog
        stays as it was, so a full disk never leaves half a topic behind."""
        opened: list[int] = []
        previous = self._topics.get(info.name)
        try:
            for p in range(first, info.partitions):
                self._fresh_log(info.name, p, config)
                opened.append(p)
            self._topics[info.name] = info
            self._save()
        except (OSError, LogWriteError) as exc:
            if previous is None:
                self._topics.pop(info.name, None)
            else:
                self._topics[info.name] = previous
            for p in opened:
                self._logs.pop((info.name, p)).delete()
            if len(opened) < info.partitions - first:  # the one that failed part-way
                shutil.rmtree(self.data_dir / partition_dir_name(info.name, first + len(opened)), ignore_errors=True)
            if isinstance(exc, LogWriteError):
                raise
            raise LogWriteError(f"cannot create partitions of {info.name!r}: {exc.strerror or exc}") from exc

    def add_partitions(self, name: str, total: int) -> TopicInfo:
        """CreatePartitions: grow the topic to ``total`` partitions (never shrink)."""
        self._check_open()
        info = self.topic(name)
        if not isinstance(total, int) or isinstance(total, bool) or total <= info.partitions:
            raise InvalidPartitionsError(
                f"topic {name!r} has {info.partitions} partitions; the new count must be greater, got {total!r}"
            )
        new = TopicInfo(info.name, info.topic_id, total, info.configs)
        self._grow(new, info.partitions, self._config_for(info.configs))
        return new

    def replace_topic_configs(
        self, name: str, configs: Mapping[str, str], validate_only: bool = False
    ) -> TopicInfo:
        """Make ``configs`` the topic's whole set of overrides (IncrementalAlterConfigs works out the new set
        from the old one). They are checked as CreateTopics configs are (`InvalidConfigError`), the catalog is
        committed, and only then does every open partition log of the topic take the new effective config:
        all or nothing, so a disk that refuses the commit (`LogWriteError`) leaves the old overrides in force
        on disk and in the logs. ``validate_only`` makes every check and changes nothing."""
        self._check_open()
        info = self.topic(name)
        config = self._config_for(configs)
        new = TopicInfo(info.name, info.topic_id, info.partitions, dict(configs))
        if validate_only:
            return new
        self._save_topic(name, new, f"change the configs of {name!r}")
        for p in range(info.partitions):
            log = self._logs.get((name, p))
            if log is not None:
                log.config = config  # read afresh by each append, roll, retention pass and compaction
        return new

    def _save_topic(self, name: str, new: TopicInfo | None, what: str) -> None:
        """Replace topic ``name`` with ``new`` (None: remove it) and save the catalog; if the save fails, the
        catalog keeps the topic as it was and LogWriteError says what could not be done."""
        old = self._topics[name]
        if new is None:
            del self._topics[name]
        else:
            self._topics[name] = new
        try:
            self._save()
        except OSError as exc:
            self._topics[name] = old
            raise LogWriteError(f"cannot {what}: {exc.strerror or exc}") from exc

    def delete_topic(self, name: str) -> TopicInfo:
        self._check_open()
        info = self.topic(name)
        self._save_topic(name, None, f"delete topic {name!r}")
        for p in range(info.partitions):
            log = self._logs.pop((name, p), None)
            if log is not None:
                log.delete()
            shutil.rmtree(self.data_dir / partition_dir_name(name, p), ignore_errors=True)
        fsync_directory(self.data_dir)
        return info

    # -- logs ---------------------------------------------------------------------------------------------

    def _open_log(self, topic: str, partition: int, config: LogConfig, now_ms: int | None) -> PartitionLog:
        log = PartitionLog.open(self.data_dir / partition_dir_name(topic, partition), config, now_ms)
        self._logs[(topic, partition)] = log
        return log

    def _fresh_log(self, topic: str, partition: int, config: LogConfig) -> PartitionLog:
        """Open a new partition; anything already at its path is debris of an uncommitted create/delete."""
        path = self.data_dir / partition_dir_name(topic, partition)
        if path.exists():
            shutil.rmtree(path)
        return self._open_log(topic, partition, config, None)

    def log(self, topic: str, partition: int) -> PartitionLog:
        self._check_open()
        log = self._logs.get((topic, partition))
        if log is None:
            info = self.topic(topic)
            raise UnknownTopicError(f"topic {topic!r} has partitions 0..{info.partitions - 1}, not {partition}")
        return log

    def logs(self) -> Iterator[tuple[str, int, PartitionLog]]:
        """Every open partition log, for the broker's flusher and retention sweeps."""
        for (topic, partition), log in sorted(self._logs.items(), key=lambda kv: kv[0]):
            yield topic, partition, log

    def enforce_retention(self, now_ms: int) -> int:
        """Retention over every partition; returns how many segments were deleted."""
        self._check_open()
        return sum(len(log.enforce_retention(now_ms)) for log in self._logs.values())

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for log in self._logs.values():
            log.close()
        self._logs.clear()


def _looks_like_partition(path: Path) -> bool:
    """Only directories holding nothing but our files count, so foreign directories are never removed."""
    names = os.listdir(path)
    return all(
        parse_file_name(n) is not None or n in CHECKPOINT_FILES or n.endswith(".tmp") or is_swap_debris(n)
        for n in names
    )
