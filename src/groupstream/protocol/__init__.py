"""Pure Kafka wire-protocol codec: no sockets, no threads, no clock."""
