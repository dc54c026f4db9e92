"""Hypothesis strategies derived from the message schemas themselves.

A strategy walks a `Struct` at one version and produces only values that version can carry: fields the version
lacks hold their defaults, tagged fields are sometimes left at their defaults (and so stay off the wire), nullable
fields are sometimes None, and flexible structs sometimes carry tags this codec does not know. Arrays are lists,
as the decoder produces them; an empty tagged array is the default tuple, since an empty one is never sent.
"""

from __future__ import annotations

import uuid
from typing import Any

from hypothesis import strategies as st

from groupstream.protocol.compiler import CompiledApi
from groupstream.protocol.schema import Array, Field, Struct

_INTS = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "uint16": (0, 2**16 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
}

# Small sizes keep nested messages cheap while still reaching every branch (empty, one, several).
MAX_ITEMS = 3
MAX_TEXT = 12
MAX_BYTES = 24


def _primitive(t: str) -> st.SearchStrategy[Any]:
    if t in _INTS:
        lo, hi = _INTS[t]
        return st.integers(lo, hi)
    if t == "bool":
        return st.booleans()
    if t == "float64":
        return st.floats(allow_nan=False)
    if t == "uuid":
        return st.integers(0, 2**128 - 1).map(lambda n: uuid.UUID(int=n))
    if t == "string":
        return st.text(max_size=MAX_TEXT)
    if t in ("bytes", "records"):
        return st.binary(max_size=MAX_BYTES)
    raise AssertionError(f"no strategy for {t}")


def _known_tags(s: Struct) -> frozenset[int]:
    return frozenset(f.tag for f in s.fields if f.tag is not None)


def _unknown_tags(s: Struct) -> st.SearchStrategy[tuple[tuple[int, bytes], ...]]:
    """Tags the struct never uses, in wire (ascending) order, as the decoder returns them."""
    known = _known_tags(s)
    tag = st.integers(0, 40).filter(lambda t: t not in known)
    entries = st.lists(st.tuples(tag, st.binary(max_size=6)), max_size=2, unique_by=lambda e: e[0])
    return st.one_of(st.just(()), entries.map(lambda es: tuple(sorted(es))))


class MessageStrategies:
    """Strategies for one API's requests and responses, cached per (struct, version)."""

    def __init__(self, api: CompiledApi, unknown_tags: bool = True) -> None:
        self.api = api
        self.unknown_tags = unknown_tags
        self._cache: dict[tuple[int, int], st.SearchStrategy[Any]] = {}

    def request(self, version: int) -> st.SearchStrategy[Any]:
        return self.struct(self.api.api.request, self.api.Request, version)

    def response(self, version: int) -> st.SearchStrategy[Any]:
        return self.struct(self.api.api.response, self.api.Response, version)

    def struct(self, s: Struct, cls: type, version: int) -> st.SearchStrategy[Any]:
        key = (id(s), version)
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        flex = self.api.is_flexible(version)
        defaults: dict[str, Any] = cls._field_defaults  # type: ignore[attr-defined]
        parts: list[st.SearchStrategy[Any]] = []
        for f in s.fields:
            if not f.present_in(version):
                parts.append(st.just(defaults[f.name]))
            elif flex and f.tagged_in(version):
                parts.append(st.one_of(st.just(defaults[f.name]), self._tagged_value(f, cls, version)))
            else:
                parts.append(self._value(f, cls, version))
        if "unknown_tags" in cls._fields:  # type: ignore[attr-defined]
            parts.append(_unknown_tags(s) if flex and self.unknown_tags else st.just(()))
        strategy = st.tuples(*parts).map(lambda values: cls(*values))
        self._cache[key] = strategy
        return strategy

    def _tagged_value(self, f: Field, parent: type, version: int) -> st.SearchStrategy[Any]:
        value = self._value(f, parent, version)
        if isinstance(f.type, Array):
            return value.map(lambda v: () if v == [] else v)
        return value

    def _value(self, f: Field, parent: type, version: int) -> st.SearchStrategy[Any]:
        t = f.type
        base: st.SearchStrategy[Any]
        if isinstance(t, Struct):
            base = self.struct(t, getattr(parent, t.name), version)
        elif isinstance(t, Array):
            item = t.item
            if isinstance(item, Struct):
                items = self.struct(item, getattr(parent, item.name), version)
            else:
                items = _primitive(item)
            base = st.lists(items, max_size=MAX_ITEMS)
        else:
            base = _primitive(t)
        if f.nullable_in(version):
            return st.one_of(st.none(), base)
        return base


def message(api: CompiledApi, version: int, kind: str, unknown_tags: bool = True) -> st.SearchStrategy[Any]:
    """Any valid request (``kind == "request"``) or response of ``api`` at ``version``.

    ``unknown_tags=False`` leaves out tags this codec does not know, for peers' codecs that drop them.
    """
    key = (api.key, unknown_tags)
    strategies = _STRATEGIES.get(key)
    if strategies is None or strategies.api is not api:
        strategies = _STRATEGIES[key] = MessageStrategies(api, unknown_tags)
    return strategies.request(version) if kind == "request" else strategies.response(version)


_STRATEGIES: dict[tuple[int, bool], MessageStrategies] = {}
