"""Bad input gets Kafka's error code or a closed connection, and never takes the broker down."""

from __future__ import annotations

import socket
import struct
import time
from functools import partial

import pytest

from groupstream.protocol.error_codes import ErrorCode
from groupstream.protocol.messages import APIS, by_name
from groupstream.protocol.records.batch import BatchBuilder
from support.inprocess import running_broker
from support.raw_client import RawClient

API_VERSIONS = APIS[18]
METADATA = by_name("Metadata")
PRODUCE = by_name("Produce")
FETCH = by_name("Fetch")


# A bare socket speaking through our sans-IO client connection, so a test can also send garbage.
Raw = partial(RawClient, client_id="bad-input-test")


def metadata_ok(port: int) -> bool:
    raw = Raw(port)
    try:
        raw.send(METADATA, 9, METADATA.Request(topics=[]))
        _, _, _, body = raw.receive()
        return len(body.brokers) == 1
    finally:
        raw.close()


@pytest.fixture
def broker(tmp_path):
    with running_broker(tmp_path, **{"auto.create.topics.enable": "false", "num.partitions": "2"}) as b:
        yield b


def test_unsupported_api_versions_version_gets_error_35_and_keeps_the_connection(broker):
    raw = Raw(broker.config.port)
    header = struct.pack(">hhih", 18, 99, 41, -1)
    raw.sock.sendall(struct.pack(">i", len(header)) + header)
    # the answer is a v0 ApiVersions response: correlation id, error 35, and our ranges
    size = struct.unpack(">i", raw.sock.recv(4, socket.MSG_WAITALL))[0]
    payload = raw.sock.recv(size, socket.MSG_WAITALL)
    corr = struct.unpack_from(">i", payload)[0]
    body = API_VERSIONS.decode_response(payload, 0, 4)
    assert corr == 41
    assert body.error_code == ErrorCode.UNSUPPORTED_VERSION
    served = {k.api_key: (k.min_version, k.max_version) for k in body.api_keys}
    assert served[18] == (API_VERSIONS.min_version, API_VERSIONS.max_version)
    assert set(served) == set(broker.handlers)
    # and the same connection goes on working
    raw.send(METADATA, 1, METADATA.Request(topics=None))
    _, _, _, md = raw.receive()
    assert md.brokers[0].port == broker.config.port
    raw.close()


@pytest.mark.parametrize(
    "frame",
    [
        pytest.param(struct.pack(">i", -4), id="negative-length"),
        pytest.param(struct.pack(">i", 200 * 1024 * 1024), id="oversized"),
        pytest.param(struct.pack(">i", 6) + struct.pack(">hhh", 3, 9, 0), id="truncated-header"),
        pytest.param(struct.pack(">i", 10) + struct.pack(">hhih", 9999, 0, 1, -1), id="unknown-api-key"),
        pytest.param(struct.pack(">i", 12) + struct.pack(">hhih", 3, 9, 1, -1) + b"\x05\x00", id="malformed-body"),
    ],
)
def test_bad_frames_close_only_their_connection(broker, frame):
    raw = Raw(broker.config.port)
    raw.sock.sendall(frame)
    assert raw.is_closed_by_peer()
    raw.close()
    assert metadata_ok(broker.config.port)


def _produce_body(topic: str, partition: int, records: bytes, acks: int = -1):
    R = PRODUCE.Request
    TD = R.TopicProduceData
    return R(
        transactional_id=None,
        acks=acks,
        timeout_ms=5000,
        topic_data=[TD(name=topic, partition_data=[TD.PartitionProduceData(index=partition, records=records)])],
    )


def _batch(n: int) -> bytes:
    b = BatchBuilder()
    for i in range(n):
        b.append(value=f"v{i}".encode(), key=None, timestamp=1_700_000_000_000 + i)
    return b.build()


def test_crc_broken_batch_is_rejected_and_the_log_stays_intact(broker):
    broker.catalog.create_topic("t", 1, {})
    raw = Raw(broker.config.port)
    raw.send(PRODUCE, 9, _produce_body("t", 0, _batch(3)))
    ok = raw.receive()[3].responses[0].partition_responses[0]
    assert (ok.error_code, ok.base_offset) == (0, 0)
    broken = bytearray(_batch(2))
    broken[-1] ^= 0xFF
    raw.send(PRODUCE, 9, _produce_body("t", 0, bytes(broken)))
    bad = raw.receive()[3].responses[0].partition_responses[0]
    assert bad.error_code == ErrorCode.CORRUPT_MESSAGE
    truncated = _batch(2)[:-3]
    raw.send(PRODUCE, 9, _produce_body("t", 0, truncated))
    assert raw.receive()[3].responses[0].partition_responses[0].error_code == ErrorCode.CORRUPT_MESSAGE
    raw.send(PRODUCE, 9, _produce_body("t", 0, _batch(2)))
    again = raw.receive()[3].responses[0].partition_responses[0]
    assert (again.error_code, again.base_offset) == (0, 3)
    assert broker.catalog.log("t", 0).log_end_offset == 5
    raw.close()


