"""WriteTxnMarkers (key 27): write COMMIT/ABORT markers for producers' transactions to partitions this broker
leads. Kafka's transaction coordinators send it to partition leaders; Kafka's Admin sends it too, to abort a
hanging transaction (``kafka-transactions.sh abort``). Versions 1-2 (Kafka 4.x removed version 0; version 2
adds the marker's transaction version), flexible from 1. Peers: Kafka's Admin; librdkafka and kafka-python do
not send it.
"""

from groupstream.protocol.schema import Api, Array, Field, Struct

API = Api(
    key=27,
    name="WriteTxnMarkers",
    valid="1-2",
    flexible="1+",
    request=Struct(
        "WriteTxnMarkersRequest",
        Field(
            "markers",
            Array(
                Struct(
                    "WritableTxnMarker",
                    Field("producer_id", "int64"),
                    Field("producer_epoch", "int16"),
                    Field("transaction_result", "bool"),
                    Field(
                        "topics",
                        Array(
                            Struct(
                                "WritableTxnMarkerTopic",
                                Field("name", "string"),
                                Field("partition_indexes", Array("int32")),
                            )
                        ),
                    ),
                    Field("coordinator_epoch", "int32"),
                    Field("transaction_version", "int8", versions="2+", ignorable=True, default=0),
                )
            ),
        ),
    ),
    response=Struct(
        "WriteTxnMarkersResponse",
        Field(
            "markers",
            Array(
                Struct(
                    "WritableTxnMarkerResult",
                    Field("producer_id", "int64"),
                    Field(
                        "topics",
                        Array(
                            Struct(
                                "WritableTxnMarkerTopicResult",
                                Field("name", "string"),
                                Field(
                                    "partitions",
                                    Array(
                                        Struct(
                                            "WritableTxnMarkerPartitionResult",
                                            Field("partition_index", "int32"),
                                            Field("error_code", "int16"),
                                        )
                                    ),
                                ),
                            )
                        ),
                    ),
                )
            ),
        ),
    ),
)
