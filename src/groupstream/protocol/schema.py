"""Declarative message schemas: one `Api` per Kafka API, every version in it.

A schema is data; `compiler` turns it into straight-line encode/decode functions once per (struct, version).
Field names are snake_case versions of Kafka's published field names. Version ranges are strings in Kafka's
own notation: ``"3+"``, ``"0-4"``, ``""`` (none), ``"0+"`` (all).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "NULL",
    "PRIMITIVES",
    "Api",
    "Array",
    "Field",
    "Struct",
    "TypeSpec",
    "VersionRange",
]

# Kafka's primitive type names, as in the published message specs.
PRIMITIVES = frozenset(
    {"bool", "int8", "int16", "uint16", "int32", "int64", "float64", "uuid", "string", "bytes", "records"}
)


class _Null:
    """Marks a field whose default is null (Kafka's ``"default": "null"``)."""

    def __repr__(self) -> str:
        return "NULL"


NULL: Any = _Null()


@dataclass(frozen=True, slots=True)
class VersionRange:
    """An inclusive range of versions; ``hi`` of None means open-ended."""

    lo: int
    hi: int | None

    @classmethod
    def parse(cls, text: str) -> VersionRange | None:
        text = text.strip()
        if not text or text == "none":
            return None
        if text.endswith("+"):
            return cls(int(text[:-1]), None)
        if "-" in text:
            lo, hi = text.split("-", 1)
            return cls(int(lo), int(hi))
        v = int(text)
        return cls(v, v)

    def __contains__(self, version: object) -> bool:
        if not isinstance(version, int):
            return False
        return version >= self.lo and (self.hi is None or version <= self.hi)


def _contains(r: VersionRange | None, version: int) -> bool:
    return r is not None and version in r


@dataclass(frozen=True, slots=True)
class Struct:
    """A named group of fields; compiled into one immutable record class."""

    name: str
    fields: tuple[Field, ...]

    def __init__(self, name: str, *fields: Field) -> None:
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "fields", tuple(fields))
        seen: set[str] = set()
        for f in fields:
            if f.name in seen:
                raise ValueError(f"{name}: duplicate field {f.name}")
            seen.add(f.name)


@dataclass(frozen=True, slots=True)
class Array:
    """An array of a primitive type name or of a struct."""

    item: str | Struct


TypeSpec = str | Array | Struct


@dataclass(frozen=True, slots=True)
class Field:
    """One field: its type, the versions it exists in, and how it is nullable or tagged.

    ``default`` is what a version without the field decodes to and what an encoder may silently drop; a
    non-default value for a field absent from the version being encoded is an error unless ``ignorable``.
    """

    name: str
    type: TypeSpec
    versions: str = "0+"
    nullable: str = ""
    tag: int | None = None
    tagged: str = ""
    default: Any = None
    ignorable: bool = False
    _versions: VersionRange | None = field(init=False, repr=False, compare=False)
    _nullable: VersionRange | None = field(init=False, repr=False, compare=False)
    _tagged: VersionRange | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if isinstance(self.type, str) and self.type not in PRIMITIVES:
            raise ValueError(f"field {self.name}: unknown type {self.type!r}")
        object.__setattr__(self, "_versions", VersionRange.parse(self.versions))
        object.__setattr__(self, "_nullable", VersionRange.parse(self.nullable))
        object.__setattr__(self, "_tagged", VersionRange.parse(self.tagged))
        if (self.tag is None) != (self._tagged is None):
            raise ValueError(f"field {self.name}: tag and tagged versions go together")

    def present_in(self, version: int) -> bool:
        return _contains(self._versions, version)

    def nullable_in(self, version: int) -> bool:
        return _contains(self._nullable, version)

    def tagged_in(self, version: int) -> bool:
        return _contains(self._tagged, version)


@dataclass(frozen=True, slots=True)
class Api:
    """One Kafka API: its key, the versions we serve, the flexible ones, and request and response schemas."""

    key: int
    name: str
    valid: str
    flexible: str
    request: Struct
    response: Struct
    _valid: VersionRange = field(init=False, repr=False, compare=False)
    _flexible: VersionRange | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        valid = VersionRange.parse(self.valid)
        if valid is None or valid.hi is None:
            raise ValueError(f"{self.name}: valid versions must be a closed range")
        object.__setattr__(self, "_valid", valid)
        object.__setattr__(self, "_flexible", VersionRange.parse(self.flexible))

    @property
    def min_version(self) -> int:
        return self._valid.lo

    @property
    def max_version(self) -> int:
        assert self._valid.hi is not None
        return self._valid.hi

    def versions(self) -> range:
        return range(self.min_version, self.max_version + 1)

    def is_flexible(self, version: int) -> bool:
        return _contains(self._flexible, version)
