"""Group commit: acks wait for their offsets to be flushed; many appends share one flush."""

import asyncio
import threading


class FakeLog:
    """A stand-in with the two members the flusher uses; real logs are covered by the storage tests."""

    def __init__(self):
        self.end = 0
        self.flushed_offset = 0
        self.flushes = 0
        self.gate = threading.Event()
        self.gate.set()

    def flush(self):
        self.gate.wait(5)
        self.flushes += 1
        self.flushed_offset = self.end


def test_waiters_complete_after_their_offsets_are_flushed_and_flushes_are_grouped():
    from groupstream.broker.flusher import Flusher

    async def scenario():
        f = Flusher()
        plog = FakeLog()
        plog.gate.clear()  # hold the first flush so later appends pile up behind it
        plog.end = 10
        first = f.wait_flushed(plog, 10)
        waits = []
        for end in range(11, 31):
            plog.end = end
            waits.append(f.wait_flushed(plog, end))
        await asyncio.sleep(0)
        assert not first.done()
        plog.gate.set()
        await asyncio.wait_for(asyncio.gather(first, *waits), 5)
        assert plog.flushed_offset == 30
        assert plog.flushes <= 3  # 21 waiters, at most a few fsyncs
        await f.close()

    asyncio.run(scenario())


def test_already_flushed_offset_completes_at_once():
    from groupstream.broker.flusher import Flusher

    async def scenario():
        f = Flusher()
        plog = FakeLog()
        plog.flushed_offset = 5
        fut = f.wait_flushed(plog, 5)
        assert fut.done()
        await f.close()

    asyncio.run(scenario())
