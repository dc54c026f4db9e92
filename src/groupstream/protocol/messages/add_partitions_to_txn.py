"""AddPartitionsToTxn (key 24): a transactional producer registers the partitions it is about to write.

Versions 0-5 (what Kafka 4.x serves). v0-3 carry one transaction's fields at the top level; v4+ batch several
transactions (broker to coordinator, with ``verify_only``). Peers: librdkafka 2.15+ and aiokafka 0.14 send 0,
kafka-python 3.0 up to 3.
"""

from groupstream.protocol.schema import Api, Array, Field, Struct

_TOPIC = Struct(
    "AddPartitionsToTxnTopic",
    Field("name", "string"),
    Field("partitions", Array("int32")),
)

_TOPIC_RESULT = Struct(
    "AddPartitionsToTxnTopicResult",
    Field("name", "string"),
    Field(
        "results_by_partition",
        Array(
            Struct(
                "AddPartitionsToTxnPartitionResult",
                Field("partition_index", "int32"),
                Field("partition_error_code", "int16"),
            )
        ),
    ),
)

API = Api(
    key=24,
    name="AddPartitionsToTxn",
    valid="0-5",
    flexible="3+",
    request=Struct(
        "AddPartitionsToTxnRequest",
        Field(
            "transactions",
            Array(
                Struct(
                    "AddPartitionsToTxnTransaction",
                    Field("transactional_id", "string", versions="4+"),
                    Field("producer_id", "int64", versions="4+"),
                    Field("producer_epoch", "int16", versions="4+"),
                    Field("verify_only", "bool", versions="4+", default=False),
                    Field("topics", Array(_TOPIC), versions="4+"),
                )
            ),
            versions="4+",
        ),
        Field("v3_and_below_transactional_id", "string", versions="0-3"),
        Field("v3_and_below_producer_id", "int64", versions="0-3"),
        Field("v3_and_below_producer_epoch", "int16", versions="0-3"),
        Field("v3_and_below_topics", Array(_TOPIC), versions="0-3"),
    ),
    response=Struct(
        "AddPartitionsToTxnResponse",
        Field("throttle_time_ms", "int32"),
        Field("error_code", "int16", versions="4+", ignorable=True),
        Field(
            "results_by_transaction",
            Array(
                Struct(
                    "AddPartitionsToTxnResult",
                    Field("transactional_id", "string", versions="4+"),
                    Field("topic_results", Array(_TOPIC_RESULT), versions="4+"),
                )
            ),
            versions="4+",
        ),
        Field("results_by_topic_v3_and_below", Array(_TOPIC_RESULT), versions="0-3"),
    ),
)
