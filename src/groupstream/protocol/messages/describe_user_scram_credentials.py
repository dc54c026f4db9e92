"""DescribeUserScramCredentials (key 50): which SCRAM mechanisms (and iteration counts) each user has.

Version 0 only (what Kafka 4.x serves), flexible. A null or empty user list describes every user. Never returns
salts or keys. Peers: confluent-kafka's and kafka-python 3.0's admin clients.
"""

from groupstream.protocol.schema import NULL, Api, Array, Field, Struct

API = Api(
    key=50,
    name="DescribeUserScramCredentials",
    valid="0",
    flexible="0+",
    request=Struct(
        "DescribeUserScramCredentialsRequest",
        Field("users", Array(Struct("UserName", Field("name", "string"))), nullable="0+", default=NULL),
    ),
    response=Struct(
        "DescribeUserScramCredentialsResponse",
        Field("throttle_time_ms", "int32"),
        Field("error_code", "int16"),
        Field("error_message", "string", nullable="0+", default=NULL),
        Field(
            "results",
            Array(
                Struct(
                    "DescribeUserScramCredentialsResult",
                    Field("user", "string"),
                    Field("error_code", "int16"),
                    Field("error_message", "string", nullable="0+", default=NULL),
                    Field(
                        "credential_infos",
                        Array(
                            Struct(
                                "CredentialInfo",
                                Field("mechanism", "int8"),
                                Field("iterations", "int32"),
                            )
                        ),
                    ),
                )
            ),
        ),
    ),
)
