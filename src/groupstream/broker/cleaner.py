"""The broker's log cleaner: compacts partitions with ``cleanup.policy=compact`` every ``log.cleaner.backoff.ms``.

Planning and swapping run on the event loop (they touch the partition's segment list, which the loop owns);
reading the old segments and writing the cleaned ones runs on one background thread, so a large cleaning
never stalls requests. One partition is cleaned at a time, as by Kafka's single default cleaner thread.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
from collections.abc import Callable

from groupstream.storage.catalog import Catalog
from groupstream.storage.compaction import CleanPlan, CleanStats, commit_cleaning, compacts, plan_cleaning
from groupstream.storage.errors import StorageError

log = logging.getLogger("groupstream.broker.cleaner")


class LogCleaner:
    def __init__(self, catalog: Catalog, now_ms: Callable[[], int], backoff_ms: int) -> None:
        self._catalog = catalog
        self._now_ms = now_ms
        self._backoff_s = backoff_ms / 1000.0
        self._executor = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="groupstream-cleaner")
        self._task: asyncio.Task[None] | None = None
        self._building: tuple[CleanPlan, asyncio.Future[None]] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="log-cleaner")

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self._backoff_s)
            try:
                await self.clean_once()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("log cleaning failed")

    async def clean_once(self, *, force: bool = False) -> dict[str, CleanStats]:
        """One pass over every compacted partition; returns the stats of those cleaned, by partition name."""
        done: dict[str, CleanStats] = {}
        for _topic, _partition, plog in list(self._catalog.logs()):
            if plog.closed or not compacts(plog.config):
                continue
            plan = plan_cleaning(plog, self._now_ms(), force=force)
            if plan is None:
                continue
            building = asyncio.get_running_loop().run_in_executor(self._executor, plan.build)
            self._building = (plan, building)
            try:
                await building
            except (OSError, StorageError) as exc:  # a full disk: say so, without a traceback every pass
                log.warning("cleaning %s failed (%s); its segments are unchanged, retrying in %.0f s", plog.name,
                            getattr(exc, "strerror", None) or exc, self._backoff_s)
                continue
            except Exception:
                log.exception("cleaning %s failed; its segments are unchanged", plog.name)
                continue
            finally:
                if building.done():  # when cancelled instead, the thread may still be writing: close() waits
                    self._building = None
            stats = commit_cleaning(plog, plan)
            done[plog.name] = stats
            log.info("cleaned %s: %d records removed (%d tombstones), %d -> %d bytes, %d -> %d segments",
                     plog.name, stats.records_removed, stats.tombstones_removed, stats.bytes_in, stats.bytes_out,
                     stats.segments_in, stats.segments_out)
        return done

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
        await asyncio.get_running_loop().run_in_executor(None, self._executor.shutdown, True)
        if self._building is not None:
            self._building[0].discard()
            self._building = None
