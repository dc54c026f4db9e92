"""Classic-protocol group members spoken directly with our codec over blocking connections.

The crash test needs members whose member id and generation it knows exactly (real clients hide the
generation) and that it can drive step by step around a broker kill. `RawMember` does JoinGroup (answering
MEMBER_ID_REQUIRED), SyncGroup (the leader computes a range assignment), Heartbeat, OffsetCommit with its
generation, and LeaveGroup; `rebalance` runs one complete rebalance of several members concurrently, as real
members do (a JoinGroup is parked by the coordinator until every known member has joined).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from groupstream.client.admin import Admin
from groupstream.client.errors import KafkaConnectionError, KafkaError
from groupstream.client.net.sync_client import BrokerChannel
from groupstream.protocol.consumer_protocol import (
    ConsumerAssignment,
    ConsumerSubscription,
    decode_assignment,
    encode_assignment,
    encode_subscription,
)
from groupstream.protocol.error_codes import ErrorCode
from groupstream.protocol.messages import by_name
from support.waiting import wait_until

T = TypeVar("T")
RETRY = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                   ErrorCode.COORDINATOR_LOAD_IN_PROGRESS})  # fmt: skip


class RetryLater(Exception):
    def __init__(self, code: int) -> None:
        super().__init__(ErrorCode(code).name)
        self.code = code


def retrying(call: Callable[[], T], timeout: float = 30) -> T:
    """Repeat ``call`` while the coordinator moves, loads or the broker is restarting (every 0.1 s, until
    ``timeout``; then the last error is raised)."""
    result: list[T] = []
    last: list[BaseException] = []

    def answered() -> bool:
        try:
            result.append(call())
        except (RetryLater, KafkaConnectionError) as e:
            last[:] = [e]
            return False
        return True

    try:
        wait_until(answered, timeout, "the coordinator to answer", interval_s=0.1)
    except AssertionError:
        raise last[0] from None
    return result[0]


class RawMember:
    def __init__(self, bootstrap: str, group: str, topic: str, partitions: int, instance_id: str | None = None,
                 session_timeout_ms: int = 60_000) -> None:  # fmt: skip
        self.bootstrap = bootstrap
        self.group = group
        self.topic = topic
        self.partitions = partitions
        self.instance_id = instance_id
        self.session_timeout_ms = session_timeout_ms
        self.member_id = ""
        self.generation = -1
        self.leader = ""
        self.assignment: tuple[tuple[str, int], ...] = ()
        self._conn: BrokerChannel | None = None

    # -- connection to the coordinator ---------------------------------------------------------------

    def conn(self) -> BrokerChannel:
        if self._conn is None or self._conn.closed:
            with Admin({"bootstrap.servers": self.bootstrap}) as admin:
                _, host, port = admin.find_coordinator(self.group)
            self._conn = BrokerChannel(host, port, client_id=f"raw-{self.instance_id or 'dyn'}", request_timeout_ms=60_000)
        return self._conn

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def request(self, api: str, body: Mapping[str, Any], max_version: int | None = None) -> Any:
        conn = self.conn()
        try:
            return conn.request(api, body, conn.version_for(api, max_version))
        except KafkaConnectionError:
            self.close()
            raise

    # -- the protocol --------------------------------------------------------------------------------

    def join(self) -> Any:
        """JoinGroup until it succeeds (a first join at v4+ is answered MEMBER_ID_REQUIRED with our id)."""
        sub = encode_subscription(ConsumerSubscription((self.topic,)), 0)
        J: Any = by_name("JoinGroup").Request
        while True:
            resp = self.request("JoinGroup", {
                "group_id": self.group, "session_timeout_ms": self.session_timeout_ms,
                "rebalance_timeout_ms": 30_000, "member_id": self.member_id, "group_instance_id": self.instance_id,
                "protocol_type": "consumer", "protocols": [J.JoinGroupRequestProtocol(name="range", metadata=sub)],
            })  # fmt: skip
            if resp.error_code == ErrorCode.MEMBER_ID_REQUIRED:
                self.member_id = resp.member_id
                continue
            if resp.error_code in RETRY:
                self.close()
                raise RetryLater(resp.error_code)
            if resp.error_code != ErrorCode.NONE:
                raise KafkaError(resp.error_code, resource=f"JoinGroup {self.group}")
            self.member_id = resp.member_id
            self.generation = resp.generation_id
            self.leader = resp.leader
            return resp

    def sync(self, join_response: Any) -> None:
        S: Any = by_name("SyncGroup").Request
        assignments = []
        if self.member_id == join_response.leader:
            ids = sorted(m.member_id for m in join_response.members)
            for i, mid in enumerate(ids):
                mine = tuple((self.topic, p) for p in range(self.partitions) if p % len(ids) == i)
                assignments.append(S.SyncGroupRequestAssignment(member_id=mid, assignment=encode_assignment(
                    ConsumerAssignment(mine))))  # fmt: skip
        resp = self.request("SyncGroup", {
            "group_id": self.group, "generation_id": self.generation, "member_id": self.member_id,
            "group_instance_id": self.instance_id, "protocol_type": "consumer", "protocol_name": "range",
            "assignments": assignments,
        })  # fmt: skip
        if resp.error_code != ErrorCode.NONE:
            raise KafkaError(resp.error_code, resource=f"SyncGroup {self.group}")
        self.assignment = decode_assignment(resp.assignment).partitions

    def heartbeat(self) -> int:
        resp = self.request("Heartbeat", {
            "group_id": self.group, "generation_id": self.generation, "member_id": self.member_id,
            "group_instance_id": self.instance_id,
        })  # fmt: skip
        if resp.error_code in RETRY:
            self.close()
            raise RetryLater(resp.error_code)
        return int(resp.error_code)

    def commit(self, offsets: Mapping[int, int]) -> dict[int, int]:
        """OffsetCommit with this member's generation; error code per partition."""
        R: Any = by_name("OffsetCommit").Request
        T_ = R.OffsetCommitRequestTopic
        parts = [T_.OffsetCommitRequestPartition(partition_index=p, committed_offset=o, committed_metadata="")
                 for p, o in sorted(offsets.items())]  # fmt: skip
        resp = self.request("OffsetCommit", {
            "group_id": self.group, "generation_id_or_member_epoch": self.generation, "member_id": self.member_id,
            "group_instance_id": self.instance_id, "topics": [T_(name=self.topic, partitions=parts)],
        }, max_version=9)  # fmt: skip
        out = {p.partition_index: int(p.error_code) for t in resp.topics for p in t.partitions}
        if any(code in RETRY for code in out.values()):
            self.close()
            raise RetryLater(next(c for c in out.values() if c in RETRY))
        return out

    def leave(self) -> None:
        L: Any = by_name("LeaveGroup").Request
        conn = self.conn()
        version = conn.version_for("LeaveGroup")
        if version >= 3:
            body = L(group_id=self.group, members=[
                L.MemberIdentity(member_id=self.member_id, group_instance_id=self.instance_id)])  # fmt: skip
        else:
            body = L(group_id=self.group, member_id=self.member_id)
        resp = self.request("LeaveGroup", body._asdict())
        codes = [resp.error_code] + [m.error_code for m in resp.members]
        if any(c in RETRY for c in codes):
            self.close()
            raise RetryLater(next(c for c in codes if c in RETRY))
        if any(c != ErrorCode.NONE for c in codes):
            raise KafkaError(next(c for c in codes if c != ErrorCode.NONE), resource=f"LeaveGroup {self.group}")


