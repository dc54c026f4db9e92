"""Kafka's error codes (numbers and names as in Apache Kafka 4.2's ``Errors``), with our own short messages.

Clients branch on the numbers, so they must match Kafka exactly; the messages are ours. ``is_retriable`` follows
which of Kafka's exceptions are retriable: a client may retry such a request unchanged and expect it to succeed
once the cluster settles (a leader moves, a coordinator loads), while any other error needs the caller to act.
"""

from __future__ import annotations

from enum import IntEnum

__all__ = ["ErrorCode", "describe", "is_retriable"]


class ErrorCode(IntEnum):
    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    OFFSET_OUT_OF_RANGE = 1
    CORRUPT_MESSAGE = 2
    UNKNOWN_TOPIC_OR_PARTITION = 3
    INVALID_FETCH_SIZE = 4
    LEADER_NOT_AVAILABLE = 5
    NOT_LEADER_OR_FOLLOWER = 6
    REQUEST_TIMED_OUT = 7
    BROKER_NOT_AVAILABLE = 8
    REPLICA_NOT_AVAILABLE = 9
    MESSAGE_TOO_LARGE = 10
    STALE_CONTROLLER_EPOCH = 11
    OFFSET_METADATA_TOO_LARGE = 12
    NETWORK_EXCEPTION = 13
    COORDINATOR_LOAD_IN_PROGRESS = 14
    COORDINATOR_NOT_AVAILABLE = 15
    NOT_COORDINATOR = 16
    INVALID_TOPIC_EXCEPTION = 17
    RECORD_LIST_TOO_LARGE = 18
    NOT_ENOUGH_REPLICAS = 19
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20
    INVALID_REQUIRED_ACKS = 21
    ILLEGAL_GENERATION = 22
    INCONSISTENT_GROUP_PROTOCOL = 23
    INVALID_GROUP_ID = 24
    UNKNOWN_MEMBER_ID = 25
    INVALID_SESSION_TIMEOUT = 26
    REBALANCE_IN_PROGRESS = 27
    INVALID_COMMIT_OFFSET_SIZE = 28
    TOPIC_AUTHORIZATION_FAILED = 29
    GROUP_AUTHORIZATION_FAILED = 30
    CLUSTER_AUTHORIZATION_FAILED = 31
    INVALID_TIMESTAMP = 32
    UNSUPPORTED_SASL_MECHANISM = 33
    ILLEGAL_SASL_STATE = 34
    UNSUPPORTED_VERSION = 35
    TOPIC_ALREADY_EXISTS = 36
    INVALID_PARTITIONS = 37
    INVALID_REPLICATION_FACTOR = 38
    INVALID_REPLICA_ASSIGNMENT = 39
    INVALID_CONFIG = 40
    NOT_CONTROLLER = 41
    INVALID_REQUEST = 42
    UNSUPPORTED_FOR_MESSAGE_FORMAT = 43
    POLICY_VIOLATION = 44
    OUT_OF_ORDER_SEQUENCE_NUMBER = 45
    DUPLICATE_SEQUENCE_NUMBER = 46
    INVALID_PRODUCER_EPOCH = 47
    INVALID_TXN_STATE = 48
    INVALID_PRODUCER_ID_MAPPING = 49
    INVALID_TRANSACTION_TIMEOUT = 50
    CONCURRENT_TRANSACTIONS = 51
    TRANSACTION_COORDINATOR_FENCED = 52
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
    SECURITY_DISABLED = 54
    OPERATION_NOT_ATTEMPTED = 55
    KAFKA_STORAGE_ERROR = 56
    LOG_DIR_NOT_FOUND = 57
    SASL_AUTHENTICATION_FAILED = 58
    UNKNOWN_PRODUCER_ID = 59
    REASSIGNMENT_IN_PROGRESS = 60
    DELEGATION_TOKEN_AUTH_DISABLED = 61
    DELEGATION_TOKEN_NOT_FOUND = 62
    DELEGATION_TOKEN_OWNER_MISMATCH = 63
    DELEGATION_TOKEN_REQUEST_NOT_ALLOWED = 64
    DELEGATION_TOKEN_AUTHORIZATION_FAILED = 65
    DELEGATION_TOKEN_EXPIRED = 66
    INVALID_PRINCIPAL_TYPE = 67
    NON_EMPTY_GROUP = 68
    GROUP_ID_NOT_FOUND = 69
    FETCH_SESSION_ID_NOT_FOUND = 70
    INVALID_FETCH_SESSION_EPOCH = 71
    LISTENER_NOT_FOUND = 72
    TOPIC_DELETION_DISABLED = 73
    FENCED_LEADER_EPOCH = 74
    UNKNOWN_LEADER_EPOCH = 75
    UNSUPPORTED_COMPRESSION_TYPE = 76
    STALE_BROKER_EPOCH = 77
    OFFSET_NOT_AVAILABLE = 78
    MEMBER_ID_REQUIRED = 79
    PREFERRED_LEADER_NOT_AVAILABLE = 80
    GROUP_MAX_SIZE_REACHED = 81
    FENCED_INSTANCE_ID = 82
    ELIGIBLE_LEADERS_NOT_AVAILABLE = 83
    ELECTION_NOT_NEEDED = 84
    NO_REASSIGNMENT_IN_PROGRESS = 85
    GROUP_SUBSCRIBED_TO_TOPIC = 86
    INVALID_RECORD = 87
    UNSTABLE_OFFSET_COMMIT = 88
    THROTTLING_QUOTA_EXCEEDED = 89
    PRODUCER_FENCED = 90
    RESOURCE_NOT_FOUND = 91
    DUPLICATE_RESOURCE = 92
    UNACCEPTABLE_CREDENTIAL = 93
    INCONSISTENT_VOTER_SET = 94
    INVALID_UPDATE_VERSION = 95
    FEATURE_UPDATE_FAILED = 96
    PRINCIPAL_DESERIALIZATION_FAILURE = 97
    SNAPSHOT_NOT_FOUND = 98
    POSITION_OUT_OF_RANGE = 99
    UNKNOWN_TOPIC_ID = 100
    DUPLICATE_BROKER_REGISTRATION = 101
    BROKER_ID_NOT_REGISTERED = 102
    INCONSISTENT_TOPIC_ID = 103
    INCONSISTENT_CLUSTER_ID = 104
    TRANSACTIONAL_ID_NOT_FOUND = 105
    FETCH_SESSION_TOPIC_ID_ERROR = 106
    INELIGIBLE_REPLICA = 107
    NEW_LEADER_ELECTED = 108
    OFFSET_MOVED_TO_TIERED_STORAGE = 109
    FENCED_MEMBER_EPOCH = 110
    UNRELEASED_INSTANCE_ID = 111
    UNSUPPORTED_ASSIGNOR = 112
    STALE_MEMBER_EPOCH = 113
    MISMATCHED_ENDPOINT_TYPE = 114
    UNSUPPORTED_ENDPOINT_TYPE = 115
    UNKNOWN_CONTROLLER_ID = 116
    UNKNOWN_SUBSCRIPTION_ID = 117
    TELEMETRY_TOO_LARGE = 118
    INVALID_REGISTRATION = 119
    TRANSACTION_ABORTABLE = 120
    INVALID_RECORD_STATE = 121
    SHARE_SESSION_NOT_FOUND = 122
    INVALID_SHARE_SESSION_EPOCH = 123
    FENCED_STATE_EPOCH = 124
    INVALID_VOTER_KEY = 125
    DUPLICATE_VOTER = 126
    VOTER_NOT_FOUND = 127
    INVALID_REGULAR_EXPRESSION = 128
    REBOOTSTRAP_REQUIRED = 129
    STREAMS_INVALID_TOPOLOGY = 130
    STREAMS_INVALID_TOPOLOGY_EPOCH = 131
    STREAMS_TOPOLOGY_FENCED = 132
    SHARE_SESSION_LIMIT_REACHED = 133

    @property
    def message(self) -> str:
        return _MESSAGES[self]

    @property
    def retriable(self) -> bool:
        return self in _RETRIABLE


