"""A realistic, reproducible page-view stream for the demo: user keys with a long-tailed popularity, JSON
values, event timestamps that advance like a busy site's, and a few late events (a phone that was offline
sends its views up to ``max_late_ms`` after they happened). Seeded, so every run produces the same bytes."""

from __future__ import annotations

import itertools
import json
import random
from collections.abc import Iterator
from typing import NamedTuple


class PageView(NamedTuple):
    """One event as the demo produces it (the arguments of ``Producer.produce``)."""

    value: bytes
    key: bytes
    timestamp_ms: int
    headers: tuple[tuple[str, bytes | None], ...] = ()

PAGES = (
    "/", "/pricing", "/docs", "/docs/quickstart", "/docs/consumer-groups", "/docs/spark", "/blog",
    "/blog/exactly-once-with-spark", "/blog/kip-848-explained", "/signup", "/login", "/account", "/search",
)
REFERRERS = (None, None, None, "https://www.google.com/", "https://news.ycombinator.com/", "https://github.com/",
             "https://www.reddit.com/r/dataengineering/", "https://duckduckgo.com/")
DEVICES = ("desktop", "desktop", "mobile", "mobile", "mobile", "tablet")
COUNTRIES = ("US", "DE", "FR", "GB", "IN", "BR", "JP", "NL", "SE", "CA")


LATE_FRACTION = 0.03


def page_views(
    count: int, seed: int, start_ms: int, users: int = 5000, max_late_ms: int = 90_000
) -> Iterator[PageView]:
    rng = random.Random(seed)
    ts = start_ms
    source = (("source", b"groupstream-demo"),)
    # Zipf-like popularity (s = 0.8): a few heavy users, a long tail of occasional ones
    cum_weights = list(itertools.accumulate(1.0 / (rank + 1) ** 0.8 for rank in range(users)))
    picks = rng.choices(range(users), cum_weights=cum_weights, k=count)
    for i, user in enumerate(picks):
        ts += rng.randint(0, 40)
        happened = ts - rng.randint(5_000, max_late_ms) if rng.random() < LATE_FRACTION else ts
        user_id = f"user-{user:05d}"
        event = {
            "event_id": f"{seed:04d}-{i:08d}",
            "user_id": user_id,
            "page": rng.choice(PAGES),
            "referrer": rng.choice(REFERRERS),
            "device": rng.choice(DEVICES),
            "country": rng.choice(COUNTRIES),
            "duration_ms": int(rng.lognormvariate(8.5, 1.0)),
            "ts": happened,
        }
        yield PageView(
            value=json.dumps(event, separators=(",", ":")).encode(),
            key=user_id.encode(),
            timestamp_ms=happened,
            headers=source,
        )
