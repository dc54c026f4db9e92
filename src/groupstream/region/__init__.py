"""The consistent region (seed 000): group consumers that drain, checkpoint and reset together, so that after
any failure or rebalance processing resumes from one consistent cut.

Pure cores first: the offset merge keyed by [checkpoint id, reset attempt] (`merge`), the offset manager
(`offsets`), the group consumer operator's state table and event handling (`operator_state`, `operator`),
and the region controller's drain/checkpoint/reset cycle (`controller`). They take time and ids as arguments
and return effects; the threads, the consumer and the control-plane topic that carry them out are a shell
around them.
"""
