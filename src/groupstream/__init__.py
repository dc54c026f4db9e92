"""groupstream: Kafka consumer groups done right, in Python."""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"
__all__ = ["Admin", "Consumer", "Producer"]


def __getattr__(name: str) -> Any:
    # Imported on first use, so `groupstream broker` does not load the client's threads and sockets.
    if name == "Producer":
        from groupstream.client.producer import Producer

        return Producer
    if name == "Consumer":
        from groupstream.client.consumer.consumer import Consumer

        return Consumer
    if name == "Admin":
        from groupstream.client.admin import Admin

        return Admin
    raise AttributeError(f"module 'groupstream' has no attribute {name!r}")
