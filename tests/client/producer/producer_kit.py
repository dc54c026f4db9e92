"""Shared pieces for the pure producer tests: a metadata cache filled from a response, a sender wired to a
manual clock, and Produce responses built with the real codec's classes."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from groupstream.client.net.metadata import MetadataCache
from groupstream.client.net.requests import ClientResponse, PollResult, UnsentRequest
from groupstream.client.producer.accumulator import RecordAccumulator
from groupstream.client.producer.batch import ProducerBatch
from groupstream.client.producer.idempotence import IdempotenceManager
from groupstream.client.producer.sender import Sender, SenderConfig
from groupstream.protocol.messages import by_name
from groupstream.protocol.records.batch_header import HEADER_SIZE

METADATA = by_name("Metadata")
PRODUCE = by_name("Produce")
INIT = by_name("InitProducerId")
RECORD_SIZE = 30


def metadata(leaders: dict[str, list[int]], brokers: tuple[int, ...] = (1, 2)) -> MetadataCache:
    R: Any = METADATA.Response
    P = R.MetadataResponseTopic.MetadataResponsePartition
    topics = [
        R.MetadataResponseTopic(
            error_code=0, name=name, topic_id=uuid.uuid5(uuid.NAMESPACE_DNS, name),
            partitions=[P(error_code=0, partition_index=i, leader_id=lead) for i, lead in enumerate(ls)],
        )
        for name, ls in leaders.items()
    ]  # fmt: skip
    cache = MetadataCache(max_age_ms=0)
    cache.add_topics(leaders)
    cache.apply(
        R(brokers=[R.MetadataResponseBroker(node_id=b, host="h", port=b) for b in brokers], topics=topics),
        12,
        0,
    )
    cache.poll(0)  # let the cache consider its first request sent, so tests see only producer requests
    return cache


def accumulator(
    batch_size: int = 100, linger_ms: int = 10, delivery_timeout_ms: int = 10_000
) -> RecordAccumulator:
    """``batch_size`` counts the records' bytes: the batch header comes on top."""
    return RecordAccumulator(
        batch_size=HEADER_SIZE + batch_size,
        linger_ms=linger_ms,
        compression=0,
        delivery_timeout_ms=delivery_timeout_ms,
    )


def add(
    acc: RecordAccumulator, topic: str, partition: int, now_ms: int, value: bytes = b"v"
) -> tuple[ProducerBatch, int]:
    """Append a record of RECORD_SIZE bytes (a value of 23 bytes, deltas under 64); returns its batch and index."""
    return acc.append(topic, partition, now_ms, None, value.ljust(23, b"."), None, now_ms)


@dataclass
class Done:
    batch: ProducerBatch
    base_offset: int
    log_append_time: int
    error: BaseException | None


@dataclass
class Rig:
    """A sender with its accumulator, metadata and (optionally) idempotence, completions recorded."""

    acc: RecordAccumulator
    meta: MetadataCache
    sender: Sender
    idem: IdempotenceManager | None
    done: list[Done] = field(default_factory=list)

    def poll(self, now_ms: int) -> list[UnsentRequest]:
        out: list[UnsentRequest] = []
        if self.idem is not None:
            out += self.idem.poll(now_ms).unsent_requests
        out += self.sender.poll(now_ms).unsent_requests
        return out

    def poll_result(self, now_ms: int) -> PollResult:
        return self.sender.poll(now_ms)

    def grant_producer_id(self, now_ms: int, pid: int = 7, epoch: int = 0) -> None:
        assert self.idem is not None
        (req,) = self.idem.poll(now_ms).unsent_requests
        assert req.api is INIT
        reply(req, INIT.Response(error_code=0, producer_id=pid, producer_epoch=epoch), now_ms)


def rig(
    leaders: dict[str, list[int]] | None = None,
    *,
    idempotent: bool = True,
    batch_size: int = 100,
    linger_ms: int = 10,
    delivery_timeout_ms: int = 10_000,
    **sender_cfg: Any,
) -> Rig:
    acc = accumulator(batch_size, linger_ms, delivery_timeout_ms)
    meta = metadata(leaders or {"t": [1, 1]})
    done: list[Done] = []
    holder: list[Sender] = []
    idem = (
        IdempotenceManager(retry_backoff_ms=100, retry_backoff_max_ms=1000,
                           in_flight_batches=lambda: holder[0].in_flight_batches)
        if idempotent else None
    )  # fmt: skip
    cfg = SenderConfig(delivery_timeout_ms=delivery_timeout_ms, **sender_cfg)
    sender = Sender(cfg, acc, meta, idem, lambda b, o, t, e: done.append(Done(b, o, t, e)))
    holder.append(sender)
    return Rig(acc, meta, sender, idem, done)


def reply(
    req: UnsentRequest, body: Any, now_ms: int, version: int = 12, error: BaseException | None = None
) -> None:
    req.handler(ClientResponse(req, req.node_id or 0, version, body, error, now_ms))


def produce_response(
    req: UnsentRequest, codes: dict[tuple[str, int], int] | None = None, base: int = 0
) -> Any:
    """A Produce response for every partition in ``req``: error codes from ``codes`` (default NONE), base
    offsets counting up from ``base``."""
    R: Any = PRODUCE.Response
    TR = R.TopicProduceResponse
    PR = TR.PartitionProduceResponse
    body = req.body_for(12)
    topics = []
    for td in body.topic_data:
        parts = []
        for pd in td.partition_data:
            code = (codes or {}).get((td.name, pd.index), 0)
            parts.append(PR(index=pd.index, error_code=code, base_offset=base if code == 0 else -1))
        topics.append(TR(name=td.name, partition_responses=parts))
    return R(responses=topics)


def batches_in(req: UnsentRequest) -> list[tuple[str, int, int, int]]:
    """(topic, partition, base sequence, record count) of each batch a Produce request carries."""
    from groupstream.protocol.records import RecordBatch

    out = []
    for td in req.body_for(12).topic_data:
        for pd in td.partition_data:
            b = RecordBatch(pd.records)
            out.append((td.name, pd.index, b.base_sequence, b.records_count))
    return out
