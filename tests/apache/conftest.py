"""The Apache Kafka tests (issue 13): our client, Admin and CLI against Apache Kafka 4.x itself.

The cluster fixtures (``apache_cluster``, ``apache_nodes``, ``apache_node``) are in the top-level conftest.
The group tests reuse the member subprocesses and the group checks of ``tests/compat/groups``, whose modules
are imported by their basenames as pytest imports them there, so that directory is put on ``sys.path``.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "compat" / "groups"))

from group_harness import Members


@pytest.fixture
def members(tmp_path: Path) -> Iterator[Members]:
    """Member subprocesses of one test; any still running at the end are killed (only these children)."""
    ms = Members(tmp_path / "members")
    try:
        yield ms
    finally:
        ms.teardown()
