"""ApiVersions: computed from the handler registry so that what we advertise is what we serve."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from groupstream.broker.handlers import handles
from groupstream.protocol.connection import Request

if TYPE_CHECKING:
    from groupstream.broker.node import Broker


@handles("ApiVersions")
def handle_api_versions(broker: Broker, request: Request) -> Any:
    return broker.api_versions_body(error_code=0)
