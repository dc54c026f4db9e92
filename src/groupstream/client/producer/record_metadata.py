"""Where a record ended up: the value a delivery future resolves to."""

from __future__ import annotations

from typing import NamedTuple


class RecordMetadata(NamedTuple):
    """``offset`` is -1 when the broker does not say (acks=0). ``timestamp`` is the record's own (CreateTime)
    or the broker's append time when the topic uses LogAppendTime."""

    topic: str
    partition: int
    offset: int
    timestamp: int
