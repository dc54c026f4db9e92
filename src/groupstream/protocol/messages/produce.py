"""Produce (key 0): record batches in, base offsets out.

Versions 3-13 (Kafka 4.x serves 3-13; v13 names topics by id, KIP-516). Below v3 the batches are message
format v0/v1, which we do not store, so we start at 3. Kafka 4 brokers still *advertise* min version 0 because
older librdkafka refuses a broker whose Produce range starts above 0 (KAFKA-18659) and then reject v0-2; that
is the broker's ApiVersions business, not the codec's. Peers: librdkafka 2.15+ sends up to 10, kafka-python 3.0
up to 9, aiokafka 0.14 up to 7.
"""

from groupstream.protocol.messages.common_structs import current_leader, node_endpoints
from groupstream.protocol.schema import NULL, Api, Array, Field, Struct

API = Api(
    key=0,
    name="Produce",
    valid="3-13",
    flexible="9+",
    request=Struct(
        "ProduceRequest",
        Field("transactional_id", "string", versions="3+", nullable="3+", default=NULL),
        Field("acks", "int16"),
        Field("timeout_ms", "int32"),
        Field(
            "topic_data",
            Array(
                Struct(
                    "TopicProduceData",
                    Field("name", "string", versions="0-12", ignorable=True),
                    Field("topic_id", "uuid", versions="13+", ignorable=True),
                    Field(
                        "partition_data",
                        Array(
                            Struct(
                                "PartitionProduceData",
                                Field("index", "int32"),
                                Field("records", "records", nullable="0+"),
                            )
                        ),
                    ),
                )
            ),
        ),
    ),
    response=Struct(
        "ProduceResponse",
        Field(
            "responses",
            Array(
                Struct(
                    "TopicProduceResponse",
                    Field("name", "string", versions="0-12", ignorable=True),
                    Field("topic_id", "uuid", versions="13+", ignorable=True),
                    Field(
                        "partition_responses",
                        Array(
                            Struct(
                                "PartitionProduceResponse",
                                Field("index", "int32"),
                                Field("error_code", "int16"),
                                Field("base_offset", "int64"),
                                Field(
                                    "log_append_time_ms", "int64", versions="2+", default=-1, ignorable=True
                                ),
                                Field("log_start_offset", "int64", versions="5+", default=-1, ignorable=True),
                                Field(
                                    "record_errors",
                                    Array(
                                        Struct(
                                            "BatchIndexAndErrorMessage",
                                            Field("batch_index", "int32", versions="8+"),
                                            Field(
                                                "batch_index_error_message",
                                                "string",
                                                versions="8+",
                                                nullable="8+",
                                                default=NULL,
                                            ),
                                        )
                                    ),
                                    versions="8+",
                                    ignorable=True,
                                ),
                                Field(
                                    "error_message",
                                    "string",
                                    versions="8+",
                                    nullable="8+",
                                    default=NULL,
                                    ignorable=True,
                                ),
                                current_leader(since=10, tag=0),
                            )
                        ),
                    ),
                )
            ),
        ),
        Field("throttle_time_ms", "int32", versions="1+", default=0, ignorable=True),
        node_endpoints(since=10),
    ),
)
