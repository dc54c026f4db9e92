"""A broker for the client's ``consumer`` (KIP-848) group tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from support.brokers import KIP848_TEST_SETTINGS, BrokerKind, BrokerProcess


@pytest.fixture(scope="module")
def kip848_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with BrokerProcess(
        BrokerKind.GROUPSTREAM, tmp_path_factory.mktemp("kip848"), settings=KIP848_TEST_SETTINGS
    ) as b:
        yield b
