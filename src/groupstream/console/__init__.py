"""The web console: topics, groups, lag and each group's rebalance timeline, served on the broker's HTTP port."""
