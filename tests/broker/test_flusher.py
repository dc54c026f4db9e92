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


class FailingLog(FakeLog):
    """Raises the given errors from its first flushes, then flushes normally; ``flushed`` is set by a flush that
    succeeded."""

    def __init__(self, errors):
        super().__init__()
        self.errors = list(errors)
        self.flushed = threading.Event()

    def flush(self):
        if self.errors:
            raise self.errors.pop(0)
        super().flush()
        self.flushed.set()


def test_a_failed_flush_fails_only_its_own_waiters_and_a_passing_failure_is_retried():
    from groupstream.broker.flusher import Flusher
    from groupstream.storage.errors import LogWriteError

    async def scenario():
        f = Flusher()
        bad = FailingLog([LogWriteError("out of descriptors")])
        good = FakeLog()
        bad.end = good.end = 10
        bad_wait = f.wait_flushed(bad, 10)
        good_wait = f.wait_flushed(good, 10)
        await asyncio.wait_for(asyncio.wait([bad_wait, good_wait]), 5)
        assert good_wait.result() is None  # one partition's failure holds back nobody else's acks
        assert isinstance(bad_wait.exception(), LogWriteError)
        assert f.retrying() == {bad}
        # the failed log is flushed again after the retry delay, without a new append asking for it
        loop = asyncio.get_running_loop()
        assert await asyncio.wait_for(loop.run_in_executor(None, bad.flushed.wait, 5), 6)
        assert bad.flushed_offset == 10 and f.retrying() == frozenset()
        await f.close()

    asyncio.run(scenario())


def test_an_offline_log_is_not_retried():
    from groupstream.broker.flusher import Flusher
    from groupstream.storage.errors import LogOfflineError

    async def scenario():
        f = Flusher()
        dead = FailingLog([LogOfflineError("fsync failed")] * 3)
        dead.end = 10
        first = f.wait_flushed(dead, 10)
        await asyncio.wait_for(asyncio.wait([first]), 5)
        assert isinstance(first.exception(), LogOfflineError)
        assert f.retrying() == frozenset(), "an offline log was scheduled to be flushed again"
        await f.close()
        assert len(dead.errors) == 2  # flushed once, and not again by close

    asyncio.run(scenario())


def test_a_slow_flush_of_one_partition_holds_back_no_other_partitions_waiters():
    """Flushes of different partitions run side by side: a coordinator's answer or an acks=all produce on one
    partition does not queue behind a slow fsync (or a round over busy partitions nobody waits for)."""
    from groupstream.broker.flusher import Flusher

    async def scenario():
        f = Flusher()
        slow = FakeLog()
        slow.gate.clear()  # its flush hangs until released
        slow.end = 10
        f.appended(slow, "always")
        fast = FakeLog()
        fast.end = 5
        await asyncio.wait_for(f.wait_flushed(fast, 5), 2)
        assert fast.flushed_offset == 5 and slow.flushes == 0
        slow.gate.set()
        await f.close()
        assert slow.flushed_offset == 10

    asyncio.run(scenario())


def test_logs_somebody_waits_on_are_flushed_before_the_others():
    from groupstream.broker.flusher import Flusher

    order = []

    class OrderedLog(FakeLog):
        def __init__(self, name):
            super().__init__()
            self.name = name

        def flush(self):
            super().flush()
            order.append(self.name)

    async def scenario():
        f = Flusher(workers=1)
        first = OrderedLog("first")
        first.gate.clear()  # the only worker is busy with it while the others become dirty
        first.end = 1
        f.appended(first, "always")
        await asyncio.sleep(0)  # one turn of the loop: the flusher starts flushes at the end of a turn
        quiet = [OrderedLog(f"quiet{i}") for i in range(3)]
        for q in quiet:
            q.end = 1
            f.appended(q, "always")
        waited = OrderedLog("waited")
        waited.end = 1
        done = f.wait_flushed(waited, 1)
        first.gate.set()
        await asyncio.wait_for(done, 5)
        await f.close()
        assert order[:2] == ["first", "waited"], order
        assert sorted(order[2:]) == ["quiet0", "quiet1", "quiet2"]

    asyncio.run(scenario())
