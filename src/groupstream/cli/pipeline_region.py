"""``groupstream pipeline run FILE --member NAME``: one instance of a pipeline run as a consistent region
(``--instances N`` starts and supervises several: see `pipeline_supervisor`).

An instance prints one line per micro-batch it publishes to the shared table (``published``: its ledger
entry and the exact ranges, so a log shows where every partition resumed after a rebalance) or drops
(``dropped``: another instance published those offsets first; the next batch starts from the ledger).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from groupstream.cli.errors import UserError
from groupstream.cli.pipeline_stop import StopRequest, stop_query
from groupstream.protocol.topic_partition import TopicPartition
from groupstream.spark.pipeline import (
    AVAILABLE_NOW,
    PipelineError,
    PipelineSpec,
    await_query,
    build_query,
    query_error,
    spark_rejects,
)

__all__ = ["run_member"]

_POLL_S = 0.5


def run_member(args: argparse.Namespace, spec: PipelineSpec) -> int:
    from dataclasses import replace

    from groupstream.cli.pipeline_cmd import spark_conf
    from groupstream.region.ledger import OffsetLedger
    from groupstream.spark.session import ExecutorWatch, spark_session

    member = args.member
    conf = spark_conf(args, spec)
    until_caught_up = args.until_caught_up or spec.trigger == AVAILABLE_NOW
    if spec.trigger == AVAILABLE_NOW:
        spec = replace(spec, trigger="1 second")
    try:
        import pyspark  # noqa: F401
    except ImportError:
        raise UserError("pipelines run on Spark: pip install 'groupstream[spark]'") from None
    target = _log_ends(args.bootstrap_server, spec) if until_caught_up else None
    spark = spark_session(args.master, f"groupstream-pipeline-{args.file.stem}-{member}", conf)
    try:
        try:
            query = build_query(spark, spec, args.bootstrap_server, member=member,
                                on_event=lambda event, fields: _say(member, event, **fields))  # fmt: skip
        except PipelineError as e:
            raise UserError(f"{args.file}: {e}") from None
        except Exception as e:  # Spark rejects the SQL or the plan, or an option: say so in one line
            raise UserError(f"{args.file}: Spark cannot run this pipeline: {spark_rejects(e)}") from None
        cores_max = spark.sparkContext.getConf().get("spark.cores.max", None)
        _say(member, "started", table=str(spec.sink_path), group=spec.group_id, master=args.master,
             **({} if cores_max is None else {"cores_max": cores_max}))  # fmt: skip
        watch = ExecutorWatch(spark, args.master, lambda text, n: _say(member, "executors", executors=n, note=text))
        assert spec.sink_path is not None
        ledger = OffsetLedger(spec.sink_path)
        with StopRequest() as stop:
            while query.isActive:
                await_query(query, _POLL_S)
                watch.poll()
                if stop_query(query, stop):
                    break
                if target is not None and _covers(ledger.offsets(), target):
                    _say(member, "caught-up", offsets=_rows(ledger.offsets()))
                    query.stop()
        error = query.exception()
        if error is not None:
            raise UserError(f"the pipeline's query failed: {query_error(error)}")
        _say(member, "stopped")
        return 0
    finally:
        spark.stop()


def _log_ends(bootstrap: str, spec: PipelineSpec) -> dict[TopicPartition, int]:
    """The log end of every partition the pipeline reads, now: what "caught up" means for this run."""
    from groupstream.spark.cluster import Cluster
    from groupstream.spark.options import parse_source_options

    source = {"kafka.bootstrap.servers": bootstrap, **spec.source_options}
    source["subscribe" if spec.topic else "subscribePattern"] = spec.topic or spec.pattern or ""
    cluster = Cluster(parse_source_options(source, streaming=True))
    try:
        return cluster.latest(cluster.partitions(must_exist=False))
    finally:
        cluster.close()


def _covers(published: dict[TopicPartition, int], target: dict[TopicPartition, int]) -> bool:
    return all(end == 0 or published.get(tp, 0) >= end for tp, end in target.items())


def _rows(offsets: dict[TopicPartition, int]) -> list[list[Any]]:
    return [[t, p, o] for (t, p), o in sorted(offsets.items())]


def _say(member: str, event: str, **fields: Any) -> None:
    print(json.dumps({"member": member, "event": event, **fields}, sort_keys=True), flush=True)
