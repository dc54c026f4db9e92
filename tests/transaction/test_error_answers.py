"""The transaction coordinator's error answers (a shard loading, unloaded, or a failed write): for every API
and version it serves, the whole answer carries the code where that version's clients look for it, and
encodes."""

from __future__ import annotations

from typing import Any

import pytest

from groupstream.broker.transaction_wiring import error_response
from groupstream.protocol.error_codes import ErrorCode
from groupstream.protocol.messages import by_name

CODE = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS


def request(name: str, version: int) -> Any:
    api = by_name(name)
    R = api.Request
    if name == "AddPartitionsToTxn":
        T = R.AddPartitionsToTxnTopic
        return R(v3_and_below_transactional_id="tx", v3_and_below_producer_id=1, v3_and_below_producer_epoch=0,
                 v3_and_below_topics=[T(name="t", partitions=[0, 2])])  # fmt: skip
    if name == "DescribeTransactions":
        return R(transactional_ids=["a", "b"])
    if name == "ListTransactions":
        return R(state_filters=[], producer_id_filters=[])
    if name == "InitProducerId":
        return R(transactional_id="tx", transaction_timeout_ms=1000)
    if name == "AddOffsetsToTxn":
        return R(transactional_id="tx", producer_id=1, producer_epoch=0, group_id="g")
    return R(transactional_id="tx", producer_id=1, producer_epoch=0, committed=True)


def codes(name: str, answer: Any) -> list[int]:
    if name == "AddPartitionsToTxn":
        return [p.partition_error_code for t in answer.results_by_topic_v3_and_below for p in t.results_by_partition]
    if name == "DescribeTransactions":
        return [s.error_code for s in answer.transaction_states]
    return [answer.error_code]


CASES = [(name, v) for name in ("InitProducerId", "AddPartitionsToTxn", "AddOffsetsToTxn", "EndTxn",
                                "DescribeTransactions", "ListTransactions")
         for v in range(by_name(name).min_version, by_name(name).max_version + 1)
         if not (name == "AddPartitionsToTxn" and v >= 4)]  # fmt: skip


@pytest.mark.parametrize(("name", "version"), CASES)
def test_error_answer(name: str, version: int) -> None:
    api = by_name(name)
    answer = error_response(api, version, request(name, version), CODE)
    expected = {"AddPartitionsToTxn": 2, "DescribeTransactions": 2}.get(name, 1)
    assert codes(name, answer) == [CODE] * expected
    assert api.decode_response(api.encode_response(answer, version), version) == answer


def test_batched_add_partitions_answers_with_the_top_level_code() -> None:
    api = by_name("AddPartitionsToTxn")
    answer = error_response(api, 5, api.Request(transactions=[]), CODE)
    assert (answer.error_code, answer.results_by_transaction) == (CODE, [])
