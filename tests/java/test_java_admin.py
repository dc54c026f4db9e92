"""Java's ``Admin`` against our broker gives what it gives against Apache Kafka, for the same scripted scenario.

The scenario (`admin_scenario`) runs once against our broker and once against a single Apache Kafka 4.x node
(the ``apache_node`` fixture, or ``--kafka-bootstrap``), through one harness JVM, with live groups of Java
members of both protocols: groups listed and described (live, empty, unknown), offsets listed, altered and
deleted (also where Kafka refuses: a live group, a subscribed topic), groups deleted (live, empty, unknown),
partitions added (and refused), records deleted (and refused), topic configs described. Each step's result
is normalised (the run's tag, member ids named by their client ids) and the two runs must be equal step by
step. ``incrementalAlterConfigs`` is compared on its own: SET, APPEND to a list config, DELETE, and the
refusals of a bad value and of an unknown config, each followed by the topic's configs as described.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from group_harness import unique, wait_for
from java_harness import Harness, MixedMembers, Step, compare

from support.apache_kafka import ApacheKafkaCluster, ExternalKafkaCluster
from support.brokers import BrokerProcess

pytestmark = [pytest.mark.compat, pytest.mark.slow, pytest.mark.broker_ours, pytest.mark.broker_apache]



class Normaliser:
    """Replaces what differs between two runs by nature: the run's tag (in topic and group names) and member
    ids (named after their members' client ids, which the scenario chooses)."""

    def __init__(self, tag: str) -> None:
        self.tag = tag
        self.member_ids: dict[str, str] = {}

    def learn(self, described: dict[str, Any]) -> None:
        for g in described.values():
            for m in g.get("members", []):
                self.member_ids[m["member_id"]] = f"<member {m['client_id']}>"

    def __call__(self, value: Any) -> Any:
        if isinstance(value, dict) and "error" in value:
            return {"error": value["error"]}  # the exception's class; its message is free text
        if isinstance(value, dict) and "group_epoch" in value:
            value = relative_epochs(value)
        if isinstance(value, dict):
            return {self(k): self(v) for k, v in sorted(value.items())}
        if isinstance(value, list):
            return [self(v) for v in value]
        if isinstance(value, str):
            return self.member_ids.get(value, value.replace(self.tag, "<tag>"))
        return value


def relative_epochs(group: dict[str, Any]) -> dict[str, Any]:
    """A described ``consumer`` group with its epochs as they relate instead of their numbers, which are the
    coordinator's own counting (Kafka 4.4 leaves a first member at epoch 2, we at 1: the group protocol's
    differential tests compare those). What a client relies on stays: a stable member is at the target
    assignment's epoch, which is the group's; an empty group's target is never ahead of the group."""
    g = dict(group)
    group_epoch, target_epoch = g.pop("group_epoch"), g.pop("target_assignment_epoch", None)
    if not g.get("members"):
        g["epochs"] = "target <= group" if target_epoch is not None and target_epoch <= group_epoch else "?"
        return g
    g["epochs"] = (
        f"target {'==' if target_epoch == group_epoch else '<' if target_epoch < group_epoch else '>'} group"
    )
    g["members"] = [
        {**m, "member_epoch": "== target" if m.get("member_epoch") == target_epoch else "!= target"}
        for m in g["members"]
    ]
    return g


def admin_scenario(h: Harness, bs: str, members: MixedMembers) -> list[Step]:
    tag = unique("adm")
    norm = Normaliser(tag)
    steps: list[Step] = []
    t, u = f"{tag}-t", f"{tag}-u"
    gc, gn, none = f"{tag}-classic", f"{tag}-consumer", f"{tag}-none"

    def step(name: str, value: Any) -> Any:
        steps.append((name, norm(value)))
        return value

    def admin(op: str, **fields: Any) -> Any:
        return h.admin(bs, op, **fields)

    def ours(listing: dict[str, Any]) -> dict[str, Any]:
        return {g: v for g, v in listing.items() if g.startswith(tag)}

    def offsets(group: str) -> dict[str, int]:
        return {f"{r[0]}-{r[1]}": r[2] for r in admin("list_offsets", group=group)["offsets"]}

    step("create t", admin("create_topic", topic=t, partitions=3))
    step("create u", admin("create_topic", topic=u, partitions=2))
    acks = [e for e in h.call("produce", bootstrap=bs, topic=t, count=30, codec="none") if e["ev"] == "ack"]
    ends = {f"{t}-{p}": sum(1 for a in acks if a["partition"] == p) for p in range(3)}
    step("produced", ends)

    members.common.update(client="java", bootstrap=bs, max_records=100)
    mc = members.start("mc", group=gc, topics=[t], protocol="classic", strategy="range")
    mn = members.start("mn", group=gn, topics=[t, u], protocol="consumer", strategy="uniform")
    wait_for(lambda: offsets(gc) == ends and offsets(gn) == ends, 60, "both groups to commit every record")
    wait_for(lambda: all(g["state"].upper() == "STABLE" for g in admin("describe_groups", groups=[gc, gn]).values()), 30,
             "both groups stable")  # fmt: skip

    step("list live groups", ours(admin("list_groups")))
    live = admin("describe_groups", groups=[gc, gn, none])
    norm.learn(live)
    step("describe live groups", live)
    step("alter offsets of a live classic group", admin("alter_offsets", group=gc, offsets=[[t, 0, 1]]))
    step("alter offsets of a live consumer group", admin("alter_offsets", group=gn, offsets=[[t, 0, 1]]))
    step(
        "delete offsets of a subscribed topic (classic)",
        admin("delete_offsets", group=gc, partitions=[[t, 0]]),
    )
    step(
        "delete offsets of a subscribed topic (consumer)",
        admin("delete_offsets", group=gn, partitions=[[u, 0]]),
    )
    step("delete live groups", admin("delete_groups", groups=[gc, gn]))

    mc.close()
    mn.close()
    wait_for(lambda: all(g["state"].upper() == "EMPTY" for g in admin("describe_groups", groups=[gc, gn]).values()), 30,
             "both groups empty")  # fmt: skip
    step("describe empty groups", admin("describe_groups", groups=[gc, gn]))
    step("list empty groups", ours(admin("list_groups")))
    step("offsets classic", offsets(gc))
    step("offsets consumer", offsets(gn))
    step("alter offsets", admin("alter_offsets", group=gc, offsets=[[t, 0, 1], [t, 1, 0], [u, 1, 0]]))
    step("offsets after alter", offsets(gc))
    step("delete offsets", admin("delete_offsets", group=gc, partitions=[[t, 2], [u, 0]]))
    step("offsets after delete", offsets(gc))
    step("alter offsets of an unknown group", admin("alter_offsets", group=none, offsets=[[t, 0, 3]]))
    step("offsets of the group alter created", offsets(none))

    step("create partitions 3 -> 5", admin("create_partitions", topic=t, total=5))
    step("describe t", admin("describe_topic", topic=t))
    step("create partitions 5 -> 4", admin("create_partitions", topic=t, total=4))
    step("create partitions of an unknown topic", admin("create_partitions", topic=f"{tag}-missing", total=2))
    step("offsets of t", admin("list_topic_offsets", topic=t))
    low = {str(p): 2 for p in range(3) if ends[f"{t}-{p}"] >= 2}
    step("delete records", admin("delete_records", topic=t, before=low))
    step("delete records beyond the end", admin("delete_records", topic=t, before={"3": 10}))
    step("offsets of t after delete", admin("list_topic_offsets", topic=t))
    keys = ["cleanup.policy", "retention.ms", "retention.bytes", "segment.bytes", "max.message.bytes"]
    step("describe configs", admin("describe_configs", topic=t, keys=keys))

    step("delete groups", admin("delete_groups", groups=[gc, gn, none, f"{tag}-never"]))
    step("list groups after delete", ours(admin("list_groups")))
    return steps


def incremental_alter_configs_scenario(h: Harness, bs: str) -> list[Step]:
    tag = unique("cfg")
    norm = Normaliser(tag)
    t = f"{tag}-t"
    keys = ["retention.ms", "cleanup.policy", "max.message.bytes"]
    steps: list[Step] = [("create", h.admin(bs, "create_topic", topic=t, partitions=1))]
    for name, ops in [
        ("set", [["SET", "retention.ms", "12345"], ["SET", "max.message.bytes", "200000"]]),
        ("append", [["APPEND", "cleanup.policy", "compact"]]),
        ("delete", [["DELETE", "retention.ms", None]]),
        ("invalid value", [["SET", "retention.ms", "soon"]]),
        ("unknown config", [["SET", "no.such.config", "1"]]),
    ]:
        steps.append((name, norm(h.admin(bs, "incremental_alter_configs", topic=t, ops=ops))))
        steps.append((f"after {name}", norm(h.admin(bs, "describe_configs", topic=t, keys=keys))))
    return steps


Apache = ApacheKafkaCluster | ExternalKafkaCluster


def run_both(run: Callable[[str], list[Step]], ours_bs: str, apache_bs: str) -> tuple[list[Step], list[Step]]:
    t0 = time.monotonic()
    theirs = run(apache_bs)
    t1 = time.monotonic()
    ours = run(ours_bs)
    print(f"\nApache Kafka {t1 - t0:.1f} s, ours {time.monotonic() - t1:.1f} s")
    return ours, theirs


def test_java_admin_matches_apache_kafka(
    java_broker: BrokerProcess, apache_node: Apache, harness: Harness, members: MixedMembers
) -> None:
    ours, theirs = run_both(lambda bs: admin_scenario(harness, bs, members), java_broker.bootstrap,
                            apache_node.bootstrap)  # fmt: skip
    compare(ours, theirs)


def test_java_incremental_alter_configs_matches_apache_kafka(
    java_broker: BrokerProcess, apache_node: Apache, harness: Harness
) -> None:
    ours, theirs = run_both(lambda bs: incremental_alter_configs_scenario(harness, bs), java_broker.bootstrap,
                            apache_node.bootstrap)  # fmt: skip
    compare(ours, theirs)
