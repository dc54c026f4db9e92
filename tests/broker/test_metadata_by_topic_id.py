"""Metadata v10+ by topic id: Kafka resolves a request topic by its id whenever the id is set.

Found with Apache Kafka's Java consumer (tests/java/test_java_groups.py): under a KIP-848 regex
subscription it asks for the topics of its assignment by id with the name left empty ("", not null). We
looked such a topic up by the name "" and answered INVALID_TOPIC_EXCEPTION, forever, so the consumer never
learnt the names of the partitions it was assigned and consumed nothing.
"""

from __future__ import annotations

import uuid
from pathlib import Path

from broker.test_bad_input import Raw
from groupstream.protocol.error_codes import ErrorCode
from groupstream.protocol.messages import by_name
from support.inprocess import running_broker

METADATA = by_name("Metadata")


def _by_id(topic_id: uuid.UUID, name: str | None) -> object:
    R = METADATA.Request
    return R(topics=[R.MetadataRequestTopic(topic_id=topic_id, name=name)], allow_auto_topic_creation=False,
             include_topic_authorized_operations=False)  # fmt: skip


def test_a_topic_asked_for_by_id_with_an_empty_or_null_name_is_found(tmp_path: Path) -> None:
    with running_broker(tmp_path) as broker:
        topic = broker.catalog.create_topic("by-id", 3, {})
        raw = Raw(broker.config.port)
        try:
            for version in (10, 12, 13):
                for name in ("", None):
                    raw.send(METADATA, version, _by_id(topic.topic_id, name))
                    (answer,) = raw.receive()[3].topics
                    assert (answer.error_code, answer.name, answer.topic_id) == (0, "by-id", topic.topic_id), (
                        version, name, answer)  # fmt: skip
                    assert len(answer.partitions) == 3
            raw.send(METADATA, 13, _by_id(uuid.uuid4(), ""))
            assert raw.receive()[3].topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_ID
        finally:
            raw.close()
