"""The decoded message classes and typed codecs under their own names, for annotations and typed access.

At run time every name here is the compiler's own object: ``FetchRequest`` is ``by_name("Fetch").Request`` (a
named tuple) and ``FETCH`` is ``by_name("Fetch")``. Their types come from ``bodies.pyi``, generated from the same
schemas by ``python -m groupstream.protocol.typegen`` (a test fails when it is stale), so a handler that writes
``req = FETCH.body_of(request)`` has its field names and types checked by mypy.
"""

from __future__ import annotations

from typing import Any

from groupstream.protocol.messages import APIS
from groupstream.protocol.typegen import constant_name


def _export() -> dict[str, Any]:
    names: dict[str, Any] = {}
    for api in APIS.values():
        names[api.api.request.name] = api.Request
        names[api.api.response.name] = api.Response
        names[constant_name(api.name)] = api
    return names


globals().update(_export())
