"""The registry of message schemas: one module per API, each defining ``API``.

The broker's ApiVersions answer is computed from the handlers it registers over these codecs, so what we
advertise cannot drift from what we serve.
"""

from __future__ import annotations

from importlib import import_module

from groupstream.protocol.compiler import CompiledApi

# One module per API; adding an API means adding its module here.
_MODULES = (
    "produce",
    "fetch",
    "list_offsets",
    "metadata",
    "api_versions",
    "create_topics",
    "delete_topics",
    "init_producer_id",
    "describe_configs",
    "create_partitions",
    "offset_commit",
    "offset_fetch",
    "find_coordinator",
    "join_group",
    "heartbeat",
    "leave_group",
    "sync_group",
    "describe_groups",
    "list_groups",
    "delete_records",
    "add_partitions_to_txn",
    "add_offsets_to_txn",
    "end_txn",
    "txn_offset_commit",
    "delete_groups",
    "incremental_alter_configs",
    "offset_delete",
    "describe_cluster",
    "consumer_group_heartbeat",
    "consumer_group_describe",
    "describe_topic_partitions",
    "elect_leaders",
    "sasl_handshake",
    "sasl_authenticate",
    "describe_user_scram_credentials",
    "alter_user_scram_credentials",
    "describe_acls",
    "create_acls",
    "delete_acls",
    "describe_transactions",
    "list_transactions",
    "describe_producers",
    "write_txn_markers",
)

APIS: dict[int, CompiledApi] = {}
for _name in _MODULES:
    _api = import_module(f"{__name__}.{_name}").API
    if _api.key in APIS:
        raise RuntimeError(f"two schemas for api key {_api.key}")
    APIS[_api.key] = CompiledApi(_api)


def by_name(name: str) -> CompiledApi:
    for api in APIS.values():
        if api.name == name:
            return api
    raise KeyError(name)
