"""Two answers mypy found wanting once the handlers' bodies were typed (issue 14, typed message bodies).

A Metadata v10+ topic may carry a null name: with no topic id either, the broker looked the topic up by the
name None (answering INVALID_TOPIC_EXCEPTION, which it still does from v12); Kafka refuses a null name before
v12 (INVALID_REQUEST). A CreateTopics config value may be null: the config layer refused it as a malformed
string; Kafka answers INVALID_CONFIG, "Null value not supported for topic configs: <names>". The config helpers,
now typed, still apply every IncrementalAlterConfigs operation.
"""

from __future__ import annotations

from pathlib import Path

from broker.test_bad_input import Raw
from groupstream.protocol.bodies import CREATE_TOPICS, INCREMENTAL_ALTER_CONFIGS, METADATA
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
                expected = (ErrorCode.INVALID_REQUEST, "") if version < 12 else (ErrorCode.INVALID_TOPIC_EXCEPTION, None)
                assert (nameless.error_code, nameless.name) == expected
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


def test_incremental_alter_configs_set_append_subtract_and_delete_through_the_typed_helpers(tmp_path: Path) -> None:
    """The config helpers now take the typed request structs; each operation still lands (cleanup.policy is a
    list config), and a null value to SET is refused before any is applied."""
    R = INCREMENTAL_ALTER_CONFIGS.Request
    Res = R.AlterConfigsResource
    C = Res.AlterableConfig
    set_, delete, append, subtract = 0, 1, 2, 3
    with running_broker(tmp_path) as broker:
        broker.catalog.create_topic("t", 1, {})
        raw = Raw(broker.config.port)

        def alter(*configs: object) -> tuple[int, str | None]:
            raw.send(INCREMENTAL_ALTER_CONFIGS, 1, R(resources=[Res(resource_type=2, resource_name="t",
                                                                     configs=list(configs))]))  # fmt: skip
            (answer,) = raw.receive()[3].responses
            return answer.error_code, answer.error_message

        try:
            assert alter(C(name="cleanup.policy", config_operation=set_, value="delete"))[0] == 0
            assert alter(C(name="cleanup.policy", config_operation=append, value="compact"))[0] == 0
            assert broker.catalog.topic("t").configs["cleanup.policy"] == "delete,compact"
            assert alter(C(name="cleanup.policy", config_operation=subtract, value="delete"))[0] == 0
            assert broker.catalog.topic("t").configs["cleanup.policy"] == "compact"
            code, _ = alter(C(name="retention.ms", config_operation=set_, value=None),
                            C(name="cleanup.policy", config_operation=delete, value=None))  # fmt: skip
            assert code == ErrorCode.INVALID_REQUEST
            assert broker.catalog.topic("t").configs["cleanup.policy"] == "compact"
            assert alter(C(name="cleanup.policy", config_operation=delete, value=None))[0] == 0
            assert "cleanup.policy" not in broker.catalog.topic("t").configs
        finally:
            raw.close()
