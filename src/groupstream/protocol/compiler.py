"""Compile declarative schemas into straight-line encode/decode functions.

Each (struct, version) pair becomes one generated Python function for each direction, built once on first use.
Runs of fixed-width fields are packed and unpacked with a single precompiled `struct.Struct` call, arrays of
fixed-width items in bulk, and decoded records stay zero-copy views of the frame. Decoded messages are
immutable named tuples, one class per struct for all versions; a field that a version lacks decodes to its
default. Decoders raise only `PeerProtocolError`; encoders only `LocalProtocolError`.
"""

from __future__ import annotations

import struct
from collections import namedtuple
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic

from groupstream.protocol import primitives as P
from groupstream.protocol.errors import LocalProtocolError, PeerProtocolError
from groupstream.protocol.schema import NULL, Api, Array, Field, Struct

if TYPE_CHECKING:
    from typing_extensions import TypeVar

    from groupstream.protocol.connection import Request as _Request

    # Defaults of Any: an unparameterised `CompiledApi` (from `by_name`) stays as loosely typed as before.
    Req = TypeVar("Req", default=Any)
    Resp = TypeVar("Resp", default=Any)
else:
    from typing import TypeVar

    Req = TypeVar("Req")
    Resp = TypeVar("Resp")

__all__ = ["CompiledApi", "Message"]

Message = Any  # a generated named tuple; typed loosely because its fields are generated
Encoder = Callable[[Any, list[bytes]], None]
Decoder = Callable[[memoryview, int], tuple[Any, int]]

_FIXED = {"bool": "?", "int8": "b", "int16": "h", "uint16": "H", "int32": "i", "int64": "q", "float64": "d"}
_PRIMITIVE_DEFAULTS: dict[str, Any] = {
    "bool": False,
    "int8": 0,
    "int16": 0,
    "uint16": 0,
    "int32": 0,
    "int64": 0,
    "float64": 0.0,
    "uuid": P.ZERO_UUID,
    "string": "",
    "bytes": b"",
    "records": None,
}
_tuple_new = tuple.__new__


