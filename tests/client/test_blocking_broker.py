"""BlockingConnection against a real ``groupstream broker`` process: negotiation and plain requests."""

from __future__ import annotations

import pytest

from groupstream.client.errors import KafkaConnectionError, UnsupportedVersionError
from groupstream.client.net.blocking import BlockingConnection
from groupstream.protocol.messages import APIS, by_name
from support.brokers import BrokerProcess

pytestmark = pytest.mark.broker_ours


def test_negotiates_the_highest_common_version_of_every_api(groupstream_broker: BrokerProcess) -> None:
    with BlockingConnection(groupstream_broker.host, groupstream_broker.port, client_id="t") as conn:
        assert set(conn.broker_versions) <= set(APIS)
        for key, (low, high) in conn.broker_versions.items():
            api = APIS[key]
            assert conn.version_for(api.name) == min(high, api.max_version)
            assert low <= conn.version_for(api.name, max_version=low) == max(low, api.min_version)
        with pytest.raises(UnsupportedVersionError, match="at most v-1"):
            conn.version_for("Metadata", max_version=-1)


def test_request_takes_a_mapping_or_a_message_at_any_common_version(groupstream_broker: BrokerProcess) -> None:
    with BlockingConnection(groupstream_broker.host, groupstream_broker.port) as conn:
        newest = conn.request("Metadata", {"topics": []})
        assert [b.port for b in newest.brokers] == [groupstream_broker.port]
        v1 = conn.request("Metadata", by_name("Metadata").Request(topics=[]), version=1)
        assert [(b.node_id, b.host, b.port) for b in v1.brokers] == [(b.node_id, b.host, b.port) for b in newest.brokers]
    assert conn.closed
    with pytest.raises(KafkaConnectionError, match="connection is closed"):
        conn.request("Metadata", {"topics": []})