def rebalance(members: Sequence[RawMember], timeout: float = 30) -> None:
    """Bring ``members`` into one generation, each in its own thread, as real members get there: join, sync,
    then heartbeat until every member has synced that same generation; a REBALANCE_IN_PROGRESS (someone
    joined after this member's generation completed) sends the member back to join. Raises the first
    failure."""
    synced: dict[int, int] = {}
    lock = threading.Lock()
    errors: list[BaseException] = []
    deadline = time.monotonic() + timeout

    def settled(i: int, generation: int) -> bool:
        with lock:
            return len(synced) == len(members) and set(synced.values()) == {generation}

    def run(i: int, m: RawMember) -> None:
        try:
            while time.monotonic() < deadline:
                resp = retrying(m.join, timeout)
                try:
                    m.sync(resp)
                except KafkaError as e:
                    if e.code == ErrorCode.REBALANCE_IN_PROGRESS:
                        continue
                    raise
                with lock:
                    synced[i] = m.generation
                while not settled(i, m.generation):
                    code = retrying(m.heartbeat, timeout)
                    if code == ErrorCode.REBALANCE_IN_PROGRESS:
                        with lock:
                            synced.pop(i, None)
                        break
                    if code != ErrorCode.NONE:
                        raise KafkaError(code, resource=f"Heartbeat {m.group}")
                    time.sleep(0.05)  # the heartbeat interval while the others catch up
                else:
                    return
            raise AssertionError(f"{m.group}: no common generation within {timeout:g}s")
        except BaseException as e:  # reported to the caller below
            errors.append(e)

    threads = [threading.Thread(target=run, args=(i, m)) for i, m in enumerate(members)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout + 5)
    if errors:
        raise errors[0]
    assert not any(t.is_alive() for t in threads), "a member is still rebalancing"
    assert len({m.generation for m in members}) == 1
