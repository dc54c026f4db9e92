"""The embedded broker: an asyncio shell over the pure protocol codec, the log and (later) the coordinator."""
