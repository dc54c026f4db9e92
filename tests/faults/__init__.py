"""A Jepsen-style fault-injection suite for our broker and clients (issue 12).

A workload of idempotent ``acks=all`` producers (ours and confluent-kafka) and consumer groups (classic
cooperative-sticky and range, and the KIP-848 ``consumer`` protocol; ours and confluent-kafka members mixed in
each group), every one in its own process, runs against our broker behind a fault proxy of ours, while a
nemesis driven by a seeded schedule kills and freezes the broker and the members, fills the broker's disk and
injects latency, resets and stalls. Every process logs what it did to files; after the final heal and restart
the checker reads them with the final log and reports what went wrong.

- `history`: the files a run leaves and the history the checker judges;
- `checker`: the anomalies (lost acknowledged records, duplicates beyond the at-least-once window,
  non-monotonic offsets, two owners at once, ...), a pure function of a history;
- `proxy`: the TCP proxy between clients and broker (latency, connection resets, stalls);
- `disk`: the broker's data dir on a small tmpfs, and a ballast file that fills it;
- `nemesis`: the seeded schedule of faults and their application;
- `worker`: the producer and group-member processes;
- `runner`: one run from start to verdict; ``python -m tests.faults`` runs long schedules.
"""
