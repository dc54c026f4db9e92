"""Error codes: numbers must match what clients branch on; kafka-python's table is a second, independent source."""

from __future__ import annotations

import inspect
import warnings

import pytest

from groupstream.protocol.error_codes import ErrorCode, describe, is_retriable

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)  # kafka-python's schema loader uses old importlib APIs
    import kafka.errors as kafka_errors

# kafka-python still uses Kafka's older names for these codes.
_RENAMED = {
    -1: "UNKNOWN",
    0: "NO_ERROR",
    6: "NOT_LEADER_FOR_PARTITION",
    10: "MESSAGE_SIZE_TOO_LARGE",
    17: "INVALID_TOPIC",
    39: "INVALID_REPLICATION_ASSIGNMENT",
}
# Kafka's CorruptRecordException is retriable (a batch may have been damaged in transit); kafka-python says not.
_RETRIABLE_DISAGREEMENTS = {ErrorCode.CORRUPT_MESSAGE}


def _kafka_python_errors() -> list[type[kafka_errors.BrokerResponseError]]:
    return [
        cls
        for _, cls in inspect.getmembers(kafka_errors, inspect.isclass)
        if issubclass(cls, kafka_errors.BrokerResponseError) and isinstance(getattr(cls, "errno", None), int)
    ]


def test_kafka_python_knows_no_code_we_lack() -> None:
    peers = _kafka_python_errors()
    assert len(peers) > 100
    for cls in peers:
        code = ErrorCode(cls.errno)
        assert _RENAMED.get(code, code.name) == cls.message


def test_retriable_matches_kafka_python_where_both_follow_kafka() -> None:
    for cls in _kafka_python_errors():
        code = ErrorCode(cls.errno)
        if code not in _RETRIABLE_DISAGREEMENTS:
            assert is_retriable(code) == bool(cls.retriable), code.name


def test_well_known_codes() -> None:
    assert ErrorCode.NONE == 0
    assert ErrorCode.UNKNOWN_SERVER_ERROR == -1
    assert ErrorCode.UNSUPPORTED_VERSION == 35
    assert ErrorCode.MEMBER_ID_REQUIRED == 79
    assert ErrorCode.FENCED_MEMBER_EPOCH == 110
    assert ErrorCode.NOT_COORDINATOR.retriable
    assert not ErrorCode.REBALANCE_IN_PROGRESS.retriable


@pytest.mark.parametrize("code", list(ErrorCode), ids=lambda c: c.name)
def test_every_code_has_a_message(code: ErrorCode) -> None:
    assert code.message.endswith(".")
    assert describe(int(code)) == code.message


def test_codes_newer_than_the_table() -> None:
    assert not is_retriable(9999)
    assert "9999" in describe(9999)