class _Codegen:
    """Generates the functions of one API; shared per API so nested structs compile once per version."""

    def __init__(self, api: Api) -> None:
        self.api = api
        self.has_flexible = api._flexible is not None
        self.classes: dict[int, type] = {}
        self.encoders: dict[tuple[int, int, bool], Encoder] = {}
        self.decoders: dict[tuple[int, int], Decoder] = {}

    # --- classes and defaults ----------------------------------------------------------------------

    def class_for(self, s: Struct) -> Any:
        """The struct's class, typed Any: its fields and nested classes are generated."""
        found = self.classes.get(id(s))
        if found is None:
            names = [f.name for f in s.fields]
            if self.has_flexible:
                names.append("unknown_tags")
            defaults = [self.default_of(f) for f in s.fields]
            if self.has_flexible:
                defaults.append(())
            cls: Any = namedtuple(s.name, names, defaults=defaults)  # type: ignore[misc]
            cls.__doc__ = f"{self.api.name} {s.name} (all versions)"
            self.classes[id(s)] = cls
            for f in s.fields:
                sub = f.type.item if isinstance(f.type, Array) else f.type
                if isinstance(sub, Struct):
                    setattr(cls, sub.name, self.class_for(sub))
            found = cls
        return found

    def default_of(self, f: Field) -> Any:
        if f.default is NULL:
            return None
        if f.default is not None:
            return f.default
        t = f.type
        if isinstance(t, Array):
            return ()
        if isinstance(t, Struct):
            return self.class_for(t)()
        return _PRIMITIVE_DEFAULTS[t]

    # --- encoders ------------------------------------------------------------------------------------

    def encoder(self, s: Struct, version: int, strict: bool) -> Encoder:
        """``strict``: a non-default value in a field the version lacks is an error (requests: a client must
        not silently lose a setting); otherwise it is dropped (responses: the broker fills every field it
        knows and each version carries what it can)."""
        key = (id(s), version, strict)
        fn = self.encoders.get(key)
        if fn is None:
            fn = self._build_encoder(s, version, strict)
            self.encoders[key] = fn
        return fn

    def decoder(self, s: Struct, version: int) -> Decoder:
        key = (id(s), version)
        fn = self.decoders.get(key)
        if fn is None:
            fn = self._build_decoder(s, version)
            self.decoders[key] = fn
        return fn

    def _build_encoder(self, s: Struct, version: int, strict: bool) -> Encoder:
        flex = self.api.is_flexible(version)
        ns: dict[str, Any] = {"P": P, "LocalProtocolError": LocalProtocolError}
        lines = ["def enc(obj, out):", "    append = out.append"]
        run: list[tuple[int, Field]] = []

        def flush_run() -> None:
            if not run:
                return
            fmt = ">" + "".join(_FIXED[f.type] for _, f in run)  # type: ignore[index]
            name = f"S{len(ns)}"
            ns[name] = struct.Struct(fmt)
            args = ", ".join(f"obj[{i}]" for i, _ in run)
            lines.append(f"    append({name}.pack({args}))")
            run.clear()

        tagged: list[tuple[int, Field]] = []
        for i, f in enumerate(s.fields):
            if not f.present_in(version):
                flush_run()
                if strict and not f.ignorable:
                    d = f"D{i}"
                    ns[d] = self.default_of(f)
                    cond = f"obj[{i}]" if isinstance(f.type, Array) and ns[d] == () else f"obj[{i}] != {d}"
                    lines.append(f"    if {cond}:")
                    lines.append(
                        f"        raise LocalProtocolError('{s.name}.{f.name} cannot be sent at version {version}')"
                    )
                continue
            if flex and f.tagged_in(version):
                flush_run()
                tagged.append((i, f))
                continue
            if isinstance(f.type, str) and f.type in _FIXED:
                run.append((i, f))
                continue
            flush_run()
            self._write_value(f, version, flex, f"obj[{i}]", "out", lines, "    ", ns, strict)
        flush_run()
        if flex:
            u = len(s.fields)
            if not tagged:
                lines.append(f"    if obj[{u}]:")
                lines.append(f"        P.write_tagged_fields(list(obj[{u}]), out)")
                lines.append("    else:")
                lines.append("        append(b'\\x00')")
            else:
                lines.append(f"    tags = list(obj[{u}])")
                for i, f in tagged:
                    d = f"D{i}"
                    ns[d] = self.default_of(f)
                    cond = f"obj[{i}]" if isinstance(f.type, Array) and ns[d] == () else f"obj[{i}] != {d}"
                    lines.append(f"    if {cond}:")
                    lines.append("        t = []")
                    self._write_value(f, version, flex, f"obj[{i}]", "t", lines, "        ", ns, strict)
                    lines.append(f"        tags.append(({f.tag}, b''.join(t)))")
                lines.append("    if tags:")
                lines.append("        P.write_tagged_fields(tags, out)")
                lines.append("    else:")
                lines.append("        append(b'\\x00')")
        return self._exec(lines, ns, "enc", f"{s.name}_v{version}_encode")

    def _write_value(
        self,
        f: Field,
        version: int,
        flex: bool,
        expr: str,
        out: str,
        lines: list[str],
        ind: str,
        ns: dict[str, Any],
        strict: bool,
    ) -> None:
        t = f.type
        nullable = f.nullable_in(version)
        if isinstance(t, str):
            self._write_primitive(t, nullable, flex, expr, out, lines, ind, ns)
        elif isinstance(t, Struct):
            name = f"E_{t.name}"
            ns[name] = self.encoder(t, version, strict)
            if nullable:
                lines.append(f"{ind}if {expr} is None:")
                lines.append(f"{ind}    {out}.append(b'\\xff')")
                lines.append(f"{ind}else:")
                lines.append(f"{ind}    {out}.append(b'\\x01')")
                lines.append(f"{ind}    {name}({expr}, {out})")
            else:
                lines.append(f"{ind}{name}({expr}, {out})")
        else:
            lines.append(f"{ind}arr = {expr}")
            inner = ind
            if nullable:
                lines.append(f"{ind}if arr is None:")
                null = "b'\\x00'" if flex else "b'\\xff\\xff\\xff\\xff'"
                lines.append(f"{ind}    {out}.append({null})")
                lines.append(f"{ind}else:")
                inner = ind + "    "
            if flex:
                lines.append(f"{inner}{out}.append(P.write_uvarint(len(arr) + 1))")
            else:
                lines.append(f"{inner}{out}.append(P.I32.pack(len(arr)))")
            item = t.item
            if isinstance(item, str) and item in _FIXED:
                lines.append(f"{inner}if arr:")
                lines.append(f"{inner}    {out}.append(struct.pack('>%d{_FIXED[item]}' % len(arr), *arr))")
                ns["struct"] = struct
            elif isinstance(item, Struct):
                name = f"E_{item.name}"
                ns[name] = self.encoder(item, version, strict)
                lines.append(f"{inner}for it in arr:")
                lines.append(f"{inner}    {name}(it, {out})")
            else:
                lines.append(f"{inner}for it in arr:")
                self._write_primitive(item, False, flex, "it", out, lines, inner + "    ", ns)

    @staticmethod
    def _write_primitive(
        t: str, nullable: bool, flex: bool, expr: str, out: str, lines: list[str], ind: str, ns: dict[str, Any]
    ) -> None:
        if t in _FIXED:
            name = f"F_{t}"
            ns[name] = struct.Struct(">" + _FIXED[t])
            lines.append(f"{ind}{out}.append({name}.pack({expr}))")
        elif t == "uuid":
            lines.append(f"{ind}{out}.append({expr}.bytes)")
        else:
            kind = "string" if t == "string" else "bytes"
            fn = "write_" + ("compact_" if flex else "") + ("nullable_" if nullable or t == "records" else "") + kind
            lines.append(f"{ind}P.{fn}({expr}, {out})")

    # --- decoders ------------------------------------------------------------------------------------

    def _build_decoder(self, s: Struct, version: int) -> Decoder:
        flex = self.api.is_flexible(version)
        cls = self.class_for(s)
        ns: dict[str, Any] = {"P": P, "PeerProtocolError": PeerProtocolError, "new": _tuple_new, "C": cls}
        lines = ["def dec(buf, pos):"]
        run: list[tuple[int, Field]] = []
        values = [f"v{i}" for i in range(len(s.fields))]

        def flush_run() -> None:
            if not run:
                return
            fmt = ">" + "".join(_FIXED[f.type] for _, f in run)  # type: ignore[index]
            name = f"S{len(ns)}"
            ns[name] = st = struct.Struct(fmt)
            targets = ", ".join(f"v{i}" for i, _ in run) + ("," if len(run) == 1 else "")
            lines.append(f"    {targets} = {name}.unpack_from(buf, pos)")
            lines.append(f"    pos += {st.size}")
            run.clear()

        tagged: list[tuple[int, Field]] = []
        for i, f in enumerate(s.fields):
            if not f.present_in(version) or (flex and f.tagged_in(version)):
                flush_run()
                d = f"D{i}"
                ns[d] = self.default_of(f)
                values[i] = d
                if f.present_in(version):
                    tagged.append((i, f))
                continue
            if isinstance(f.type, str) and f.type in _FIXED:
                run.append((i, f))
                continue
            flush_run()
            self._read_value(f, version, flex, f"v{i}", lines, "    ", ns)
        flush_run()
        if flex:
            for i, _ in tagged:
                lines.append(f"    v{i} = D{i}")
                values[i] = f"v{i}"
            lines.append("    if buf[pos] == 0:")
            lines.append("        pos += 1")
            lines.append("        unk = ()")
            lines.append("    else:")
            lines.append("        tf, pos = P.read_tagged_fields(buf, pos)")
            lines.append("        unk = []")
            lines.append("        for tag, raw in tf:")
            kw = "if"
            for i, f in tagged:
                name = f"T{i}"
                ns[name] = self._tag_decoder(f, version, flex)
                lines.append(f"            {kw} tag == {f.tag}:")
                lines.append(f"                v{i} = {name}(raw)")
                kw = "elif"
            if tagged:
                lines.append("            else:")
                lines.append("                unk.append((tag, bytes(raw)))")
            else:
                lines.append("            unk.append((tag, bytes(raw)))")
            lines.append("        unk = tuple(unk)")
            values.append("unk")
        elif self.has_flexible:
            values.append("()")
        tup = ", ".join(values) + ("," if len(values) == 1 else "")
        lines.append(f"    return new(C, ({tup})), pos")
        return self._exec(lines, ns, "dec", f"{s.name}_v{version}_decode")

    def _tag_decoder(self, f: Field, version: int, flex: bool) -> Callable[[memoryview], Any]:
        ns: dict[str, Any] = {"P": P, "PeerProtocolError": PeerProtocolError}
        lines = ["def dec(buf):", "    pos = 0"]
        self._read_value(f, version, flex, "v", lines, "    ", ns)
        lines.append("    return v")
        return self._exec(lines, ns, "dec", f"{f.name}_v{version}_tag")

    def _read_value(
        self, f: Field, version: int, flex: bool, var: str, lines: list[str], ind: str, ns: dict[str, Any]
    ) -> None:
        t = f.type
        nullable = f.nullable_in(version)
        if isinstance(t, str):
            self._read_primitive(t, nullable, flex, var, lines, ind, ns)
        elif isinstance(t, Struct):
            name = f"R_{t.name}"
            ns[name] = self.decoder(t, version)
            if nullable:
                lines.append(f"{ind}(m,) = P.I8.unpack_from(buf, pos)")
                lines.append(f"{ind}pos += 1")
                lines.append(f"{ind}if m < 0:")
                lines.append(f"{ind}    {var} = None")
                lines.append(f"{ind}else:")
                lines.append(f"{ind}    {var}, pos = {name}(buf, pos)")
            else:
                lines.append(f"{ind}{var}, pos = {name}(buf, pos)")
        else:
            if flex:
                lines.append(f"{ind}n, pos = P.read_uvarint(buf, pos)")
                lines.append(f"{ind}n -= 1")
            else:
                lines.append(f"{ind}(n,) = P.I32.unpack_from(buf, pos)")
                lines.append(f"{ind}pos += 4")
            lines.append(f"{ind}if n < 0:")
            if nullable:
                lines.append(f"{ind}    {var} = None")
            else:
                lines.append(f"{ind}    raise PeerProtocolError('null array for non-nullable {f.name}')")
            lines.append(f"{ind}elif n > len(buf) - pos:")
            lines.append(f"{ind}    raise PeerProtocolError('array {f.name} of %d items cannot fit' % n)")
            lines.append(f"{ind}else:")
            inner = ind + "    "
            item = t.item
            if isinstance(item, str) and item in _FIXED:
                size = struct.calcsize(">" + _FIXED[item])
                lines.append(f"{inner}{var} = list(struct.unpack_from('>%d{_FIXED[item]}' % n, buf, pos))")
                lines.append(f"{inner}pos += n * {size}")
                ns["struct"] = struct
            elif isinstance(item, Struct):
                name = f"R_{item.name}"
                ns[name] = self.decoder(item, version)
                lines.append(f"{inner}{var} = []")
                lines.append(f"{inner}ap = {var}.append")
                lines.append(f"{inner}for _ in range(n):")
                lines.append(f"{inner}    it, pos = {name}(buf, pos)")
                lines.append(f"{inner}    ap(it)")
            else:
                lines.append(f"{inner}{var} = []")
                lines.append(f"{inner}ap = {var}.append")
                lines.append(f"{inner}for _ in range(n):")
                self._read_primitive(item, False, flex, "it", lines, inner + "    ", ns)
                lines.append(f"{inner}    ap(it)")

    @staticmethod
    def _read_primitive(
        t: str, nullable: bool, flex: bool, var: str, lines: list[str], ind: str, ns: dict[str, Any]
    ) -> None:
        if t in _FIXED:
            name = f"F_{t}"
            ns[name] = st = struct.Struct(">" + _FIXED[t])
            lines.append(f"{ind}({var},) = {name}.unpack_from(buf, pos)")
            lines.append(f"{ind}pos += {st.size}")
        elif t == "uuid":
            lines.append(f"{ind}{var}, pos = P.read_uuid(buf, pos)")
        elif t == "records":
            lines.append(f"{ind}{var}, pos = P.read_{'compact_' if flex else ''}records(buf, pos)")
        else:
            fn = "read_" + ("compact_" if flex else "") + ("nullable_" if nullable else "") + t
            lines.append(f"{ind}{var}, pos = P.{fn}(buf, pos)")

    @staticmethod
    def _exec(lines: list[str], ns: dict[str, Any], fn: str, name: str) -> Callable[..., Any]:
        src = "\n".join(lines) + "\n"
        code = compile(src, f"<groupstream codec {name}>", "exec")
        exec(code, ns)
        func = ns[fn]
        func.__name__ = name
        func.__qualname__ = name
        func.source = src
        return func  # type: ignore[no-any-return]


