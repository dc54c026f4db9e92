"""The fetch purgatory is woken by appended bytes, not by polling."""

import asyncio

from groupstream.broker.purgatory import FetchPurgatory


def test_wakes_when_enough_bytes_arrive_on_a_watched_partition():
    async def scenario():
        p = FetchPurgatory()
        fut = p.watch([("t", 0), ("t", 1)], needed_bytes=100, timeout_ms=60_000)
        p.notify(("t", 0), 60)
        p.notify(("other", 0), 500)
        await asyncio.sleep(0)
        assert not fut.done()
        p.notify(("t", 1), 40)
        assert await fut is True
        assert len(p) == 0

    asyncio.run(scenario())


def test_times_out_with_false():
    async def scenario():
        p = FetchPurgatory()
        loop = asyncio.get_running_loop()
        start = loop.time()
        assert await p.watch([("t", 0)], needed_bytes=1, timeout_ms=20) is False
        assert loop.time() - start >= 0.015
        assert len(p) == 0

    asyncio.run(scenario())


def test_wake_all_releases_every_waiter():
    async def scenario():
        p = FetchPurgatory()
        futs = [p.watch([("t", i)], needed_bytes=10, timeout_ms=60_000) for i in range(3)]
        p.wake_all()
        assert await asyncio.gather(*futs) == [True, True, True]

    asyncio.run(scenario())
