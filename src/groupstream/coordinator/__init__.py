"""Group coordinator: pure shards replayed from `__consumer_offsets` records (no I/O, no clock, no threads)."""
