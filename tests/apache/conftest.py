"""The Apache Kafka tests (issue 13): our client, Admin and CLI against Apache Kafka 4.x itself.

The cluster fixtures (``apache_cluster``, ``apache_nodes``, ``apache_node``) are in the top-level conftest.
The group tests reuse the member subprocesses, group checks and scenarios of ``tests/compat/groups``, the
consumer tests the scenarios of ``tests/client/consumer`` (run there against our broker), and the CLI test the
console-script runner and table reader of ``tests/cli``; pytest imports those modules by their basenames from
their own directories, so these directories are put on ``sys.path`` here.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

_TESTS = Path(__file__).resolve().parent.parent
for _shared in (_TESTS / "compat" / "groups", _TESTS / "client" / "consumer", _TESTS / "cli",
                _TESTS / "client" / "transactions"):  # fmt: skip
    if str(_shared) not in sys.path:
        sys.path.insert(0, str(_shared))

from group_harness import Members  # noqa: E402 - importable once the path above is set


@pytest.fixture
def members(tmp_path: Path) -> Iterator[Members]:
    """Member subprocesses of one test; any still running at the end are killed (only these children)."""
    ms = Members(tmp_path / "members")
    try:
        yield ms
    finally:
        ms.teardown()
