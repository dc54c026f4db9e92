"""ListTransactions (key 66): the transactional ids a broker coordinates, filtered, for admin tools.

Versions 0-2 (what Kafka 4.x serves; flexible from 0): v1 adds ``duration_filter`` (transactions running
longer than it, KIP-994), v2 ``transactional_id_pattern`` (a regular expression, KIP-1152; an invalid one is
answered INVALID_REGULAR_EXPRESSION). Sent to every broker by admin clients (``kafka-transactions.sh list``).
"""

from groupstream.protocol.schema import NULL, Api, Array, Field, Struct

API = Api(
    key=66,
    name="ListTransactions",
    valid="0-2",
    flexible="0+",
    request=Struct(
        "ListTransactionsRequest",
        Field("state_filters", Array("string")),
        Field("producer_id_filters", Array("int64")),
        Field("duration_filter", "int64", versions="1+", default=-1),
        Field("transactional_id_pattern", "string", versions="2+", nullable="2+", default=NULL),
    ),
    response=Struct(
        "ListTransactionsResponse",
        Field("throttle_time_ms", "int32"),
        Field("error_code", "int16"),
        Field("unknown_state_filters", Array("string")),
        Field(
            "transaction_states",
            Array(
                Struct(
                    "ListedTransactionState",
                    Field("transactional_id", "string"),
                    Field("producer_id", "int64"),
                    Field("transaction_state", "string"),
                )
            ),
        ),
    ),
)
