"""The bulk paths: ``produce_batch`` (a list of ``(key, value[, headers])`` rows) and ``produce_arrow`` (an Arrow
table with Spark's Kafka sink columns) append many rows per call of the C encoder, reading Arrow columns'
buffers directly, and return one `BulkDelivery` for all of them.

A bulk call first needs its topic's route: without one, its first row is produced as ``produce`` would (handed
to the network thread) and the call waits for the route (``_route_for``). Then ``_bulk`` appends chunks of rows
under the accumulator's lock, opening batches sized for the rows still to come.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from groupstream.client.net.network_thread import monotonic_ms
from groupstream.client.producer import encode
from groupstream.client.producer.accumulator import TopicRoute
from groupstream.client.producer.core import Headers, header_list, headers_of, record_timestamp
from groupstream.client.producer.future import BatchOutcome, BulkDelivery
from groupstream.client.producer.record_path import Record, RecordPath
from groupstream.protocol.records.batch_header import HEADER_SIZE

_BULK_CHUNK = 4096  # rows per call of the encoder in the bulk paths: the lock is let go in between
_ROW_OVERHEAD = 12  # a small record's bytes beyond its key and value, about (sizing batches in the bulk paths)

Partitions = int | list[int | None] | None  # the encoder's: one for all rows, one per row, or its own choice


class BulkPaths(RecordPath):
    def produce_batch(
        self,
        topic: str,
        records: Iterable[tuple[Any, ...]],
        *,
        partition: int | None = None,
        timestamp: int | None = None,
    ) -> BulkDelivery:
        """Append many records of one topic: ``records`` are ``(key, value)`` or ``(key, value, headers)``
        tuples (serialized as ``produce`` does). Each goes to ``partition``, or where ``produce`` would put it.
        All get ``timestamp`` (default: now). Returns one `BulkDelivery` for them all; no per-record callback.
        Waits, as ``produce`` may, when ``buffer.memory`` is full, and for the topic's metadata (up to
        ``max.block.ms``) when it has none yet."""
        if self._acc.refusal is not None:
            raise self._refused()
        rows = records if isinstance(records, list | tuple) else list(records)
        if self._serializing or any(len(r) != 2 for r in rows):
            rows = [self._bulk_row(topic, r) for r in rows]
        timestamp = record_timestamp(timestamp)
        if not rows:
            return BulkDelivery(0, [])
        route, outcomes, start = self._route_for(topic, partition, rows[0], timestamp)
        if start == len(rows):
            return BulkDelivery(len(rows), outcomes)
        partitions = self._row_partitions(route, partition, start, lambda: [r[0] for r in rows])
        step = max(1, len(rows) // 64)
        sample = rows[start::step]
        row_bytes = _ROW_OVERHEAD + sum(len(r[0] or b"") + len(r[1] or b"") for r in sample) // max(
            1, len(sample)
        )
        self._bulk_rows(route, start, rows, partitions, timestamp, outcomes, row_bytes)
        return BulkDelivery(len(rows), outcomes)

    def produce_arrow(
        self,
        table: Any,
        topic: str | None = None,
        *,
        partition: int | None = None,
        timestamp: int | None = None,
    ) -> BulkDelivery:
        """Append the rows of a ``pyarrow.Table`` or ``RecordBatch`` with the columns of Spark's Kafka sink:
        ``value`` (binary or string), optional ``key``, ``headers`` (list of struct<key: string, value:
        binary>), ``partition`` (integers) and ``topic`` (used when the ``topic`` argument is None). Keys and
        values are encoded straight from the columns' buffers; rows whose ``headers`` are not all empty take
        a slower path through Python objects. Serializers do not apply. Returns one `BulkDelivery`."""
        import pyarrow as pa
        import pyarrow.compute as pc

        if self._acc.refusal is not None:
            raise self._refused()
        if isinstance(table, pa.RecordBatch):
            table = pa.Table.from_batches([table])
        if not isinstance(table, pa.Table):
            raise TypeError(f"produce_arrow takes a pyarrow Table or RecordBatch, not {type(table).__name__}")
        names = set(table.column_names)
        if "value" not in names:
            raise ValueError("produce_arrow needs a 'value' column")
        if timestamp is None:
            timestamp = time.time_ns() // 1_000_000
        if topic is None:
            if "topic" not in names:
                raise ValueError("produce_arrow needs a topic: the 'topic' argument or a 'topic' column")
            topics = table.column("topic")
            if topics.null_count:
                raise ValueError("a row has no topic (a null 'topic' and no 'topic' argument)")
            outcomes: list[BatchOutcome] = []
            for t in pc.unique(topics).to_pylist():
                part = self.produce_arrow(table.filter(pc.equal(topics, t)), str(t), partition=partition,
                                          timestamp=timestamp)  # fmt: skip
                outcomes += part._outcomes
            return BulkDelivery(table.num_rows, outcomes)
        outcomes = []
        done = 0
        for rb in table.combine_chunks().to_batches() if table.num_rows else []:
            part = self._produce_arrow_batch(rb, topic, partition, timestamp)
            outcomes += part._outcomes
            done += part.count
        return BulkDelivery(done, outcomes)

    def _produce_arrow_batch(
        self, rb: Any, topic: str, partition: int | None, timestamp: int
    ) -> BulkDelivery:
        import pyarrow.compute as pc

        names = set(rb.schema.names)
        n: int = rb.num_rows
        keys = rb.column("key") if "key" in names else None
        values = rb.column("value")
        parts = rb.column("partition") if "partition" in names and partition is None else None
        headers = rb.column("headers") if "headers" in names else None
        if headers is not None and (
            headers.null_count == n or pc.max(pc.list_value_length(headers)).as_py() in (0, None)
        ):
            headers = None  # no row has a header: the columns go to the encoder as they are
        first_row = (
            _py_value(keys, 0),
            _py_value(values, 0),
            _arrow_headers(headers[0].as_py()) if headers is not None else None,
        )
        row_partition = partition
        if parts is not None and parts[0].is_valid:
            row_partition = int(parts[0].as_py())
        route, outcomes, start = self._route_for(topic, row_partition, first_row, timestamp)
        if start == n:
            return BulkDelivery(n, outcomes)

        def key_list() -> list[Any]:
            return keys.to_pylist() if keys is not None else [None] * n

        partitions = self._row_partitions(route, partition, start, key_list if parts is None else None)
        if parts is not None:
            count = route.count
            low, high = pc.min_max(parts).values()
            if (low.is_valid and low.as_py() < 0) or (high.is_valid and high.as_py() >= count):
                raise ValueError(f"a 'partition' of topic {topic!r} is outside 0..{count - 1}")
            parts = parts.cast("int32")

        def row_bytes() -> int:
            data = sum(pc.sum(pc.binary_length(c)).as_py() or 0 for c in (keys, values) if c is not None)
            return _ROW_OVERHEAD + data // n

        if headers is not None:  # through Python objects; the encoder still takes the rows in one call
            rows = list(zip(key_list(), values.to_pylist(), [_arrow_headers(h) for h in headers.to_pylist()],
                            strict=True))  # fmt: skip
            if parts is not None and partitions is None:
                partitions = parts.to_pylist()
            self._bulk_rows(route, start, rows, partitions, timestamp, outcomes, row_bytes())
            return BulkDelivery(n, outcomes)
        append_rows = self._append_rows
        by_key = self._by_key
        key_spec = _binary_spec(keys) if keys is not None else None
        value_spec = _binary_spec(values)
        part_spec = _int32_spec(parts) if parts is not None and partitions is None else None

        def run(i: int, end: int, r: TopicRoute, touched: bytearray) -> tuple[int, int]:
            return append_rows(r.bufs, r.limits, timestamp, r.count, r.sticky, by_key, i, end, None, partitions,
                               key_spec, value_spec, part_spec, touched)  # fmt: skip

        def keyless(i: int) -> bool:
            if partitions is not None or (parts is not None and parts[i].is_valid):
                return False
            return keys is None or not keys[i].is_valid or not by_key

        self._bulk(route, start, n, run, keyless, outcomes, row_bytes())
        return BulkDelivery(n, outcomes)

    def _bulk_row(self, topic: str, row: tuple[Any, ...]) -> tuple[Any, ...]:
        if not isinstance(row, tuple) or len(row) not in (2, 3):
            raise TypeError(f"a record is a (key, value) or (key, value, headers) tuple, not {row!r}")
        key, value = self._serialize(row[0], row[1], topic)
        if len(row) == 3 and row[2]:
            return (key, value, headers_of(row[2]))
        return (key, value)

    def _row_partitions(
        self, route: TopicRoute, partition: int | None, start: int, keys: Callable[[], Sequence[Any]] | None
    ) -> Partitions:
        """The encoder's ``partitions`` for rows ``start`` on: ``partition`` for all of them (checked), else the
        custom partitioner's choice for each row, if there is one and ``keys`` gives the rows' keys, else None
        (the encoder chooses)."""
        if partition is not None:
            if not 0 <= partition < route.count:
                raise ValueError(
                    f"partition {partition} of topic {route.topic!r} does not exist (it has {route.count})"
                )
            return partition
        if self._custom is None or keys is None:
            return None
        custom, count = self._custom, route.count
        partitions: list[int | None] = [None] * start + [custom(route.topic, k, count) for k in keys()[start:]]
        for p in partitions:
            if p is not None and not 0 <= p < count:
                raise ValueError(f"the partitioner chose partition {p} of topic {route.topic!r} (it has {count})")
        return partitions

    def _route_for(
        self, topic: str, partition: int | None, row: tuple[Any, ...], timestamp: int
    ) -> tuple[TopicRoute, list[BatchOutcome], int]:
        """The topic's route, the outcomes of rows produced so far and the row to go on from. Without a route
        yet, the first row is produced as ``produce`` would (handed to the network thread, which asks for the
        metadata) and this waits for the route, or for that record to fail (after ``max.block.ms`` without
        metadata, or at close), raising its error; the first row's outcome is returned then, as it is produced,
        and the rows go on from the second."""
        acc = self._acc
        route = acc.routes.get(topic)
        if route is not None:
            return route, [], 0
        hdrs = row[2] if len(row) > 2 else None
        handle = self._produce_slow(Record(topic, partition, row[0], row[1], timestamp, hdrs, None))
        with acc.route_changed:  # notified by a route published and by a handed-over record failing
            while topic not in acc.routes and not handle.done():
                if not self._thread.alive:
                    raise self._refused()
                acc.route_changed.wait(1.0)
            route = acc.routes.get(topic)
        if route is None:
            error = handle.exception(0)
            assert error is not None
            raise error
        return route, [handle[0]], 1

    def _bulk_rows(
        self,
        route: TopicRoute,
        start: int,
        rows: Sequence[tuple[Any, ...]],
        partitions: Partitions,
        timestamp: int,
        outcomes: list[BatchOutcome],
        row_bytes: int,
    ) -> None:
        """``_bulk`` for rows that are ``(key, value[, headers])`` tuples."""
        append_rows = self._append_rows
        by_key = self._by_key

        def run(i: int, end: int, r: TopicRoute, touched: bytearray) -> tuple[int, int]:
            return append_rows(r.bufs, r.limits, timestamp, r.count, r.sticky, by_key, i, end, rows, partitions,
                               None, None, None, touched)  # fmt: skip

        def keyless(i: int) -> bool:
            return partitions is None and (rows[i][0] is None or not by_key)

        self._bulk(route, start, len(rows), run, keyless, outcomes, row_bytes)

    def _bulk(
        self,
        route: TopicRoute,
        start: int,
        end: int,
        run: Callable[[int, int, TopicRoute, bytearray], tuple[int, int]],
        keyless: Callable[[int], bool],
        outcomes: list[BatchOutcome],
        row_bytes: int,
    ) -> None:
        """Append rows ``start..end-1`` with ``run`` (one call of the encoder for many rows), opening batches as
        partitions fill up, and collect the outcomes of the batches the rows went into.

        The rows are all here already, so a batch opened for them is sized for the rows left that will go to it
        (``row_bytes`` each, estimated; all of them for records without a key or with one partition, their
        share of the partitions otherwise), between ``batch.size`` and ``batch.max.size``: what a batch would
        grow to anyway while the sender works through the backlog, without the steps.

        A batch is opened only when the row that needs it is appended in the same hold of the lock (the network
        thread never sees an empty batch); the lock is let go between chunks of rows, and to wait for
        ``buffer.memory``, whose bytes are then kept (``spare``) for the next batch opened."""
        acc = self._acc
        lock = acc.lock
        memory = self._memory
        partitioner = self._partitioner
        touched = bytearray(route.count)
        seen: set[int] = set()
        spare = 0
        i = start
        try:
            while i < end:
                wake = False
                need = 0
                lock.acquire()
                try:
                    if acc.refusal is not None:
                        raise self._refused()
                    if len(touched) < route.count:
                        touched.extend(bytes(route.count - len(touched)))
                    stop = min(end, i + _BULK_CHUNK)
                    while i < stop:
                        partitioner.sticky(route)
                        i, full = run(i, stop, route, touched)
                        p = touched.find(1)
                        while p >= 0:  # the batches rows went into, collected while they are the open ones
                            touched[p] = 0
                            outcome = route.open[p].outcome  # type: ignore[union-attr]
                            if id(outcome) not in seen:
                                seen.add(id(outcome))
                                outcomes.append(outcome)
                            p = touched.find(1, p + 1)
                        if full < 0 or acc.grow(route, full, memory.try_reserve):
                            continue  # the chunk is done, or the full batch took more room
                        alone = keyless(i)
                        if full == route.sticky and route.open[full] is not None and alone:
                            wake = acc.seal_open(route, full) or wake  # the sticky partition moves (KIP-480)
                            partitioner.next_sticky(route)
                            continue
                        left = (end - i) * row_bytes // (1 if alone else route.count)
                        capacity = max(acc.capacity, min(acc.max_capacity, HEADER_SIZE + left))
                        if spare < capacity:
                            if not memory.try_reserve(capacity - spare):
                                need = capacity - spare  # wait for it without the lock
                                break
                            spare = capacity
                        spare -= capacity
                        _batch, opened_wake = acc.open_batch(route, full, capacity, capacity, monotonic_ms())
                        wake = wake or opened_wake
                finally:
                    lock.release()
                if wake:
                    self._wakeup()
                if need:
                    memory.reserve(need, self.config.max_block_ms, self.__len__)
                    spare += need
        finally:
            if spare:
                memory.release(spare)


def _arrow_headers(items: Sequence[Any] | None) -> Headers | None:
    """A ``headers`` cell of Spark's sink (a list of {key, value} structs) as the encoder's header list."""
    if not items:
        return None
    return header_list((h["key"], h["value"]) if isinstance(h, Mapping) else h for h in items)


def _py_value(column: Any, i: int) -> bytes | None:
    if column is None:
        return None
    v = column[i].as_py()
    return v.encode() if isinstance(v, str) else v


def _binary_spec(column: Any) -> encode.ArrowBinary | None:
    """An Arrow binary or string column as the encoder reads it: (offsets, data, validity, offset, length,
    64-bit offsets)."""
    import pyarrow as pa

    t = column.type
    if pa.types.is_null(t):
        return None
    if pa.types.is_binary_view(t) or pa.types.is_string_view(t):
        column = column.cast(pa.binary())
        t = column.type
    if pa.types.is_binary(t) or pa.types.is_string(t):
        wide = False
    elif pa.types.is_large_binary(t) or pa.types.is_large_string(t):
        wide = True
    else:
        raise TypeError(f"a key or value column must be binary or string, not {t}")
    validity, offsets, data = column.buffers()[:3]
    return (offsets, data if data is not None else b"", validity if column.null_count else None, column.offset,
            len(column), wide)  # fmt: skip


def _int32_spec(column: Any) -> encode.ArrowInt32:
    validity, values = column.buffers()[:2]
    return (values, validity if column.null_count else None, column.offset, len(column))
