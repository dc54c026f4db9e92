"""What the driver side of the Spark source imports.

Spark starts a fresh Python process on the driver for every streaming query (its source runner), which imports
``groupstream.spark.source`` before the query's first micro-batch. The tasks' reader (our Consumer and
pyarrow.compute), the writers (our Producer) and the region-table reader (the region ledger, our storage) are
imported where they run, so they are not part of that per-query cost: this test fails if a module-level import
brings them back.
"""

from __future__ import annotations

import json
import subprocess
import sys

NOT_AT_LOAD = (
    "groupstream.spark.executor",
    "groupstream.spark.sink",
    "groupstream.spark.kafka_eos",
    "groupstream.client.consumer.consumer",
    "groupstream.client.producer",
    "pyarrow.compute",
    "groupstream.spark.region_reader",
    "groupstream.storage",
)


def test_the_source_module_leaves_the_task_writer_and_region_code_unimported() -> None:
    code = (
        "import json, sys; import groupstream.spark.source; "
        f"print(json.dumps([m for m in {list(NOT_AT_LOAD)!r} if m in sys.modules]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert json.loads(done.stdout) == []


def test_the_read_spec_is_still_reachable_from_the_executor() -> None:
    from groupstream.spark.executor import ReadSpec
    from groupstream.spark.planning import ReadSpec as Planned

    assert ReadSpec is Planned