E = ErrorCode

# The errors whose Kafka exception is a RetriableException.
_RETRIABLE = frozenset(
    {
        E.CORRUPT_MESSAGE,
        E.UNKNOWN_TOPIC_OR_PARTITION,
        E.LEADER_NOT_AVAILABLE,
        E.NOT_LEADER_OR_FOLLOWER,
        E.REQUEST_TIMED_OUT,
        E.REPLICA_NOT_AVAILABLE,
        E.NETWORK_EXCEPTION,
        E.COORDINATOR_LOAD_IN_PROGRESS,
        E.COORDINATOR_NOT_AVAILABLE,
        E.NOT_COORDINATOR,
        E.NOT_ENOUGH_REPLICAS,
        E.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        E.NOT_CONTROLLER,
        E.CONCURRENT_TRANSACTIONS,
        E.KAFKA_STORAGE_ERROR,
        E.FETCH_SESSION_ID_NOT_FOUND,
        E.INVALID_FETCH_SESSION_EPOCH,
        E.LISTENER_NOT_FOUND,
        E.FENCED_LEADER_EPOCH,
        E.UNKNOWN_LEADER_EPOCH,
        E.OFFSET_NOT_AVAILABLE,
        E.PREFERRED_LEADER_NOT_AVAILABLE,
        E.ELIGIBLE_LEADERS_NOT_AVAILABLE,
        E.ELECTION_NOT_NEEDED,
        E.UNSTABLE_OFFSET_COMMIT,
        E.THROTTLING_QUOTA_EXCEEDED,
        E.UNKNOWN_TOPIC_ID,
        E.INCONSISTENT_TOPIC_ID,
        E.FETCH_SESSION_TOPIC_ID_ERROR,
        E.SHARE_SESSION_NOT_FOUND,
        E.INVALID_SHARE_SESSION_EPOCH,
        E.SHARE_SESSION_LIMIT_REACHED,
    }
)

