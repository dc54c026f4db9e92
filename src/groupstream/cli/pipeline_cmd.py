"""``groupstream pipeline run FILE``: run a declarative pipeline (see `groupstream.spark.pipeline`) as a Spark
Structured Streaming query, showing its progress, until it is caught up (``--until-caught-up`` or a trigger of
``available-now``) or Ctrl-C stops it (the query stops at a batch boundary; the next run resumes from its
checkpoint).

``--member NAME`` runs the pipeline as one instance of a region (its instances share the group and the output
table; see `groupstream.spark.region_table`), and ``--instances N`` (or ``[region] instances`` in the file)
starts N such instances as child processes on this machine and supervises them, starting again those that die
(see `groupstream.cli.pipeline_supervisor`). A region is caught up when its
table's ledger covers every partition up to the log end seen when the run started; each instance then stops,
since with one group the partitions of an instance that stopped would move to one still running.

Spark settings come from the file's ``[spark]`` table and ``--conf KEY=VALUE`` (which wins). On a cluster master
a run whose application gets no executor says so after 20 s (see `groupstream.spark.session.ExecutorWatch`)."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import TYPE_CHECKING

from groupstream.cli.common import stderr, stdout
from groupstream.cli.errors import UserError
from groupstream.cli.pipeline_stop import StopRequest, stop_query
from groupstream.cli.pipeline_supervisor import DEFAULT_MAX_RESTARTS

if TYPE_CHECKING:
    from groupstream.spark.pipeline import PipelineSpec


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("pipeline", help="run declarative Spark pipelines over topics")
    psub = p.add_subparsers(dest="pipeline_command", required=True, metavar="{run}")
    run = psub.add_parser("run", help="run the pipeline a TOML file describes")
    run.add_argument("file", type=Path, help="the pipeline definition (TOML)")
    run.add_argument("--bootstrap-server", default="127.0.0.1:9092", metavar="HOST:PORT",
                     help="the Kafka brokers to read and write (default 127.0.0.1:9092)")  # fmt: skip
    run.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    run.add_argument("--until-caught-up", action="store_true",
                     help="process what the topics hold now, then stop (Trigger.AvailableNow)")  # fmt: skip
    run.add_argument("--instances", type=int, metavar="N",
                     help="run as a region of N instances on this machine (child processes)")  # fmt: skip
    run.add_argument("--member", metavar="NAME", help="run as the region instance NAME (letters, digits, _ and .)")
    run.add_argument("--conf", action="append", metavar="KEY=VALUE",
                     help="a Spark setting (repeatable), e.g. spark.executor.memory=2g; overrides the file's [spark]")
    run.add_argument("--max-restarts", type=int, metavar="N",
                     help="with --instances: start an instance that dies again at most N times (default "
                          f"{DEFAULT_MAX_RESTARTS}), after a backoff of 1 s doubling up to 30 s")  # fmt: skip
    run.set_defaults(func=run_pipeline, command_name="pipeline run")


def run_pipeline(args: argparse.Namespace) -> int:
    from groupstream.spark.pipeline import (
        AVAILABLE_NOW,
        PipelineError,
        await_query,
        build_query,
        load_pipeline,
        query_error,
        spark_rejects,
    )

    try:
        spec = load_pipeline(args.file)
    except PipelineError as e:
        raise UserError(f"{args.file}: {e}") from None
    conf = spark_conf(args, spec)
    try:
        import pyspark  # noqa: F401
    except ImportError:
        raise UserError("pipelines run on Spark: pip install 'groupstream[spark]'") from None
    instances = args.instances if args.instances is not None else spec.instances
    if args.member is not None and args.instances is not None:
        raise UserError("give --instances (start a region here) or --member (be one of its instances), not both")
    if instances is not None and args.member is None:
        if instances < 1:
            raise UserError(f"--instances must be at least 1, got {instances}")
        from groupstream.cli.pipeline_supervisor import run_region

        return run_region(args, spec, instances)
    if args.member is not None:
        return _run_member(args, spec)
    if args.until_caught_up:
        from dataclasses import replace

        spec = replace(spec, trigger=AVAILABLE_NOW)
    from groupstream.spark.session import ExecutorWatch, spark_session

    spark = spark_session(args.master, f"groupstream-pipeline-{args.file.stem}", conf)
    try:
        try:
            query = build_query(spark, spec, args.bootstrap_server)
        except PipelineError as e:
            raise UserError(f"{args.file}: {e}") from None
        except Exception as e:  # Spark rejects the SQL or the plan: say so in one line
            raise UserError(f"{args.file}: Spark cannot run this pipeline: {spark_rejects(e)}") from None
        watch = ExecutorWatch(spark, args.master, lambda text, _n: stderr.print(f"pipeline {args.file.name}: {text}",
                                                                               highlight=False, markup=False))  # fmt: skip
        sink = spec.sink_path if spec.sink_path is not None else f"topic {spec.sink_topic}"
        stdout.print(f"pipeline {args.file.name}: {spec.topic or spec.pattern} -> {sink} (trigger {spec.trigger})")
        rows = 0
        batches: set[int] = set()
        started = time.monotonic()
        with StopRequest() as stop, stderr.status("running") as status:
            while query.isActive:
                for p in query.recentProgress:
                    if p["batchId"] not in batches:
                        batches.add(p["batchId"])
                        rows += p["numInputRows"]
                status.update(f"{len(batches)} batches, {rows:,} records read, "
                              f"{time.monotonic() - started:.0f}s")  # fmt: skip
                await_query(query, 0.5)
                watch.poll()
                stop_query(query, stop)  # at a batch boundary; the next run resumes from the checkpoint
        error = query.exception()
        if error is not None:
            raise UserError(f"the pipeline's query failed: {query_error(error)}")
        for p in query.recentProgress:
            if p["batchId"] not in batches:
                batches.add(p["batchId"])
                rows += p["numInputRows"]
        stdout.print(f"pipeline {args.file.name}: {len(batches)} batches, {rows:,} records read")
        return 0
    finally:
        spark.stop()


def spark_conf(args: argparse.Namespace, spec: PipelineSpec) -> dict[str, str]:
    """The Spark settings of this run: the file's ``[spark]`` table, then ``--conf`` (which wins)."""
    from groupstream.spark.pipeline import PipelineError, parse_conf

    try:
        return {**spec.spark_conf, **parse_conf(getattr(args, "conf", None))}
    except PipelineError as e:
        raise UserError(str(e)) from None


def _run_member(args: argparse.Namespace, spec: PipelineSpec) -> int:
    from groupstream.cli.pipeline_region import run_member

    return run_member(args, spec)
