"""groupstream: Kafka consumer groups done right, in Python."""

__version__ = "0.1.0"