class CompiledApi(Generic[Req, Resp]):
    """One API's codec: classes for its request and response, and encode/decode at every valid version.

    Generic in the request and response classes so that mypy checks field names where a handler uses the typed
    codec of its API (``groupstream.protocol.bodies.FETCH``, typed by the generated ``bodies.pyi``); the
    ``by_name`` codecs are ``CompiledApi[Any, Any]``, as loose as before."""

    def __init__(self, api: Api) -> None:
        self.api = api
        self.key = api.key
        self.name = api.name
        self._gen = _Codegen(api)
        self.Request: type[Req] = self._gen.class_for(api.request)
        self.Response: type[Resp] = self._gen.class_for(api.response)

    @property
    def min_version(self) -> int:
        return self.api.min_version

    @property
    def max_version(self) -> int:
        return self.api.max_version

    def is_flexible(self, version: int) -> bool:
        return self.api.is_flexible(version)

    def _check(self, version: int) -> None:
        if not self.api.min_version <= version <= self.api.max_version:
            raise LocalProtocolError(f"{self.name} has no version {version}")

    def body_of(self, request: _Request) -> Req:
        """The decoded body of a request of this API, typed: ``req = FETCH.body_of(request)``."""
        if request.api is not self:
            raise TypeError(f"a {request.api.name} request is not a {self.name} request")
        body: Req = request.body
        return body

    def encode_request(self, msg: Req, version: int) -> bytes:
        self._check(version)
        out: list[bytes] = []
        self._gen.encoder(self.api.request, version, True)(msg, out)
        return b"".join(out)

    def encode_request_into(self, msg: Req, version: int, out: list[bytes]) -> None:
        """Append the encoded pieces to ``out``: a Produce request's record batches stay the caller's buffers
        (no copy), for a writer that sends the pieces as they are (``sendmsg``)."""
        self._check(version)
        self._gen.encoder(self.api.request, version, True)(msg, out)

    def encode_response(self, msg: Resp, version: int) -> bytes:
        self._check(version)
        out: list[bytes] = []
        self._gen.encoder(self.api.response, version, False)(msg, out)
        return b"".join(out)

    def encode_response_into(self, msg: Resp, version: int, out: list[bytes]) -> None:
        """Append the encoded pieces to ``out`` so large records need not be joined twice."""
        self._check(version)
        self._gen.encoder(self.api.response, version, False)(msg, out)

    def decode_request(self, buf: bytes | memoryview, version: int, pos: int = 0) -> Req:
        msg: Req = self._decode(self.api.request, buf, version, pos)
        return msg

    def decode_response(self, buf: bytes | memoryview, version: int, pos: int = 0) -> Resp:
        msg: Resp = self._decode(self.api.response, buf, version, pos)
        return msg

    def _decode(self, s: Struct, buf: bytes | memoryview, version: int, pos: int) -> Message:
        if not self.api.min_version <= version <= self.api.max_version:
            raise PeerProtocolError(f"{self.name} has no version {version}")
        mv = buf if isinstance(buf, memoryview) else memoryview(buf)
        try:
            msg, _ = self._gen.decoder(s, version)(mv, pos)
        except PeerProtocolError:
            raise
        except (struct.error, IndexError, UnicodeDecodeError, ValueError, OverflowError) as e:
            raise PeerProtocolError(f"malformed {self.name} v{version}: {e}") from None
        return msg

    def precompile(self) -> None:
        """Build every version's functions now (tests call this to surface schema mistakes early)."""
        for v in self.api.versions():
            self._gen.encoder(self.api.request, v, True)
            self._gen.encoder(self.api.response, v, False)
            self._gen.decoder(self.api.request, v)
            self._gen.decoder(self.api.response, v)


