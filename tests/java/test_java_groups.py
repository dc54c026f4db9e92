"""Java consumer groups (``KafkaConsumer`` 4.x) on our broker, each member in its own JVM, alone and mixed with
our own consumer.

The lifecycle scenario of ``tests/compat/groups`` (``test_group_lifecycle.scenario``), with the same checks:
joins while records flow, a member killed with SIGKILL whose partitions return after its session (or, under
``consumer``, is fenced), a leave, and a fresh member resuming from the last commits. No partition ever has
two owners, every acknowledged commit comes from the partition's owner, each owner starts at the last commit,
and every produced record is processed.
"""

from __future__ import annotations

import pytest
from java_harness import MixedMembers
from test_group_lifecycle import scenario

from support.brokers import BrokerProcess

pytestmark = [pytest.mark.compat, pytest.mark.slow, pytest.mark.broker_ours]

# (protocol, assignor, clients of members A..D: Java only, or Java and ours taking turns)
JAVA = {"A": "java", "B": "java", "C": "java", "D": "java"}
MIXED = {"A": "java", "B": "groupstream", "C": "java", "D": "groupstream"}
CASES = [
    ("classic", "range", JAVA),
    ("classic", "cooperative-sticky", MIXED),
    ("consumer", "uniform", JAVA),
    ("consumer", "range", MIXED),
]


@pytest.mark.parametrize(
    ("protocol", "assignor", "clients"),
    CASES,
    ids=[f"{p}-{a}-{'mixed' if c is MIXED else 'java'}" for p, a, c in CASES],
)
def test_java_group_join_crash_leave_resume(
    java_broker: BrokerProcess, members: MixedMembers, protocol: str, assignor: str, clients: dict[str, str]
) -> None:
    members.clients.update(clients)
    scenario(java_broker.bootstrap, members, "java", assignor, protocol=protocol)
