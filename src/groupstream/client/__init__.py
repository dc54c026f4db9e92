"""The groupstream client. For now: a blocking connection, a synchronous Admin and small produce/fetch helpers;
the threaded Consumer and Producer arrive later and reuse the sans-IO codec, not the blocking connection."""
