"""Options of the groupstream data source: Spark Kafka source names and defaults, and one clear error per
mistake, naming the option."""

from __future__ import annotations

import pytest

from groupstream.spark.options import (
    EARLIEST,
    LATEST,
    SourceOptionError,
    parse_sink_options,
    parse_source_options,
)

BS = {"kafka.bootstrap.servers": "127.0.0.1:9092"}


def test_defaults_follow_spark_kafka_source() -> None:
    batch = parse_source_options({**BS, "subscribe": "b, a ,a"}, streaming=False)
    assert batch.topics == ("a", "b")
    assert (batch.starting.kind, batch.ending.kind) == ("earliest", "latest")
    assert batch.fail_on_data_loss and not batch.include_headers
    stream = parse_source_options({**BS, "subscribe": "a"}, streaming=True)
    assert stream.starting.kind == "latest"


def test_options_are_case_insensitive_and_client_properties_pass_through() -> None:
    opts = parse_source_options(
        {"bootstrap.servers": "h:1", "SUBSCRIBEPATTERN": "ev-.*", "kafka.client.id": "me", "MaxOffsetsPerTrigger": "5",
         "failOnDataLoss": "FALSE", "includeHeaders": "true", "kafka.group.id": "g", "startingOffsets": "group"},
        streaming=True,
    )  # fmt: skip
    assert opts.bootstrap_servers == "h:1"
    assert opts.pattern is not None and opts.pattern.fullmatch("ev-1") and not opts.pattern.fullmatch("xev-1")
    assert opts.client_config == {"client.id": "me"}
    assert opts.max_offsets_per_trigger == 5 and not opts.fail_on_data_loss and opts.include_headers
    assert opts.group_id == "g" and opts.starting.kind == "group"


def test_per_partition_offsets_and_timestamps() -> None:
    opts = parse_source_options(
        {**BS, "assign": '{"t": [0, 1, 2]}', "startingOffsets": '{"t": {"0": 5, "1": -2}}',
         "endingOffsets": '{"t": {"0": 9, "2": -1}}'},
        streaming=False,
    )  # fmt: skip
    assert opts.assign == {"t": (0, 1, 2)}
    assert dict(opts.starting.offsets) == {("t", 0): 5, ("t", 1): EARLIEST}
    assert dict(opts.ending.offsets) == {("t", 0): 9, ("t", 2): LATEST}
    ts = parse_source_options({**BS, "subscribe": "t", "startingOffsetsByTimestamp": '{"t": {"0": 1000}}'}, False)
    assert ts.starting.kind == "timestamps" and dict(ts.starting.offsets) == {("t", 0): 1000}
    one = parse_source_options({**BS, "subscribe": "t", "startingTimestamp": "1700000000000"}, False)
    assert one.starting.kind == "timestamp" and one.starting.timestamp == 1_700_000_000_000


@pytest.mark.parametrize(
    ("options", "streaming", "message"),
    [
        ({"subscribe": "t"}, False, "'kafka.bootstrap.servers' is required"),
        ({**BS}, False, "exactly one of the options 'subscribe', 'subscribePattern' and 'assign'"),
        ({**BS, "subscribe": "t", "assign": '{"t": [0]}'}, False, "exactly one of"),
        ({**BS, "subscribe": " , "}, False, "'subscribe' names no topic"),
        ({**BS, "subscribePattern": "("}, False, "'subscribePattern' is not a valid regular expression"),
        ({**BS, "assign": "[1]"}, False, "'assign' must be a JSON object"),
        ({**BS, "assign": '{"t": ["0"]}'}, False, "must list partition numbers"),
        ({**BS, "assign": "{bad"}, False, "'assign' is not valid JSON"),
        ({**BS, "subscribe": "t", "startingOffsets": "latest"}, False, "cannot be latest for a batch query"),
        ({**BS, "subscribe": "t", "endingOffsets": "earliest"}, False, "cannot be earliest for a batch query"),
        ({**BS, "subscribe": "t", "endingOffsets": "latest"}, True, "endingOffsets is for batch queries only"),
        ({**BS, "subscribe": "t", "startingOffsets": '{"t": {"x": 1}}'}, False, "is not a partition number"),
        ({**BS, "subscribe": "t", "startingOffsets": '{"t": {"0": "1"}}'}, False, "t-0 must be an integer"),
        ({**BS, "assign": '{"t": [0]}', "startingOffsets": '{"t": {"1": 1}}'}, False, "which 'assign' does not"),
        ({**BS, "subscribe": "t", "startingOffsets": "group"}, True, "needs option 'group.id'"),
        ({**BS, "subscribe": "t", "startingOffsets": "group", "group.id": "g"}, False, "only for streaming"),
        ({**BS, "subscribe": "t", "startingOffsets": "earliest", "startingTimestamp": "1"}, False, "give only one"),
        ({**BS, "subscribe": "t", "startingTimestamp": "soon"}, False, "must be a timestamp in ms"),
        ({**BS, "subscribe": "t", "minPartitions": "0"}, False, "'minPartitions' must be a positive integer"),
        ({**BS, "subscribe": "t", "maxOffsetsPerTrigger": "x"}, True, "must be a positive integer, got 'x'"),
        ({**BS, "subscribe": "t", "maxOffsetsPerTrigger": "10"}, False, "for streaming queries only"),
        ({**BS, "subscribe": "t", "failOnDataLoss": "yes"}, False, "'failOnDataLoss' must be true or false"),
        ({**BS, "subscribe": "t", "startingOffsetsByTimestampStrategy": "x"}, False, "must be error or latest"),
        ({**BS, "subscribe": "t", "kafka.auto.offset.reset": "none"}, False, "must be earliest or latest"),
        ({**BS, "subscribe": "t", "fetch.max.bytes": "1"}, False, "unknown option 'fetch.max.bytes'"),
        ({**BS, "subscribe": "t", "region.member": "a"}, True, "'region.member' needs 'region.table'"),
        ({**BS, "subscribe": "t", "region.table": "o", "region.member": "a", "group.id": "g"}, False,
         "'region.table' is for streaming queries only"),
        ({**BS, "subscribe": "t", "region.table": "o", "region.member": "a"}, True, "needs 'kafka.group.id'"),
        ({**BS, "assign": '{"t": [0]}', "region.table": "o", "region.member": "a", "group.id": "g"}, True,
         "needs 'subscribe' or 'subscribePattern'"),
        ({**BS, "subscribe": "t", "region.table": "o", "region.member": "a/b", "group.id": "g"}, True,
         "'region.member' must name this instance"),
    ],
)
def test_mistakes_name_the_option(options: dict[str, str], streaming: bool, message: str) -> None:
    with pytest.raises(SourceOptionError, match=None) as err:
        parse_source_options(options, streaming)
    assert message in str(err.value)


def test_region_options() -> None:
    o = parse_source_options(
        {**BS, "subscribe": "t", "region.table": "/out", "region.member": "i0", "kafka.group.id": "g"}, True
    )
    assert (o.region_table, o.region_member, o.group_id) == ("/out", "i0", "g")
    assert parse_source_options({**BS, "subscribe": "t"}, True).region_table is None


def test_sink_options() -> None:
    sink = parse_sink_options({**BS, "topic": " out ", "kafka.linger.ms": "1"})
    assert sink.topic == "out" and sink.client_config == {"linger.ms": "1"}
    assert parse_sink_options(BS).topic is None
    with pytest.raises(SourceOptionError, match="unknown option 'subscribe' for the groupstream sink"):
        parse_sink_options({**BS, "subscribe": "t"})
