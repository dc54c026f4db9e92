"""A synchronous Admin: topics, partitions, configs, offsets and consumer groups, over the network core driven
on the calling thread (`SyncClient`).

Topic calls are one request to the bootstrap broker it connected to (a Kafka cluster forwards admin requests to
its controller); ListOffsets, DeleteRecords, DescribeProducers and WriteTxnMarkers (aborting a hanging transaction)
go to each partition's leader, ElectLeaders to the controller. Group calls go to the group's
coordinator: FindCoordinator first, then the request, both retried while the answer is NOT_COORDINATOR,
COORDINATOR_NOT_AVAILABLE or COORDINATOR_LOAD_IN_PROGRESS (a coordinator moving or loading its shard) until
``request.timeout.ms`` runs out. ListGroups asks every broker, since each lists only the groups it
coordinates. Per-topic (per-group) errors from the broker raise `KafkaError` naming the topic (group); calls
over several finish the request first and then raise for the first that failed (the others took effect).

The calls live in layers, each a class the next extends: channels (`base`), topics and offsets (`topics`),
groups and coordinators (`groups`; DescribeGroups shows groups of both kinds in classic form, and
ConsumerGroupDescribe the epochs and target assignments of KIP-848 ``consumer`` groups), ACLs (`acls`, a
layer beside them, with the authorizer's own binding and filter types); `types` holds what they take and return.
"""

from __future__ import annotations

from groupstream.client.admin.acls import AclCalls
from groupstream.client.admin.transactions import (
    AbortTransactionSpec,
    OpenTransaction,
    ProducerState,
    TransactionCalls,
    TransactionDescription,
    TransactionListing,
)
from groupstream.client.admin.types import (
    ConfigEntry,
    ConsumerGroupDescription,
    ConsumerGroupMember,
    CreatedTopic,
    GroupDescription,
    GroupMember,
    ListedGroup,
    ListedOffset,
    NewTopic,
    OffsetAndMetadata,
    PartitionLag,
    parse_group_state,
    parse_group_type,
    parse_offset_spec,
)
from groupstream.client.metadata import TopicDescription

__all__ = [
    "AbortTransactionSpec",
    "Admin",
    "ConfigEntry",
    "ConsumerGroupDescription",
    "ConsumerGroupMember",
    "CreatedTopic",
    "GroupDescription",
    "GroupMember",
    "ListedGroup",
    "ListedOffset",
    "NewTopic",
    "OffsetAndMetadata",
    "OpenTransaction",
    "PartitionLag",
    "ProducerState",
    "TopicDescription",
    "TransactionDescription",
    "TransactionListing",
    "parse_group_state",
    "parse_group_type",
    "parse_offset_spec",
]


class Admin(TransactionCalls, AclCalls):
    """``Admin({"bootstrap.servers": "127.0.0.1:9092"})``; also ``Admin(bootstrap_servers=...)``. Not thread-safe."""
