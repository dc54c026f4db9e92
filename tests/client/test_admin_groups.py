"""The Admin's group calls against our broker running in this process, where the test can move a group's
coordinator: unloading its `__consumer_offsets` shard makes the broker answer NOT_COORDINATOR (our failover on
one node) until the shard is loaded again, and the Admin must find the coordinator again and retry until its
deadline instead of failing at once."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from groupstream.broker.config import BrokerConfig
from groupstream.broker.group_routing import partition_for
from groupstream.broker.node import Broker
from groupstream.client.admin import Admin, NewTopic, OffsetAndMetadata, PartitionLag
from groupstream.client.errors import KafkaError
from groupstream.protocol.error_codes import ErrorCode
from support.brokers import BrokerProcess
from support.records import produce_records

pytestmark = pytest.mark.broker_ours


@contextmanager
def broker_with_loop(data_dir: Path) -> Iterator[tuple[Broker, asyncio.AbstractEventLoop]]:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="test-broker", daemon=True)
    thread.start()
    config = BrokerConfig(data_dir=data_dir, host="127.0.0.1", port=0)
    config.apply({"group.initial.rebalance.delay.ms": "0"})
    broker = Broker(config)
    asyncio.run_coroutine_threadsafe(broker.start(), loop).result(10)
    try:
        yield broker, loop
    finally:
        asyncio.run_coroutine_threadsafe(broker.stop(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


def test_group_calls_follow_the_coordinator_through_unload_and_reload(tmp_path: Path) -> None:
    with broker_with_loop(tmp_path) as (broker, loop):
        bs = f"127.0.0.1:{broker.config.port}"
        topic, group = f"t-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
        partition = partition_for(group, 50)
        with Admin({"bootstrap.servers": bs}) as admin:
            admin.create_topics([NewTopic(topic, 2)])
            admin.alter_group_offsets(group, {(topic, 0): 5, (topic, 1): OffsetAndMetadata(7, "note")})
            assert admin.find_coordinator(group)[0] == broker.config.node_id

            loop.call_soon_threadsafe(broker.coordinator.unload, partition)
            with Admin({"bootstrap.servers": bs, "request.timeout.ms": 300}) as impatient:
                started = time.monotonic()
                with pytest.raises(KafkaError) as info:
                    impatient.list_group_offsets(group)
                assert info.value.code in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE)
                assert time.monotonic() - started >= 0.2, "gave up without retrying"

            # the shard comes back half a second from now; the call made meanwhile retries until then
            loop.call_soon_threadsafe(loop.call_later, 0.5, broker.coordinator.reload, partition)
            started = time.monotonic()
            got = admin.list_group_offsets(group)
            assert time.monotonic() - started >= 0.4
            assert {tp: (om.offset, om.metadata) for tp, om in got.items()} == {
                (topic, 0): (5, ""), (topic, 1): (7, "note")}  # fmt: skip

            desc = admin.describe_groups([group])[group]
            assert (desc.state, desc.members, desc.coordinator_id) == ("Empty", (), broker.config.node_id)
            assert [g.group_id for g in admin.list_groups(["empty"]) if g.group_id == group] == [group]
            assert admin.describe_groups(["no-such-group"])["no-such-group"].exists is False

            admin.delete_group_offsets(group, topic, [1])
            assert list(admin.list_group_offsets(group)) == [(topic, 0)]
            admin.delete_groups([group])
            assert admin.list_group_offsets(group) == {}
            with pytest.raises(KafkaError) as info:
                admin.delete_groups([group])
            assert info.value.code == ErrorCode.GROUP_ID_NOT_FOUND


def test_consumer_lag_of_a_group(groupstream_broker: BrokerProcess) -> None:
    topic = f"lag-{uuid.uuid4().hex[:8]}"
    with Admin({"bootstrap.servers": groupstream_broker.bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, 2)])
        produce_records(groupstream_broker.bootstrap, topic, [b"x"] * 10, partition=0)
        produce_records(groupstream_broker.bootstrap, topic, [b"y"] * 4, partition=1)
        admin.alter_group_offsets("lagging", {(topic, 0): 3, (topic, 1): 4})
        assert admin.consumer_lag("lagging") == {(topic, 0): PartitionLag(3, 10), (topic, 1): PartitionLag(4, 4)}
        assert [v.lag for v in admin.consumer_lag("lagging").values()] == [7, 0]
        admin.delete_topics([topic])
        assert admin.log_end_offsets([(topic, 0)]) == {}
