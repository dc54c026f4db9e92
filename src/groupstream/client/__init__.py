"""The groupstream client: the Producer on a background network thread (`client.net`), a synchronous Admin,
and small blocking produce/fetch helpers used by the CLI. The Consumer (seed 002's design) comes next and
reuses the same network thread."""