def test_unknown_topic_gets_unknown_topic_or_partition(broker):
    raw = Raw(broker.config.port)
    raw.send(PRODUCE, 9, _produce_body("nope", 0, _batch(1)))
    assert raw.receive()[3].responses[0].partition_responses[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    raw.send(METADATA, 9, METADATA.Request(topics=[METADATA.Request.MetadataRequestTopic(name="nope")]))
    md = raw.receive()[3]
    assert md.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert broker.catalog.get_topic("nope") is None  # auto-creation is off in this fixture
    raw.close()


def _fetch_body(topic: str, partition: int, offset: int, max_wait_ms: int, min_bytes: int = 1):
    R = FETCH.Request
    FT = R.FetchTopic
    return R(
        replica_id=-1,
        max_wait_ms=max_wait_ms,
        min_bytes=min_bytes,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=[
            FT(topic=topic, partitions=[FT.FetchPartition(partition=partition, fetch_offset=offset, partition_max_bytes=1 << 20)])
        ],
        forgotten_topics_data=[],
        rack_id="",
    )


def test_fetch_out_of_range_gets_offset_out_of_range(broker):
    broker.catalog.create_topic("t", 1, {})
    raw = Raw(broker.config.port)
    raw.send(FETCH, 11, _fetch_body("t", 0, 42, max_wait_ms=0))
    part = raw.receive()[3].responses[0].partitions[0]
    assert part.error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert (part.high_watermark, part.log_start_offset) == (0, 0)
    raw.close()


def test_pipelined_responses_keep_request_order_while_a_fetch_long_polls(broker):
    broker.catalog.create_topic("t", 1, {})
    raw = Raw(broker.config.port)
    fetch_corr = raw.send(FETCH, 11, _fetch_body("t", 0, 0, max_wait_ms=10_000))
    produce_corr = raw.send(PRODUCE, 9, _produce_body("t", 0, _batch(4)))
    first = raw.receive()
    second = raw.receive()
    assert first[0] == fetch_corr and second[0] == produce_corr
    # the produce woke the parked fetch, which returned the batch rather than waiting out its 10 s
    records = first[3].responses[0].partitions[0].records
    assert len(records) > 0
    assert second[3].responses[0].partition_responses[0].base_offset == 0
    raw.close()


LIST_OFFSETS = by_name("ListOffsets")


def _list_offsets(raw: Raw, topic: str, timestamp: int) -> tuple[int, int]:
    R = LIST_OFFSETS.Request
    T = R.ListOffsetsTopic
    raw.send(LIST_OFFSETS, 5, R(replica_id=-1, isolation_level=0, topics=[
        T(name=topic, partitions=[T.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1, timestamp=timestamp)])
    ]))
    p = raw.receive()[3].topics[0].partitions[0]
    assert p.error_code == 0
    return p.offset, p.timestamp


def test_retention_moves_the_log_start_and_listoffsets_and_fetch_follow(tmp_path):

    props = {"log.retention.check.interval.ms": "50", "auto.create.topics.enable": "false"}
    with running_broker(tmp_path, **props) as broker:
        broker.catalog.create_topic("r", 1, {"segment.bytes": "1024", "retention.bytes": "2048"})
        raw = Raw(broker.config.port)
        for _ in range(20):
            raw.send(PRODUCE, 9, _produce_body("r", 0, _batch(20)))
            assert raw.receive()[3].responses[0].partition_responses[0].error_code == 0
        assert _list_offsets(raw, "r", -1)[0] == 400
        deadline = time.monotonic() + 10
        earliest = 0
        while earliest == 0 and time.monotonic() < deadline:
            earliest = _list_offsets(raw, "r", -2)[0]
        assert 0 < earliest < 400, "retention never moved the log start offset"
        raw.send(FETCH, 11, _fetch_body("r", 0, 0, max_wait_ms=0))
        part = raw.receive()[3].responses[0].partitions[0]
        assert part.error_code == ErrorCode.OFFSET_OUT_OF_RANGE
        assert part.log_start_offset == earliest
        raw.send(FETCH, 11, _fetch_body("r", 0, earliest, max_wait_ms=0))
        assert raw.receive()[3].responses[0].partitions[0].error_code == 0
        raw.close()


def test_large_fetch_response_to_a_slow_reader_arrives_whole(tmp_path):
    """A 24 MB response cannot go out in one send: partial sends must resume exactly where they stopped."""

    with running_broker(tmp_path) as broker:
        broker.catalog.create_topic("big", 1, {})
        raw = Raw(broker.config.port)
        payloads = [bytes([i % 251]) * 100_000 for i in range(240)]
        for start in range(0, len(payloads), 8):  # batches under max.message.bytes
            b = BatchBuilder()
            for i, value in enumerate(payloads[start : start + 8]):
                b.append(value=value, key=None, timestamp=1_700_000_000_000 + i)
            raw.send(PRODUCE, 9, _produce_body("big", 0, b.build()))
            assert raw.receive()[3].responses[0].partition_responses[0].error_code == 0
        body = _fetch_body("big", 0, 0, max_wait_ms=0)
        body = body._replace(max_bytes=64 << 20, topics=[body.topics[0]._replace(
            partitions=[body.topics[0].partitions[0]._replace(partition_max_bytes=64 << 20)])])
        raw.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        raw.send(FETCH, 11, body)
        part = raw.receive()[3].responses[0].partitions[0]
        from groupstream.protocol.records.batch import iter_record_batches

        values = [r.value for batch in iter_record_batches(part.records) for r in batch.records()]
        assert values == payloads
        # the connection still works afterwards
        raw.send(METADATA, 9, METADATA.Request(topics=[]))
        assert raw.receive()[3].brokers[0].node_id == broker.config.node_id
        raw.close()