class CompiledStruct:
    """A standalone versioned struct outside any API: the key and value formats of `__consumer_offsets`
    records, and the consumer protocol's subscription and assignment bytes."""

    def __init__(self, name: str, struct: Struct, valid: str, flexible: str = "") -> None:
        self.name = name
        self.struct = struct
        self._api = Api(key=-1, name=name, valid=valid, flexible=flexible, request=struct, response=Struct(name))
        self._gen = _Codegen(self._api)
        self.Type: Any = self._gen.class_for(struct)

    @property
    def min_version(self) -> int:
        return self._api.min_version

    @property
    def max_version(self) -> int:
        return self._api.max_version

    def encode(self, msg: Message, version: int) -> bytes:
        if not self._api.min_version <= version <= self._api.max_version:
            raise LocalProtocolError(f"{self.name} has no version {version}")
        out: list[bytes] = []
        self._gen.encoder(self.struct, version, True)(msg, out)
        return b"".join(out)

    def decode(self, buf: bytes | memoryview, version: int, pos: int = 0) -> tuple[Message, int]:
        """The message and the position after it."""
        if not self._api.min_version <= version <= self._api.max_version:
            raise PeerProtocolError(f"{self.name} has no version {version}")
        mv = buf if isinstance(buf, memoryview) else memoryview(buf)
        try:
            msg, end = self._gen.decoder(self.struct, version)(mv, pos)
        except PeerProtocolError:
            raise
        except (struct.error, IndexError, UnicodeDecodeError, ValueError, OverflowError) as e:
            raise PeerProtocolError(f"malformed {self.name} v{version}: {e}") from None
        return msg, end
