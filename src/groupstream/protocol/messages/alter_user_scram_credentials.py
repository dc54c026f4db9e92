"""AlterUserScramCredentials (key 51): add, replace or delete users' SCRAM credentials.

Version 0 only (what Kafka 4.x serves), flexible. An upsertion carries the salt and the salted password the client
derived (the password itself never travels); the broker keeps only the stored and server keys made from it.
Mechanism 1 is SCRAM-SHA-256, 2 SCRAM-SHA-512. Peers: confluent-kafka's and kafka-python 3.0's admin clients.
"""

from groupstream.protocol.schema import NULL, Api, Array, Field, Struct

API = Api(
    key=51,
    name="AlterUserScramCredentials",
    valid="0",
    flexible="0+",
    request=Struct(
        "AlterUserScramCredentialsRequest",
        Field(
            "deletions",
            Array(
                Struct(
                    "ScramCredentialDeletion",
                    Field("name", "string"),
                    Field("mechanism", "int8"),
                )
            ),
        ),
        Field(
            "upsertions",
            Array(
                Struct(
                    "ScramCredentialUpsertion",
                    Field("name", "string"),
                    Field("mechanism", "int8"),
                    Field("iterations", "int32"),
                    Field("salt", "bytes"),
                    Field("salted_password", "bytes"),
                )
            ),
        ),
    ),
    response=Struct(
        "AlterUserScramCredentialsResponse",
        Field("throttle_time_ms", "int32"),
        Field(
            "results",
            Array(
                Struct(
                    "AlterUserScramCredentialsResult",
                    Field("user", "string"),
                    Field("error_code", "int16"),
                    Field("error_message", "string", nullable="0+", default=NULL),
                )
            ),
        ),
    ),
)
