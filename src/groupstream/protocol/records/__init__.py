"""RecordBatch v2: the unit the broker stores and moves without re-encoding."""
