"""EndTxn (key 26): commit or abort a transaction.

Versions 0-5 (what Kafka 4.x serves; v5 returns the bumped producer epoch, KIP-890). Peers: librdkafka 2.15+
sends up to 1, kafka-python 3.0 up to 3, aiokafka 0.14 sends 0.
"""

from groupstream.protocol.schema import Api, Field, Struct

API = Api(
    key=26,
    name="EndTxn",
    valid="0-5",
    flexible="3+",
    request=Struct(
        "EndTxnRequest",
        Field("transactional_id", "string"),
        Field("producer_id", "int64"),
        Field("producer_epoch", "int16"),
        Field("committed", "bool"),
    ),
    response=Struct(
        "EndTxnResponse",
        Field("throttle_time_ms", "int32"),
        Field("error_code", "int16"),
        Field("producer_id", "int64", versions="5+", default=-1, ignorable=True),
        Field("producer_epoch", "int16", versions="5+", default=-1, ignorable=True),
    ),
)
