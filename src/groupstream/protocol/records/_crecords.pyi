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
