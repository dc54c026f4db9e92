"""AddOffsetsToTxn (key 25): a transactional producer announces it will commit a group's offsets.

Versions 0-4 (what Kafka 4.x serves). Peers: librdkafka 2.15+ and aiokafka 0.14 send 0, kafka-python 3.0 up
to 3.
"""

from groupstream.protocol.schema import Api, Field, Struct

API = Api(
    key=25,
    name="AddOffsetsToTxn",
    valid="0-4",
    flexible="3+",
    request=Struct(
        "AddOffsetsToTxnRequest",
        Field("transactional_id", "string"),
        Field("producer_id", "int64"),
        Field("producer_epoch", "int16"),
        Field("group_id", "string"),
    ),
    response=Struct(
        "AddOffsetsToTxnResponse",
        Field("throttle_time_ms", "int32"),
        Field("error_code", "int16"),
    ),
)
