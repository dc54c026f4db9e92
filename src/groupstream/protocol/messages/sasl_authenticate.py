"""SaslAuthenticate (key 36): one SASL token each way, after a SaslHandshake v1.

Versions 0-2 (what Kafka 4.x serves). v1 adds the session lifetime (KIP-368: a client that sends v1 or later can
re-authenticate, and the broker closes a connection used after its session expired); v2 is flexible.
Peers: librdkafka sends up to 1, kafka-python 3.0 up to 2, aiokafka 0.14 sends 0.
"""

from groupstream.protocol.schema import NULL, Api, Field, Struct

API = Api(
    key=36,
    name="SaslAuthenticate",
    valid="0-2",
    flexible="2+",
    request=Struct(
        "SaslAuthenticateRequest",
        Field("auth_bytes", "bytes"),
    ),
    response=Struct(
        "SaslAuthenticateResponse",
        Field("error_code", "int16"),
        Field("error_message", "string", nullable="0+", default=NULL),
        Field("auth_bytes", "bytes", default=b""),
        Field("session_lifetime_ms", "int64", versions="1+", default=0, ignorable=True),
    ),
)
