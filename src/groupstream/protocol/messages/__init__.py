"""The registry of message schemas: one module per API, each defining ``API``.

The broker's ApiVersions answer is computed from the handlers it registers over these codecs, so what we
advertise cannot drift from what we serve.
"""

from __future__ import annotations

from importlib import import_module

from groupstream.protocol.compiler import CompiledApi

# One module per API; adding an API means adding its module here.
_MODULES = (
    "api_versions",
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
