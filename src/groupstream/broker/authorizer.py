"""The broker's authorizer: the ACLs in force (`groupstream.security.acl_store`), the rules of
``super.users`` and ``allow.everyone.if.no.acl.found``, and the principal and host of the request being served.

Handlers ask ``allowed(operation, resource_type, name)`` as Kafka's authorization table says for their API.
With no ``authorizer.class.name`` every request is allowed, as in Kafka. Requests are served one at a time on
the event loop, so the principal and host are the broker's ``current_principal`` and ``current_client_host``
(set by the connection before each request).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from groupstream.security.acl import (
    CLUSTER_NAME,
    AclRules,
    Operation,
    ResourceType,
    authorize,
    authorize_any_of_type,
)
from groupstream.security.acl_store import AclStore

if TYPE_CHECKING:
    from groupstream.broker.node import Broker


class Authorizer:
    def __init__(self, broker: Broker, data_dir: Path) -> None:
        config = broker.config
        self.enabled = config.authorizer_enabled
        self.rules = AclRules(frozenset(config.super_users), config.allow_everyone_if_no_acl_found)
        self.store = AclStore(data_dir)
        self.lock = asyncio.Lock()
        """CreateAcls and DeleteAcls: one change at a time, each building on the last one saved."""
        self._broker = broker

    def _who(self) -> tuple[str, str]:
        host = self._broker.current_client_host
        return self._broker.current_principal, host[1:] if host.startswith("/") else host

    def allowed(self, operation: Operation, resource_type: ResourceType, name: str) -> bool:
        return self.checker()(operation, resource_type, name)

    def checker(self) -> Callable[[Operation, ResourceType, str], bool]:
        """``allowed`` for the principal and host being served now, to use once the answer is ready (after
        other requests were served)."""
        if not self.enabled:
            return lambda _operation, _type, _name: True
        principal, host = self._who()
        return lambda operation, resource_type, name: authorize(
            self.store.bindings, self.rules, principal, host, operation, resource_type, name
        )

    def allowed_on_cluster(self, operation: Operation) -> bool:
        return self.allowed(operation, ResourceType.CLUSTER, CLUSTER_NAME)

    def allowed_on_some(self, operation: Operation, resource_type: ResourceType) -> bool:
        """At least one resource of the type (IDEMPOTENT_WRITE from WRITE on any topic, KIP-679)."""
        if not self.enabled:
            return True
        principal, host = self._who()
        return authorize_any_of_type(self.store.bindings, self.rules, principal, host, operation, resource_type)

    @staticmethod
    def denial(operation: Operation, resource_type: ResourceType, name: str) -> str:
        """The error message of a refusal, naming what was needed (Kafka's errors say only "not authorized")."""
        return f"not authorized to {operation.name} {resource_type.name.lower().replace('_', ' ')} {name}"

    def visible(self, operation: Operation, resource_type: ResourceType, names: Iterable[str]) -> list[str]:
        """The names the principal may perform ``operation`` on (Metadata and ListGroups hide the rest)."""
        return [n for n in names if self.allowed(operation, resource_type, n)]
