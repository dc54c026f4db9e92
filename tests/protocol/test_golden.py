"""Golden frames captured from real clients (tests/protocol/golden/<client>/, see golden/capture.py).

Every captured request whose API and version our schemas cover decodes with `ServerConnection` and re-encodes
byte-identically, header included; every such response decodes with the response decoder and re-encodes
byte-identically through `ServerConnection.encode_response`. Frames of APIs not in `APIS` (or at versions
outside a schema's range) are not collected; the coverage test demands that ApiVersions, Metadata, Produce,
Fetch and ListOffsets are checked for every client.

One documented exception: responses captured from a broker other than ours (NON_CANONICAL) may carry tagged
fields at their default values, which Kafka and our encoder omit (Tansu 0.6.0 does this in ApiVersions v3+,
Fetch v12+ and CreateTopics v5+). When such a response does not re-encode byte-identically, the decoder must
still consume the whole frame, and the re-encoded frame must decode to the same message. Responses captured
from our broker are always held to byte identity.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from groupstream.protocol.connection import Request, ServerConnection
from groupstream.protocol.headers import (
    decode_response_header,
    encode_request_header,
    response_header_flexible,
)
from groupstream.protocol.messages import APIS
from support.kafka_apis import API_NAMES

# GOLDEN_DIR checks another capture (e.g. `capture.py --out DIR`) before it replaces the committed one.
GOLDEN = Path(os.environ.get("GOLDEN_DIR", Path(__file__).parent / "golden"))
CLIENTS = ("confluent", "kafka-python", "aiokafka", "kcat")
REQUIRED_APIS = {18: "ApiVersions", 3: "Metadata", 0: "Produce", 1: "Fetch", 2: "ListOffsets"}

# broker kind -> why its responses may not be byte-canonical
NON_CANONICAL = {
    "tansu": "Tansu 0.6.0 writes tagged fields at their default values (e.g. ApiVersions supported_features=[] "
    "and finalized_features_epoch=-1, Fetch node_endpoints=[], CreateTopics topic_config_error_code=0)",
}


@dataclass(frozen=True)
class Golden:
    client: str
    broker_kind: str
    file: str
    direction: str
    api_key: int
    api_version: int
    correlation_id: int
    rewritten: bool

    @property
    def payload(self) -> bytes:
        return (GOLDEN / self.client / self.file).read_bytes()

    def __str__(self) -> str:
        return f"{self.client}/{self.file}"


def load(client: str) -> list[Golden]:
    manifest = json.loads((GOLDEN / client / "MANIFEST.json").read_text())
    return [
        Golden(
            client,
            manifest["broker_kind"],
            e["file"],
            e["direction"],
            e["api_key"],
            e["api_version"],
            e["correlation_id"],
            e["rewritten"],
        )
        for e in manifest["frames"]
    ]


ALL = [g for c in CLIENTS for g in load(c)]


def covered(g: Golden) -> bool:
    api = APIS.get(g.api_key)
    return api is not None and api.min_version <= g.api_version <= api.max_version


REQUESTS = [g for g in ALL if g.direction == "req" and covered(g)]
RESPONSES = [g for g in ALL if g.direction == "resp" and covered(g)]


def frame_of(payload: bytes) -> bytes:
    return len(payload).to_bytes(4, "big") + payload


def decode_request(payload: bytes) -> Request:
    conn = ServerConnection(APIS)
    conn.receive_data(frame_of(payload))
    event = conn.next_event()
    assert isinstance(event, Request), f"decoded as {event!r}"
    assert conn.next_event() is None
    return event


def reencode_request(req: Request) -> bytes:
    parts: list[bytes] = []
    encode_request_header(req.header, req.api.is_flexible(req.version), parts)
    parts.append(req.api.encode_request(req.body, req.version))
    return b"".join(parts)


def decode_response(g: Golden, payload: bytes) -> tuple[int, Any]:
    api = APIS[g.api_key]
    flexible = response_header_flexible(api.key, api.is_flexible(g.api_version))
    corr, pos = decode_response_header(memoryview(payload), flexible)
    return corr, api.decode_response(payload, g.api_version, pos)


def response_end(g: Golden, payload: bytes) -> int:
    """Where the response decoder stops reading (the generated decoder returns its end position)."""
    api = APIS[g.api_key]
    flexible = response_header_flexible(api.key, api.is_flexible(g.api_version))
    _, pos = decode_response_header(memoryview(payload), flexible)
    decoder = api._gen.decoder(api.api.response, g.api_version)
    _, end = decoder(memoryview(payload), pos)
    return int(end)


def normalized(value: Any) -> Any:
    """A comparable form of a decoded message: sequences as tuples, buffers as bytes."""
    if hasattr(value, "_fields"):
        return (type(value).__name__, tuple(normalized(getattr(value, f)) for f in value._fields))
    if isinstance(value, list | tuple):
        return tuple(normalized(v) for v in value)
    if isinstance(value, memoryview | bytearray):
        return bytes(value)
    return value


def reencode_response(g: Golden, corr: int, body: Any) -> bytes:
    parts = ServerConnection.encode_response(APIS[g.api_key], g.api_version, corr, body)
    return b"".join(parts)


@pytest.mark.parametrize("g", REQUESTS, ids=str)
def test_request_round_trips_byte_identically(g: Golden) -> None:
    payload = g.payload
    req = decode_request(payload)
    assert (req.header.api_key, req.header.api_version, req.header.correlation_id) == (
        g.api_key,
        g.api_version,
        g.correlation_id,
    )
    again = reencode_request(req)
    assert again == payload, f"re-encoded request differs at byte {_first_diff(again, payload)}"


@pytest.mark.parametrize("g", RESPONSES, ids=str)
def test_response_round_trips_byte_identically(g: Golden) -> None:
    payload = g.payload
    corr, body = decode_response(g, payload)
    assert corr == g.correlation_id
    again = reencode_response(g, corr, body)
    if g.broker_kind in NON_CANONICAL and again != frame_of(payload):
        assert response_end(g, payload) == len(payload), "the decoder left bytes of the frame unread"
        corr2, body2 = decode_response(g, again[4:])
        assert (corr2, normalized(body2)) == (corr, normalized(body)), "re-encoding changed the message"
        return
    assert again == frame_of(payload), f"re-encoded response differs at byte {_first_diff(again, frame_of(payload))}"


@pytest.mark.parametrize("client", CLIENTS)
def test_required_apis_are_checked_for_every_client(client: str) -> None:
    missing_schema = {name for key, name in REQUIRED_APIS.items() if key not in APIS}
    assert not missing_schema, f"no schema in groupstream.protocol.messages for {sorted(missing_schema)}"
    for direction, checked in (("req", REQUESTS), ("resp", RESPONSES)):
        keys = {g.api_key for g in checked if g.client == client}
        captured = {(g.api_key, g.api_version) for g in ALL if g.client == client and g.direction == direction}
        missing = {
            name: sorted(v for k, v in captured if k == key) for key, name in REQUIRED_APIS.items() if key not in keys
        }
        assert not missing, (
            f"{client}: no {direction} frame checked for {missing} (captured versions shown; outside the schema's "
            f"range, or not captured: re-run tests/protocol/golden/capture.py)"
        )


def test_golden_files_match_their_manifests() -> None:
    for client in CLIENTS:
        listed = {g.file for g in ALL if g.client == client}
        on_disk = {p.name for p in (GOLDEN / client).glob("*.bin")}
        assert listed == on_disk, f"{client}: manifest and files differ: {sorted(listed ^ on_disk)}"
        for g in (g for g in ALL if g.client == client):
            name = API_NAMES.get(g.api_key, f"Api{g.api_key}")
            assert f"-{name}-v{g.api_version}-{g.direction}.bin" in g.file
            if g.direction == "req":
                p = g.payload
                assert int.from_bytes(p[0:2], "big", signed=True) == g.api_key
                assert int.from_bytes(p[2:4], "big", signed=True) == g.api_version
            assert int.from_bytes(g.payload[4:8] if g.direction == "req" else g.payload[0:4], "big", signed=True) == (
                g.correlation_id
            )


def _first_diff(a: bytes, b: bytes) -> str:
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return f"{i} (ours {a[i : i + 8].hex()} vs captured {b[i : i + 8].hex()}; lengths {len(a)} vs {len(b)})"
    return f"{min(len(a), len(b))} (lengths {len(a)} vs {len(b)})"
