"""Two answers mypy found wanting once the handlers' bodies were typed (issue 14, typed message bodies).

A Metadata v10+ topic may carry a null name: with no topic id either, the broker looked the topic up by the name
None. A CreateTopics config value may be null: the config layer refused it as a malformed string. Kafka refuses
the first with INVALID_REQUEST and answers the second with INVALID_CONFIG, "Null value not supported for topic
configs: <names>".
"""

from __future__ import annotations

from pathlib import Path

from broker.test_bad_input import Raw
from groupstream.protocol.bodies import CREATE_TOPICS, METADATA
from groupstream.protocol.error_codes import ErrorCode
from groupstream.protocol.primitives import ZERO_UUID
from support.inprocess import running_broker


def test_a_metadata_topic_with_neither_name_nor_id_is_an_invalid_request(tmp_path: Path) -> None:
    R = METADATA.Request
    with running_broker(tmp_path) as broker:
        broker.catalog.create_topic("named", 1, {})
        raw = Raw(broker.config.port)
        try:
            for version in (10, 12):
                topics = [R.MetadataRequestTopic(name=None, topic_id=ZERO_UUID), R.MetadataRequestTopic(name="named")]
                raw.send(METADATA, version, R(topics=topics, allow_auto_topic_creation=False))
                nameless, named = raw.receive()[3].topics
                none = None if version >= 12 else ""  # the answer's name is nullable from v12
                assert (nameless.error_code, nameless.name) == (ErrorCode.INVALID_REQUEST, none)
                assert (named.error_code, named.name, len(named.partitions)) == (0, "named", 1)
        finally:
            raw.close()


def test_a_null_topic_config_value_is_refused_as_kafka_does(tmp_path: Path) -> None:
    R = CREATE_TOPICS.Request
    T = R.CreatableTopic
    C = T.CreatableTopicConfig
    with running_broker(tmp_path) as broker:
        raw = Raw(broker.config.port)
        try:
            configs = [C(name="retention.ms", value=None), C(name="cleanup.policy", value="compact"),
                       C(name="segment.ms", value=None)]  # fmt: skip
            topic = T(name="t", num_partitions=1, replication_factor=1, configs=configs)
            raw.send(CREATE_TOPICS, 5, R(topics=[topic], timeout_ms=5000))
            (answer,) = raw.receive()[3].topics
            assert answer.error_code == ErrorCode.INVALID_CONFIG
            assert answer.error_message == "Null value not supported for topic configs: retention.ms,segment.ms"
            assert broker.catalog.get_topic("t") is None
        finally:
            raw.close()
