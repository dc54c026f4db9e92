"""Admin calls about ACLs: CreateAcls, DescribeAcls and DeleteAcls, sent to the bootstrap broker (a Kafka
cluster forwards them to its controller), with bindings and filters as the authorizer's own model
(`groupstream.security.acl`), so what the Admin sends is what the broker matches.

Kafka 4.x serves versions 1-3 only (version 0 had no pattern types); version 3 only adds the USER resource
type, so a USER binding needs it and anything else is sent at the highest version both sides speak."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from groupstream.client.admin.base import AdminBase
from groupstream.client.errors import KafkaError, UnsupportedVersionError, check
from groupstream.protocol.error_codes import ErrorCode
from groupstream.protocol.messages import by_name
from groupstream.security.acl import (
    AclBinding,
    AclFilter,
    Operation,
    PatternType,
    Permission,
    ResourceType,
    parse_enum,
)

ANY_FILTER = AclFilter(ResourceType.ANY, None, PatternType.ANY, None, None, Operation.ANY, Permission.ANY)
"""Every binding (``AclBindingFilter.ANY`` in Kafka's Admin)."""


class AclCalls(AdminBase):
    def _acl_version(self, api: str, needs_user_type: bool) -> int:
        version = self._conn.version_for(api)
        if version < 1:
            raise UnsupportedVersionError(
                f"broker {self._conn.address} serves {api} only at v0 (no pattern types)"
            )
        if needs_user_type and version < 3:
            raise UnsupportedVersionError(
                f"broker {self._conn.address} cannot take USER resources ({api} v{version})"
            )
        return version

    def create_acls(self, bindings: Iterable[AclBinding]) -> None:
        """Create the bindings; raise for the first the broker refused (the others took effect)."""
        wanted = list(bindings)
        if not wanted:
            return
        version = self._acl_version("CreateAcls", any(b.resource_type == ResourceType.USER for b in wanted))
        R: Any = by_name("CreateAcls").Request
        creations = [
            R.AclCreation(
                resource_type=int(b.resource_type), resource_name=b.resource_name,
                resource_pattern_type=int(b.pattern_type), principal=b.principal, host=b.host,
                operation=int(b.operation), permission_type=int(b.permission),
            )
            for b in wanted
        ]  # fmt: skip
        resp = self._request(self._conn, "CreateAcls", R(creations=creations), version)
        for b, r in zip(wanted, resp.results, strict=False):
            if r.error_code != ErrorCode.NONE:
                raise KafkaError(r.error_code, r.error_message, resource=_describe(b))

    def describe_acls(self, acl_filter: AclFilter = ANY_FILTER) -> list[AclBinding]:
        """The bindings that match the filter, sorted."""
        version = self._acl_version("DescribeAcls", acl_filter.resource_type == ResourceType.USER)
        R: Any = by_name("DescribeAcls").Request
        resp = self._request(self._conn, "DescribeAcls", R(**_filter_fields(acl_filter)), version)
        check(resp.error_code, resp.error_message)
        return sorted(
            AclBinding(
                parse_enum(ResourceType, res.resource_type), res.resource_name,
                parse_enum(PatternType, res.pattern_type), a.principal, a.host,
                parse_enum(Operation, a.operation), parse_enum(Permission, a.permission_type),
            )
            for res in resp.resources
            for a in res.acls
        )  # fmt: skip

    def delete_acls(self, filters: Iterable[AclFilter]) -> list[list[AclBinding]]:
        """Delete every binding each filter matches; per filter, the bindings it deleted. Raises for the first
        filter (or binding) the broker refused, after the request (the others took effect)."""
        wanted = list(filters)
        if not wanted:
            return []
        version = self._acl_version("DeleteAcls", any(f.resource_type == ResourceType.USER for f in wanted))
        R: Any = by_name("DeleteAcls").Request
        resp = self._request(
            self._conn,
            "DeleteAcls",
            R(filters=[R.DeleteAclsFilter(**_filter_fields(f)) for f in wanted]),
            version,
        )
        out: list[list[AclBinding]] = []
        errors: list[KafkaError] = []
        for r in resp.filter_results:
            if r.error_code != ErrorCode.NONE:
                errors.append(KafkaError(r.error_code, r.error_message))
            deleted: list[AclBinding] = []
            for m in r.matching_acls:
                b = AclBinding(
                    parse_enum(ResourceType, m.resource_type), m.resource_name,
                    parse_enum(PatternType, m.pattern_type), m.principal, m.host,
                    parse_enum(Operation, m.operation), parse_enum(Permission, m.permission_type),
                )  # fmt: skip
                if m.error_code != ErrorCode.NONE:
                    errors.append(KafkaError(m.error_code, m.error_message, resource=_describe(b)))
                else:
                    deleted.append(b)
            out.append(sorted(deleted))
        if errors:
            raise errors[0]
        return out


def _filter_fields(f: AclFilter) -> dict[str, Any]:
    return {
        "resource_type_filter": int(f.resource_type),
        "resource_name_filter": f.resource_name,
        "pattern_type_filter": int(f.pattern_type),
        "principal_filter": f.principal,
        "host_filter": f.host,
        "operation": int(f.operation),
        "permission_type": int(f.permission),
    }


def _describe(b: AclBinding) -> str:
    return (
        f"{b.permission.name} {b.principal} {b.operation.name} on {b.resource_type.name} {b.resource_name!r} "
        f"({b.pattern_type.name}) from host {b.host}"
    )
