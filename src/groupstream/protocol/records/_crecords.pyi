from collections.abc import Sequence
from typing import Any

class Fallback(Exception): ...

def decode(
    data: bytes | bytearray | memoryview,
    count: int,
    base_offset: int,
    base_timestamp: int,
    record_type: type[tuple[Any, ...]],
    topic: str,
    partition: int,
    timestamp_type: int,
    fixed_timestamp: int | None,
    min_offset: int,
    /,
) -> list[Any]: ...

def append_columns(
    data: bytes | bytearray | memoryview,
    count: int,
    base_offset: int,
    base_timestamp: int,
    fixed_timestamp: int | None,
    min_offset: int,
    partition: int,
    timestamp_type: int,
    columns: tuple[bytearray, ...],
    /,
) -> tuple[int, int]: ...

def append_record(
    batch: bytearray,
    timestamp: int,
    key: bytes | bytearray | memoryview | str | None,
    value: bytes | bytearray | memoryview | str | None,
    headers: Sequence[tuple[str, bytes | None]] | None,
    limit: int,
    /,
) -> int: ...
def append_rows(
    batches: list[bytearray | None],
    limits: list[int],
    timestamp: int,
    num_partitions: int,
    sticky: int,
    use_keys: bool,
    start: int,
    end: int,
    rows: Sequence[tuple[Any, ...]] | None,
    partitions: int | list[int | None] | None,
    arrow_keys: tuple[Any, Any, Any, int, int, bool] | None,
    arrow_values: tuple[Any, Any, Any, int, int, bool] | None,
    arrow_partitions: tuple[Any, Any, int, int] | None,
    touched: bytearray | None,
    /,
) -> tuple[int, int]: ...
def key_partition(key: bytes | bytearray | memoryview | str, num_partitions: int, /) -> int: ...
def append_routed(
    bufs: list[bytearray | None],
    limits: list[int],
    outcomes: list[Any],
    num_partitions: int,
    sticky: int,
    use_keys: bool,
    partition: int | None,
    key: bytes | bytearray | memoryview | str | None,
    value: bytes | bytearray | memoryview | str | None,
    timestamp: int | None,
    handle_type: type[tuple[Any, ...]],
    /,
) -> Any: ...
