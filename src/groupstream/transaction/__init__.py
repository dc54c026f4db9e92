"""The transaction coordinator (KIP-98): pure shards over `__transaction_state`, one per partition.

``state`` holds each transactional id's metadata and the table of its valid state transitions, ``records`` the
key and value formats Kafka writes to `__transaction_state`, ``shard`` the handlers (InitProducerId,
AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, DescribeTransactions, ListTransactions) and the timers. The broker
side (`groupstream.broker.transaction_wiring`) runs them on the generic coordinator runtime and writes the
commit and abort markers the shards ask for.
"""
