"""DescribeTransactions (key 65): a transaction coordinator's view of transactional ids, for admin tools.

Version 0 only (what Kafka 4.x serves; flexible from 0). Asked of the coordinator that owns each id (admin
clients route by FindCoordinator key_type=1). Peers: kafka-python 3.0 and librdkafka's Admin do not send it;
Kafka's Admin (``kafka-transactions.sh describe``) and our Admin do.
"""

from groupstream.protocol.schema import Api, Array, Field, Struct

API = Api(
    key=65,
    name="DescribeTransactions",
    valid="0",
    flexible="0+",
    request=Struct(
        "DescribeTransactionsRequest",
        Field("transactional_ids", Array("string")),
    ),
    response=Struct(
        "DescribeTransactionsResponse",
        Field("throttle_time_ms", "int32", ignorable=True),
        Field(
            "transaction_states",
            Array(
                Struct(
                    "TransactionState",
                    Field("error_code", "int16"),
                    Field("transactional_id", "string"),
                    Field("transaction_state", "string"),
                    Field("transaction_timeout_ms", "int32"),
                    Field("transaction_start_time_ms", "int64"),
                    Field("producer_id", "int64"),
                    Field("producer_epoch", "int16"),
                    Field(
                        "topics",
                        Array(
                            Struct(
                                "TopicData",
                                Field("topic", "string"),
                                Field("partitions", Array("int32")),
                            )
                        ),
                    ),
                )
            ),
        ),
    ),
)
