"""The Python worker's client cache, with a manual clock and plain objects for clients: reuse by configuration,
one task per client, closing on failure, idle expiry, capacity, exit, and a forked worker."""

from __future__ import annotations

from collections.abc import Generator, Hashable, Iterator

import pytest

from groupstream.spark.client_cache import ClientCache


class FakeClient:
    def __init__(self, key: Hashable, n: int) -> None:
        self.key = key
        self.n = n
        self.closed = False
        self.resets = 0


class Kit:
    def __init__(self) -> None:
        self.now = 0.0
        self.pid = 100
        self.made: list[FakeClient] = []
        self.cache: ClientCache[FakeClient] = ClientCache(
            self.make, self.close, idle_timeout_s=60, capacity=2, clock=lambda: self.now, pid=lambda: self.pid
        )

    def make(self, key: Hashable) -> FakeClient:
        client = FakeClient(key, len(self.made))
        self.made.append(client)
        return client

    @staticmethod
    def close(client: FakeClient) -> None:
        client.closed = True


@pytest.fixture
def kit() -> Iterator[Kit]:
    yield Kit()


def reset(client: FakeClient) -> None:
    client.resets += 1


def test_a_client_is_lent_again_to_the_next_task_with_the_same_configuration(kit: Kit) -> None:
    with kit.cache.lend("a", reset) as first:
        assert kit.cache.lent == 1
    with kit.cache.lend("a", reset) as again:
        assert again is first
    with kit.cache.lend("b", reset) as other:
        assert other is not first and other.key == "b"
    assert first.resets == 2 and not first.closed
    assert kit.cache.idle == 2 and kit.cache.lent == 0


def test_a_client_is_lent_to_one_task_at_a_time(kit: Kit) -> None:
    with kit.cache.lend("a") as one, kit.cache.lend("a") as two:
        assert one is not two
    assert kit.cache.idle == 2


def test_a_failed_task_closes_its_client_and_the_next_gets_a_new_one(kit: Kit) -> None:
    with pytest.raises(RuntimeError, match="broken"), kit.cache.lend("a", reset) as first:
        raise RuntimeError("broken")
    assert first.closed and first.resets == 0
    with kit.cache.lend("a") as second:
        assert second is not first
    assert kit.cache.lent == 0


def test_an_abandoned_generator_returns_its_client(kit: Kit) -> None:
    def read() -> Generator[int, None, None]:
        with kit.cache.lend("a", reset):
            yield 1
            yield 2

    gen = read()
    assert next(gen) == 1
    gen.close()  # what Python does when Spark stops reading a task's iterator early
    assert kit.cache.idle == 1 and kit.made[0].resets == 1 and not kit.made[0].closed


def test_a_client_that_cannot_be_reset_is_closed(kit: Kit) -> None:
    def bad_reset(_client: FakeClient) -> None:
        raise OSError("gone")

    with kit.cache.lend("a", bad_reset) as client:
        pass
    assert client.closed and kit.cache.idle == 0


def test_idle_clients_expire_and_the_cache_keeps_at_most_its_capacity(kit: Kit) -> None:
    with kit.cache.lend("a") as a:
        pass
    kit.now = 30
    with kit.cache.lend("b") as b:
        pass
    kit.now = 61  # a idle 61 s, b 31 s: a expires when the cache is next used
    with kit.cache.lend("c") as c:
        pass
    assert a.closed and not b.closed and not c.closed
    with kit.cache.lend("d") as d:
        pass
    assert b.closed, "beyond the capacity of 2 the oldest idle client goes"
    assert not c.closed and not d.closed and kit.cache.idle == 2


def test_close_ends_every_idle_client(kit: Kit) -> None:
    with kit.cache.lend("a") as a, kit.cache.lend("b") as b:
        pass
    kit.cache.close()
    assert a.closed and b.closed and kit.cache.idle == 0


def test_a_forked_worker_forgets_its_parents_clients_without_closing_them(kit: Kit) -> None:
    with kit.cache.lend("a") as parents:
        pass
    kit.pid = 101
    with kit.cache.lend("a") as own:
        assert own is not parents
    assert not parents.closed, "closing would act on the parent's sockets"
    kit.cache.close()
    assert own.closed and not parents.closed


def test_a_factory_that_fails_leaves_nothing_lent(kit: Kit) -> None:
    def failing(_key: Hashable) -> FakeClient:
        raise ValueError("unknown property 'x'")

    cache: ClientCache[FakeClient] = ClientCache(failing, Kit.close, clock=lambda: 0.0)
    with pytest.raises(ValueError, match="unknown property"), cache.lend("a"):
        pass
    assert cache.lent == 0 and cache.idle == 0
