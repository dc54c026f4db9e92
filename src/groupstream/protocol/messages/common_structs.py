"""Nested structs and defaults that Kafka's message specs repeat in more than one message, defined once here.

Kafka's specs name these common structs (``LeaderIdAndEpoch``, ``NodeEndpoint``) and give each message its
own copy whose fields carry that message's version numbers; here one factory builds each copy, so the fields
cannot drift between messages. This module defines no ``API``: the registry lists message modules by name.
"""

from groupstream.protocol.schema import NULL, Array, Field, Struct

__all__ = ["NO_AUTHORIZED_OPERATIONS", "current_leader", "node_endpoints"]

NO_AUTHORIZED_OPERATIONS = -(2**31)
"""Kafka's INT32_MIN in an ``*_authorized_operations`` field: the operations were not requested (or not
given)."""


def current_leader(since: int, tag: int) -> Field:
    """The tagged ``current_leader`` of a partition, as the answering broker knows it (Fetch from v12, Produce
    from v10): a client sent to a node that no longer leads updates its metadata from it (KIP-951)."""
    v = f"{since}+"
    return Field(
        "current_leader",
        Struct(
            "LeaderIdAndEpoch",
            Field("leader_id", "int32", versions=v, default=-1),
            Field("leader_epoch", "int32", versions=v, default=-1),
        ),
        versions=v,
        tag=tag,
        tagged=v,
    )


def node_endpoints(since: int) -> Field:
    """The tagged ``node_endpoints`` that tell a client where the new leaders named by ``current_leader``
    listen (Fetch from v16, Produce from v10, KIP-951)."""
    v = f"{since}+"
    return Field(
        "node_endpoints",
        Array(
            Struct(
                "NodeEndpoint",
                Field("node_id", "int32", versions=v),
                Field("host", "string", versions=v),
                Field("port", "int32", versions=v),
                Field("rack", "string", versions=v, nullable=v, default=NULL),
            )
        ),
        versions=v,
        tag=0,
        tagged=v,
    )
