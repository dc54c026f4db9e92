"""InitProducerId (key 22): a producer id and epoch for idempotent and transactional producers.

Versions 0-5 (what Kafka 4.x serves; v6, two-phase commit of KIP-939, is still marked unstable there). Peers:
librdkafka 2.15+ and kafka-python 3.0 send up to 4, aiokafka 0.14 sends 0.
"""

from groupstream.protocol.schema import Api, Field, Struct

API = Api(
    key=22,
    name="InitProducerId",
    valid="0-5",
    flexible="2+",
    request=Struct(
        "InitProducerIdRequest",
        Field("transactional_id", "string", nullable="0+"),
        Field("transaction_timeout_ms", "int32"),
        Field("producer_id", "int64", versions="3+", default=-1),
        Field("producer_epoch", "int16", versions="3+", default=-1),
    ),
    response=Struct(
        "InitProducerIdResponse",
        Field("throttle_time_ms", "int32", ignorable=True),
        Field("error_code", "int16"),
        Field("producer_id", "int64", default=-1),
        Field("producer_epoch", "int16"),
    ),
)
