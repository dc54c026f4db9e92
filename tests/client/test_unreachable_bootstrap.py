"""A consumer or producer whose bootstrap servers cannot be reached says so once, and closes in time.

Against a port nobody listens on (connection refused): one WARNING naming the address and the error, not one
per reconnection attempt (the attempts themselves are logged at DEBUG, which is how these tests know that
several happened); another only after a connection succeeded and then failed again. ``close()`` returns
within its timeout: at once when there is nothing to finish, and a producer's records still undelivered at
the deadline fail with an error that says why.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterator

import pytest

from groupstream import Consumer, Producer
from groupstream.client.admin import Admin, NewTopic
from groupstream.client.errors import KafkaError
from groupstream.client.producer.errors import ProducerClosedError
from groupstream.protocol.error_codes import ErrorCode
from support.brokers import BrokerFactory, BrokerKind, free_port
from support.waiting import wait_until

# many quick reconnection attempts: a warning per attempt would show within a second
FAST_RETRIES = {"reconnect.backoff.ms": 10, "reconnect.backoff.max.ms": 50}
UNREACHABLE = "no bootstrap server can be reached"


@pytest.fixture
def net_log(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    caplog.set_level(logging.DEBUG, logger="groupstream.client")
    yield caplog


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name.startswith("groupstream.client") and r.levelno >= logging.WARNING]  # fmt: skip


def _failed_attempts(caplog: pytest.LogCaptureFixture, address: str) -> int:
    return sum(1 for r in caplog.records
               if r.levelno == logging.DEBUG and r.getMessage().startswith(f"connection to {address} failed"))  # fmt: skip


def _wait_for_retries(caplog: pytest.LogCaptureFixture, address: str, attempts: int = 8) -> None:
    wait_until(lambda: _failed_attempts(caplog, address) >= attempts, 20,
               f"{attempts} failed connection attempts to {address}",
               explain=lambda: "\n".join(r.getMessage() for r in caplog.records))  # fmt: skip


def _unreachable_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    """The network client's warnings (others may quote it, such as a final commit's failure on close)."""
    return [r.getMessage() for r in caplog.records
            if r.name == "groupstream.client.net" and r.levelno >= logging.WARNING and UNREACHABLE in r.getMessage()]  # fmt: skip


def _one_unreachable_warning(caplog: pytest.LogCaptureFixture, address: str) -> str:
    unreachable = _unreachable_warnings(caplog)
    assert len(unreachable) == 1, _warnings(caplog)
    assert address in unreachable[0] and "connection refused" in unreachable[0], unreachable[0]
    return unreachable[0]


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_a_subscribed_consumer_warns_once_and_closes_at_once(net_log: pytest.LogCaptureFixture, protocol: str) -> None:
    address = f"127.0.0.1:{free_port()}"
    consumer = Consumer({"bootstrap.servers": address, "group.id": f"g-{uuid.uuid4().hex[:8]}",
                         "group.protocol": protocol, **FAST_RETRIES})  # fmt: skip
    try:
        consumer.subscribe(["orders"])
        assert not consumer.poll(0.1)
        _wait_for_retries(net_log, address)
        assert not consumer.poll(0)
        _one_unreachable_warning(net_log, address)
    finally:
        start = time.monotonic()
        consumer.close()  # timeout 30 s: nothing to commit, no group joined, so nothing to wait for
        elapsed = time.monotonic() - start
    assert elapsed < 3.0, f"close() took {elapsed:.1f}s with nothing to commit or leave"
    assert len(_unreachable_warnings(net_log)) == 1


def test_a_consumer_with_a_commit_to_make_closes_within_its_timeout(net_log: pytest.LogCaptureFixture) -> None:
    """Auto commit on close wants the coordinator, which cannot be found: the commit is given up at the
    deadline (logged, with the reason) and the whole close takes the timeout, not more."""
    address = f"127.0.0.1:{free_port()}"
    consumer = Consumer({"bootstrap.servers": address, "group.id": f"g-{uuid.uuid4().hex[:8]}", **FAST_RETRIES})
    timeout = 2.0
    try:
        consumer.assign([("orders", 0)])
        consumer.seek(("orders", 0), 5)  # a position to commit on close
        _wait_for_retries(net_log, address)
    finally:
        start = time.monotonic()
        consumer.close(timeout)
        elapsed = time.monotonic() - start
    assert timeout - 0.1 <= elapsed < timeout + 0.8, f"close({timeout}) took {elapsed:.2f}s"
    _one_unreachable_warning(net_log, address)
    commit = [w for w in _warnings(net_log) if "final commit" in w]
    assert len(commit) == 1 and UNREACHABLE in commit[0], _warnings(net_log)


def test_a_producer_close_waits_its_timeout_then_fails_the_record_saying_why(net_log: pytest.LogCaptureFixture) -> None:
    address = f"127.0.0.1:{free_port()}"
    producer = Producer({"bootstrap.servers": address, **FAST_RETRIES})
    future = producer.produce("orders", b"v")
    _wait_for_retries(net_log, address)
    timeout = 1.5
    start = time.monotonic()
    producer.close(timeout)
    elapsed = time.monotonic() - start
    assert timeout - 0.1 <= elapsed < timeout + 0.8, f"close({timeout}) took {elapsed:.2f}s"
    error = future.exception(0)
    assert isinstance(error, ProducerClosedError), repr(error)
    assert "closed before this record was delivered" in str(error) and address in str(error) and "connection refused" in str(error), str(error)
    _one_unreachable_warning(net_log, address)


def test_a_producer_warns_again_only_after_a_success_and_a_new_failure(
    net_log: pytest.LogCaptureFixture, broker_factory: BrokerFactory
) -> None:
    port = free_port()
    address = f"127.0.0.1:{port}"
    with Producer({"bootstrap.servers": address, **FAST_RETRIES}) as producer:
        _wait_for_retries(net_log, address)
        _one_unreachable_warning(net_log, address)

        broker = broker_factory(BrokerKind.GROUPSTREAM, port=port)
        topic = f"back-{uuid.uuid4().hex[:8]}"
        with Admin({"bootstrap.servers": address}) as admin:
            admin.create_topics([NewTopic(topic, 1)])
        producer.produce(topic, b"delivered").result(30)
        assert len(_unreachable_warnings(net_log)) == 1  # a success is no new warning

        broker.kill9()
        seen = _failed_attempts(net_log, address)
        _wait_for_retries(net_log, address, seen + 8)
        unreachable = _unreachable_warnings(net_log)
        assert len(unreachable) == 2 and address in unreachable[1], _warnings(net_log)
        producer.close(0)


def test_a_record_that_waited_max_block_ms_for_metadata_says_no_broker_answered(net_log: pytest.LogCaptureFixture) -> None:
    """Not that its topic does not exist: nobody could be asked."""
    address = f"127.0.0.1:{free_port()}"
    with Producer({"bootstrap.servers": address, "max.block.ms": 500, **FAST_RETRIES}) as producer:
        future = producer.produce("orders", b"v")
        error = future.exception(20)
    assert isinstance(error, KafkaError) and error.code == ErrorCode.REQUEST_TIMED_OUT, repr(error)
    assert "max.block.ms=500" in str(error) and UNREACHABLE in str(error) and address in str(error), str(error)
    assert "does not exist" not in str(error)
