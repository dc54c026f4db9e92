"""The generated message types (``bodies.pyi``) cannot drift from the schemas or from what the codecs build.

The stub is regenerated in memory and compared with the checked-in file; then it is read back (``ast``) and held
against the runtime: every class it declares is the compiler's class under that name with exactly those fields,
every default and every decoded message (random, every API and version) has the declared type, and the typed
codecs and ``body_of`` are the registry's own.
"""

from __future__ import annotations

import ast
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import message

from groupstream.protocol import bodies, typegen
from groupstream.protocol.connection import Request
from groupstream.protocol.headers import RequestHeader
from groupstream.protocol.messages import APIS, by_name

STUB = typegen.STUB_PATH.read_text()
TREE = ast.parse(STUB)


def test_checked_in_stub_is_what_the_schemas_generate() -> None:
    assert typegen.generate() == STUB, "bodies.pyi is stale: run python -m groupstream.protocol.typegen"
    assert typegen.main(["--check"]) == 0


def _classes(body: list[ast.stmt], prefix: str) -> Iterator[tuple[str, ast.ClassDef]]:
    for node in body:
        if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            path = f"{prefix}{node.name}"
            yield path, node
            yield from _classes(node.body, path + ".")


CLASSES: dict[str, ast.ClassDef] = dict(_classes(TREE.body, ""))


def _fields(node: ast.ClassDef) -> list[tuple[str, ast.expr]]:
    return [(n.target.id, n.annotation) for n in node.body
            if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)]  # fmt: skip


FIELDS: dict[str, list[tuple[str, ast.expr]]] = {path: _fields(node) for path, node in CLASSES.items()}


def _resolve(path: str) -> Any:
    obj: Any = bodies
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


def test_every_declared_class_is_the_runtime_class_with_those_fields() -> None:
    assert len(CLASSES) > 2 * len(APIS)
    for path, node in CLASSES.items():
        cls = _resolve(path)
        assert cls._fields == tuple(name for name, _ in FIELDS[path]), path
        for stmt in node.body:  # a struct shared by two parents is one class under both
            if isinstance(stmt, ast.Assign):
                (target,) = stmt.targets
                assert isinstance(target, ast.Name)
                assert getattr(cls, target.id) is _resolve(ast.unparse(stmt.value)), f"{path}.{target.id}"


def test_every_api_has_its_typed_codec_and_classes() -> None:
    constants = {n.target.id: ast.unparse(n.annotation) for n in TREE.body
                 if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)}  # fmt: skip
    assert len(constants) == len(APIS)
    for api in APIS.values():
        name = typegen.constant_name(api.name)
        assert getattr(bodies, name) is api
        assert constants[name] == f"CompiledApi[{api.Request.__name__}, {api.Response.__name__}]"
        assert getattr(bodies, api.Request.__name__) is api.Request
        assert getattr(bodies, api.Response.__name__) is api.Response
    assert typegen.constant_name("DescribeTopicPartitions") == "DESCRIBE_TOPIC_PARTITIONS"
    assert typegen.constant_name("InitProducerId") == "INIT_PRODUCER_ID"


def _conforms(value: Any, ann: ast.expr) -> bool:
    """Whether ``value`` has the type the stub annotation names (the few forms the generator writes)."""
    if isinstance(ann, ast.BinOp) and isinstance(ann.op, ast.BitOr):
        return _conforms(value, ann.left) or _conforms(value, ann.right)
    if isinstance(ann, ast.Constant) and ann.value is None:
        return value is None
    if isinstance(ann, ast.Subscript):
        outer = ast.unparse(ann.value)
        if outer == "Sequence":
            return isinstance(value, list | tuple) and all(_conforms(v, ann.slice) for v in value)
        assert outer == "tuple", outer
        assert isinstance(ann.slice, ast.Tuple)
        return (isinstance(value, tuple) and len(value) == len(ann.slice.elts)
                and all(_conforms(v, a) for v, a in zip(value, ann.slice.elts, strict=True)))  # fmt: skip
    name = ast.unparse(ann)
    simple: dict[str, Any] = {"int": int, "bool": bool, "float": float, "str": str, "bytes": bytes,
                              "UUID": uuid.UUID, "Buffer": bytes | bytearray | memoryview}  # fmt: skip
    if name in simple:
        return isinstance(value, simple[name]) and (name != "int" or not isinstance(value, bool))
    return type(value) is _resolve(name)


def _check_message(msg: Any, path: str) -> None:
    assert type(msg) is _resolve(path), path
    for (name, ann), value in zip(FIELDS[path], msg, strict=True):
        assert _conforms(value, ann), f"{path}.{name} = {value!r} is not {ast.unparse(ann)}"
        for nested in value if isinstance(value, list | tuple) and not hasattr(value, "_fields") else [value]:
            if hasattr(nested, "_fields"):
                _check_message(nested, _path_of(nested, path))


def _path_of(obj: Any, parent: str) -> str:
    """The stub path of a nested struct's class: its name under the parent, or where the alias points."""
    name = type(obj).__name__
    node = CLASSES[parent]
    for stmt in node.body:
        if isinstance(stmt, ast.Assign) and isinstance(stmt.targets[0], ast.Name) and stmt.targets[0].id == name:
            return ast.unparse(stmt.value)
    return f"{parent}.{name}"


def test_defaults_have_the_declared_types() -> None:
    for path in CLASSES:
        _check_message(_resolve(path)(), path)


CASES = [(api, v, kind) for api in APIS.values() for v in range(api.min_version, api.max_version + 1)
         for kind in ("request", "response")]  # fmt: skip


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_decoded_messages_have_the_declared_types(data: st.DataObject) -> None:
    api, version, kind = data.draw(st.sampled_from(CASES), label="api, version, kind")
    msg = data.draw(message(api, version, kind), label="message")
    if kind == "request":
        decoded = api.decode_request(api.encode_request(msg, version), version)
        _check_message(decoded, api.Request.__name__)
    else:
        decoded = api.decode_response(api.encode_response(msg, version), version)
        _check_message(decoded, api.Response.__name__)


def test_body_of_gives_the_body_of_its_own_api_only() -> None:
    fetch = bodies.FETCH
    body = fetch.Request(max_wait_ms=7)
    request = Request(RequestHeader(fetch.key, 12, 1), fetch, body)
    assert fetch.body_of(request) is body
    assert fetch.body_of(request).max_wait_ms == 7
    with pytest.raises(TypeError, match="a Fetch request is not a Metadata request"):
        by_name("Metadata").body_of(request)