_MESSAGES: dict[ErrorCode, str] = {
    E.UNKNOWN_SERVER_ERROR: "The broker hit an unexpected error while handling the request.",
    E.NONE: "No error.",
    E.OFFSET_OUT_OF_RANGE: "The offset is outside the range the partition holds.",
    E.CORRUPT_MESSAGE: "A record batch failed its CRC or size check, or is otherwise malformed.",
    E.UNKNOWN_TOPIC_OR_PARTITION: "This broker does not host that topic or partition.",
    E.INVALID_FETCH_SIZE: "The fetch size is invalid.",
    E.LEADER_NOT_AVAILABLE: "The partition has no leader right now (an election is under way).",
    E.NOT_LEADER_OR_FOLLOWER: "This broker is neither leader nor follower of the partition.",
    E.REQUEST_TIMED_OUT: "The request timed out on the broker.",
    E.BROKER_NOT_AVAILABLE: "The broker is not available.",
    E.REPLICA_NOT_AVAILABLE: "The replica is not available for this partition.",
    E.MESSAGE_TOO_LARGE: "The record batch is larger than the broker or topic accepts.",
    E.STALE_CONTROLLER_EPOCH: "The controller epoch is older than the broker's.",
    E.OFFSET_METADATA_TOO_LARGE: "The metadata string of the committed offset is too large.",
    E.NETWORK_EXCEPTION: "The connection closed before a response arrived.",
    E.COORDINATOR_LOAD_IN_PROGRESS: "The coordinator is still loading its state.",
    E.COORDINATOR_NOT_AVAILABLE: "The coordinator is not available.",
    E.NOT_COORDINATOR: "This broker is not the coordinator for that group or transaction.",
    E.INVALID_TOPIC_EXCEPTION: "The request names an invalid topic, or writes to an internal one.",
    E.RECORD_LIST_TOO_LARGE: "The records of one partition exceed the maximum segment size.",
    E.NOT_ENOUGH_REPLICAS: "Too few in-sync replicas to accept the write.",
    E.NOT_ENOUGH_REPLICAS_AFTER_APPEND: "The write was appended, but with fewer in-sync replicas than required.",
    E.INVALID_REQUIRED_ACKS: "The acks value is not 0, 1 or -1.",
    E.ILLEGAL_GENERATION: "The generation id is not the group's current one.",
    E.INCONSISTENT_GROUP_PROTOCOL: "The member's protocol type or protocols do not match the group's.",
    E.INVALID_GROUP_ID: "The group id is empty or null.",
    E.UNKNOWN_MEMBER_ID: "The coordinator does not know this member id.",
    E.INVALID_SESSION_TIMEOUT: "The session timeout is outside the broker's allowed range.",
    E.REBALANCE_IN_PROGRESS: "The group is rebalancing; rejoin it.",
    E.INVALID_COMMIT_OFFSET_SIZE: "The committed offset's metadata is too large.",
    E.TOPIC_AUTHORIZATION_FAILED: "Not authorized to access the topic.",
    E.GROUP_AUTHORIZATION_FAILED: "Not authorized to access the group.",
    E.CLUSTER_AUTHORIZATION_FAILED: "Not authorized for this cluster operation.",
    E.INVALID_TIMESTAMP: "A record's timestamp is outside the accepted range.",
    E.UNSUPPORTED_SASL_MECHANISM: "The broker does not support that SASL mechanism.",
    E.ILLEGAL_SASL_STATE: "The request is not valid in the current SASL state.",
    E.UNSUPPORTED_VERSION: "The broker does not support this API version.",
    E.TOPIC_ALREADY_EXISTS: "The topic already exists.",
    E.INVALID_PARTITIONS: "The partition count is invalid.",
    E.INVALID_REPLICATION_FACTOR: "The replication factor is invalid.",
    E.INVALID_REPLICA_ASSIGNMENT: "The replica assignment is invalid.",
    E.INVALID_CONFIG: "The configuration is invalid.",
    E.NOT_CONTROLLER: "This broker is not the active controller.",
    E.INVALID_REQUEST: "The request is malformed or inconsistent; see the broker log.",
    E.UNSUPPORTED_FOR_MESSAGE_FORMAT: "The message format of the topic does not support this request.",
    E.POLICY_VIOLATION: "The request violates a configured policy.",
    E.OUT_OF_ORDER_SEQUENCE_NUMBER: "The producer's sequence number is out of order.",
    E.DUPLICATE_SEQUENCE_NUMBER: "The producer sent a duplicate sequence number.",
    E.INVALID_PRODUCER_EPOCH: "The producer epoch is older than the current one (the producer was fenced).",
    E.INVALID_TXN_STATE: "The operation is not valid in the transaction's current state.",
    E.INVALID_PRODUCER_ID_MAPPING: "The producer id does not match the transactional id.",
    E.INVALID_TRANSACTION_TIMEOUT: "The transaction timeout exceeds the broker's maximum.",
    E.CONCURRENT_TRANSACTIONS: "Another transaction of this producer is still completing.",
    E.TRANSACTION_COORDINATOR_FENCED: "A newer transaction coordinator has taken over.",
    E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED: "Not authorized to use the transactional id.",
    E.SECURITY_DISABLED: "Security features are disabled.",
    E.OPERATION_NOT_ATTEMPTED: "The operation was not attempted because another in the batch failed.",
    E.KAFKA_STORAGE_ERROR: "A disk error occurred on the broker.",
    E.LOG_DIR_NOT_FOUND: "The log directory does not exist.",
    E.SASL_AUTHENTICATION_FAILED: "SASL authentication failed.",
    E.UNKNOWN_PRODUCER_ID: "The broker has no state for this producer id.",
    E.REASSIGNMENT_IN_PROGRESS: "A partition reassignment is in progress.",
    E.DELEGATION_TOKEN_AUTH_DISABLED: "Delegation token authentication is disabled.",
    E.DELEGATION_TOKEN_NOT_FOUND: "The delegation token was not found.",
    E.DELEGATION_TOKEN_OWNER_MISMATCH: "The principal does not own the delegation token.",
    E.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED: "Delegation token requests are not allowed on this connection.",
    E.DELEGATION_TOKEN_AUTHORIZATION_FAILED: "Not authorized for the delegation token.",
    E.DELEGATION_TOKEN_EXPIRED: "The delegation token has expired.",
    E.INVALID_PRINCIPAL_TYPE: "The principal type is not supported.",
    E.NON_EMPTY_GROUP: "The group still has members.",
    E.GROUP_ID_NOT_FOUND: "The group does not exist.",
    E.FETCH_SESSION_ID_NOT_FOUND: "The fetch session does not exist on this broker.",
    E.INVALID_FETCH_SESSION_EPOCH: "The fetch session epoch is not the expected one.",
    E.LISTENER_NOT_FOUND: "The leader has no endpoint for the listener the request came in on.",
    E.TOPIC_DELETION_DISABLED: "Topic deletion is disabled.",
    E.FENCED_LEADER_EPOCH: "The leader epoch in the request is older than the broker's.",
    E.UNKNOWN_LEADER_EPOCH: "The leader epoch in the request is newer than the broker's.",
    E.UNSUPPORTED_COMPRESSION_TYPE: "The compression type is not supported at this request version.",
    E.STALE_BROKER_EPOCH: "The broker epoch has changed.",
    E.OFFSET_NOT_AVAILABLE: "The leader's high watermark has not caught up yet.",
    E.MEMBER_ID_REQUIRED: "Rejoin the group with the member id this response gives.",
    E.PREFERRED_LEADER_NOT_AVAILABLE: "The preferred leader is not available.",
    E.GROUP_MAX_SIZE_REACHED: "The group has reached its maximum size.",
    E.FENCED_INSTANCE_ID: "Another member with the same group.instance.id has taken over.",
    E.ELIGIBLE_LEADERS_NOT_AVAILABLE: "No eligible replica can become leader.",
    E.ELECTION_NOT_NEEDED: "No leader election is needed.",
    E.NO_REASSIGNMENT_IN_PROGRESS: "No partition reassignment is in progress.",
    E.GROUP_SUBSCRIBED_TO_TOPIC: "The group still subscribes to the topic, so its offsets cannot be deleted.",
    E.INVALID_RECORD: "A record failed the broker's validation.",
    E.UNSTABLE_OFFSET_COMMIT: "The partition has a pending transactional offset commit.",
    E.THROTTLING_QUOTA_EXCEEDED: "The throttling quota was exceeded.",
    E.PRODUCER_FENCED: "A newer producer with the same transactional id has started.",
    E.RESOURCE_NOT_FOUND: "The resource does not exist.",
    E.DUPLICATE_RESOURCE: "The request names the same resource twice.",
    E.UNACCEPTABLE_CREDENTIAL: "The credential does not meet the broker's requirements.",
    E.INCONSISTENT_VOTER_SET: "The voter sets of the leader and the replica do not agree.",
    E.INVALID_UPDATE_VERSION: "The feature update version is invalid.",
    E.FEATURE_UPDATE_FAILED: "The feature update could not be applied.",
    E.PRINCIPAL_DESERIALIZATION_FAILURE: "The forwarded principal could not be read.",
    E.SNAPSHOT_NOT_FOUND: "The requested snapshot does not exist.",
    E.POSITION_OUT_OF_RANGE: "The requested position is outside the snapshot.",
    E.UNKNOWN_TOPIC_ID: "This broker does not know the topic id.",
    E.DUPLICATE_BROKER_REGISTRATION: "A broker with this id is already registered.",
    E.BROKER_ID_NOT_REGISTERED: "The broker id is not registered.",
    E.INCONSISTENT_TOPIC_ID: "The topic id does not match the one in the log.",
    E.INCONSISTENT_CLUSTER_ID: "The cluster id does not match this cluster's.",
    E.TRANSACTIONAL_ID_NOT_FOUND: "The transactional id does not exist.",
    E.FETCH_SESSION_TOPIC_ID_ERROR: "The fetch session's topic ids are inconsistent.",
    E.INELIGIBLE_REPLICA: "The replica cannot join the in-sync set.",
    E.NEW_LEADER_ELECTED: "A new leader was elected while the request was pending.",
    E.OFFSET_MOVED_TO_TIERED_STORAGE: "The offset now lives only in tiered storage.",
    E.FENCED_MEMBER_EPOCH: "The member epoch is fenced; rejoin with epoch 0.",
    E.UNRELEASED_INSTANCE_ID: "The group.instance.id is still held by another member.",
    E.UNSUPPORTED_ASSIGNOR: "The server-side assignor is not supported.",
    E.STALE_MEMBER_EPOCH: "The member epoch is stale.",
    E.MISMATCHED_ENDPOINT_TYPE: "The request was sent to the wrong kind of endpoint.",
    E.UNSUPPORTED_ENDPOINT_TYPE: "This endpoint type is not supported.",
    E.UNKNOWN_CONTROLLER_ID: "The controller id is unknown.",
    E.UNKNOWN_SUBSCRIPTION_ID: "The telemetry subscription id is unknown.",
    E.TELEMETRY_TOO_LARGE: "The telemetry payload is too large.",
    E.INVALID_REGISTRATION: "The controller registration is invalid.",
    E.TRANSACTION_ABORTABLE: "The transaction must be aborted; the producer can then continue.",
    E.INVALID_RECORD_STATE: "The record is not in a state that allows the operation.",
    E.SHARE_SESSION_NOT_FOUND: "The share session does not exist on this broker.",
    E.INVALID_SHARE_SESSION_EPOCH: "The share session epoch is not the expected one.",
    E.FENCED_STATE_EPOCH: "The share-group state epoch is fenced.",
    E.INVALID_VOTER_KEY: "The voter key does not match the receiver's.",
    E.DUPLICATE_VOTER: "The voter is already in the voter set.",
    E.VOTER_NOT_FOUND: "The voter is not in the voter set.",
    E.INVALID_REGULAR_EXPRESSION: "The subscription regular expression is invalid.",
    E.REBOOTSTRAP_REQUIRED: "The client must rebootstrap its view of the cluster.",
    E.STREAMS_INVALID_TOPOLOGY: "The streams topology is invalid.",
    E.STREAMS_INVALID_TOPOLOGY_EPOCH: "The streams topology epoch is invalid.",
    E.STREAMS_TOPOLOGY_FENCED: "The streams topology epoch is fenced.",
    E.SHARE_SESSION_LIMIT_REACHED: "The broker has reached its limit of share sessions.",
}

del E


def is_retriable(code: int) -> bool:
    """Whether a request that failed with ``code`` may simply be retried; unknown codes are not retriable."""
    try:
        return ErrorCode(code) in _RETRIABLE
    except ValueError:
        return False


def describe(code: int) -> str:
    """A one-line message for any code, including ones newer than this table."""
    try:
        return _MESSAGES[ErrorCode(code)]
    except ValueError:
        return f"Unknown error code {code}."
