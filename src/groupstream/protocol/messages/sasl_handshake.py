"""SaslHandshake (key 17): the client names the SASL mechanism it will use; the answer lists the enabled ones.

Versions 0-1 (what Kafka 4.x serves). After v0 the SASL tokens follow as bare size-prefixed frames; after v1 they
travel in SaslAuthenticate requests. Never flexible: Kafka cannot bump this API (KAFKA-9577), so v1 is final.
Peers: librdkafka, kafka-python 3.0 and aiokafka 0.14 send v1 to a broker that lists it.
"""

from groupstream.protocol.schema import Api, Array, Field, Struct

API = Api(
    key=17,
    name="SaslHandshake",
    valid="0-1",
    flexible="",
    request=Struct(
        "SaslHandshakeRequest",
        Field("mechanism", "string"),
    ),
    response=Struct(
        "SaslHandshakeResponse",
        Field("error_code", "int16"),
        Field("mechanisms", Array("string")),
    ),
)
