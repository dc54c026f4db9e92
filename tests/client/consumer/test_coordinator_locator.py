"""`GroupCoordinatorLocator` (FindCoordinator) on a manual clock, no thread, no network."""

from __future__ import annotations

from typing import Any

import pytest
from request_manager_kit import (
    FIND,
    answer,
    disconnect,
    request_body,
)

from groupstream.client.consumer.coordinator_locator import COORDINATOR_NODE_BASE, GroupCoordinatorLocator
from groupstream.client.net.metadata import MetadataCache
from groupstream.protocol.error_codes import ErrorCode as E


def find_response(version: int, *, node: int = 3, error: int = 0, key: str = "g") -> Any:
    R: Any = FIND.Response
    if version >= 4:
        return R(
            coordinators=[R.Coordinator(key=key, node_id=node, host="coord", port=9093, error_code=error)]
        )
    return R(error_code=error, node_id=node, host="coord", port=9093)


def locator() -> tuple[GroupCoordinatorLocator, MetadataCache]:
    cache = MetadataCache()
    return GroupCoordinatorLocator("g", cache, backoff_ms=100, backoff_max_ms=1_000), cache


@pytest.mark.parametrize("version", [3, 4])
def test_find_coordinator_is_sent_when_unknown_and_the_answer_sets_a_node_of_its_own(version: int) -> None:
    loc, cache = locator()
    assert loc.coordinator() is None
    (req,) = loc.poll(0).unsent_requests
    assert req.api is FIND and req.node_id is None  # any broker
    body = request_body(req, version)
    if version >= 4:
        assert (body.key_type, list(body.coordinator_keys)) == (0, ["g"])
    else:
        assert (body.key_type, body.key) == (0, "g")
    assert list(loc.poll(1).unsent_requests) == []  # in flight
    answer(req, find_response(version, node=3), 5, version)
    own = COORDINATOR_NODE_BASE - 3
    assert loc.coordinator() == own  # Java's Integer.MAX_VALUE - node id: a connection of its own
    info = cache.broker(own)
    assert info is not None and (info.host, info.port) == ("coord", 9093)
    assert cache.broker(3) is None  # the broker's own node id is left to metadata
    result = loc.poll(6)
    assert list(result.unsent_requests) == [] and result.next_poll_delay_ms is None


@pytest.mark.parametrize("version", [3, 4])
def test_find_coordinator_errors_are_retried_with_exponential_backoff(version: int) -> None:
    loc, _ = locator()
    now = 0
    for expected in (100, 200, 400, 800, 1_000, 1_000):  # doubling, capped at backoff_max_ms
        (req,) = loc.poll(now).unsent_requests
        answer(req, find_response(version, error=E.COORDINATOR_NOT_AVAILABLE), now, version)
        assert loc.coordinator() is None
        result = loc.poll(now)
        assert list(result.unsent_requests) == [] and result.next_poll_delay_ms == expected
        assert list(loc.poll(now + expected - 1).unsent_requests) == []
        now += expected
    (req,) = loc.poll(now).unsent_requests
    answer(req, find_response(version, node=5), now, version)
    assert loc.coordinator() == COORDINATOR_NODE_BASE - 5


def test_a_disconnection_or_an_answer_without_the_group_is_retried() -> None:
    loc, _ = locator()
    disconnect(loc.poll(0).unsent_requests[0], 10)
    assert loc.coordinator() is None
    assert list(loc.poll(109).unsent_requests) == []
    (req,) = loc.poll(110).unsent_requests
    answer(req, find_response(4, key="another-group"), 120, 4)
    assert loc.coordinator() is None
    assert loc.poll(120).next_poll_delay_ms == 200
    answer(loc.poll(320).unsent_requests[0], find_response(4, node=1), 330, 4)
    assert loc.coordinator() == COORDINATOR_NODE_BASE - 1


def test_coordinator_lost_clears_it_and_finds_it_again_after_the_backoff() -> None:
    loc, _ = locator()
    for now in (0, 100):  # two failures: the next would wait 400
        answer(
            loc.poll(now).unsent_requests[0], find_response(4, error=E.COORDINATOR_LOAD_IN_PROGRESS), now, 4
        )
    answer(loc.poll(300).unsent_requests[0], find_response(4, node=2), 300, 4)
    assert loc.coordinator() == COORDINATOR_NODE_BASE - 2
    loc.coordinator_lost(1_000)
    assert loc.coordinator() is None
    assert loc.poll(1_000).next_poll_delay_ms == 100
    (req,) = loc.poll(1_100).unsent_requests
    answer(req, find_response(4, error=E.COORDINATOR_NOT_AVAILABLE), 1_100, 4)
    assert loc.poll(1_100).next_poll_delay_ms == 100  # a success reset the attempts
    answer(loc.poll(1_200).unsent_requests[0], find_response(4, node=4), 1_200, 4)
    assert loc.coordinator() == COORDINATOR_NODE_BASE - 4
