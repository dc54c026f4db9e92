"""Authentication shared by the broker (and, later, the client): SCRAM and PLAIN as Kafka profiles them, the SASL
session rules of Kafka's broker, SCRAM credential storage, TLS contexts from Kafka's ``ssl.*`` properties, and
the principal a certificate maps to.

The SASL and SCRAM layers are pure (no sockets, clocks or randomness: nonces and times are passed in), so their
rules are tested without a network; TLS goes through Python's ``ssl`` (OpenSSL), never our own cryptography.
"""
