"""Shared by the authorizer tests: ACL records in a line, and the reference model of
StandardAuthorizer's decision written as plainly as its rules read."""

from __future__ import annotations

import itertools
from uuid import UUID

from replog.common.acl_codes import AclOperation, AclPermissionType, PatternType, ResourceType
from replog.quorum.metadata.records import AccessControlEntryRecord
from replog.security.acl_bindings import AclBinding

_ids = itertools.count(1)
TOPIC, GROUP, CLUSTER, TXN = (
    ResourceType.TOPIC,
    ResourceType.GROUP,
    ResourceType.CLUSTER,
    ResourceType.TRANSACTIONAL_ID,
)
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
Op = AclOperation


def acl(
    resource_type: ResourceType,
    name: str,
    operation: AclOperation,
    permission: AclPermissionType = ALLOW,
    principal: str = "User:alice",
    host: str = "*",
    pattern: PatternType = LITERAL,
    acl_id: UUID | None = None,
) -> AccessControlEntryRecord:
    return AccessControlEntryRecord(
        acl_id=acl_id if acl_id is not None else UUID(int=next(_ids)),
        resource_type=resource_type,
        resource_name=name,
        pattern_type=pattern,
        principal=principal,
        host=host,
        operation=operation,
        permission_type=permission,
    )


def model_allows(
    acls: list[AccessControlEntryRecord],
    super_users: set[str],
    allow_everyone: bool,
    principal: str,
    host: str,
    operation: AclOperation,
    resource_type: ResourceType,
    name: str,
) -> bool:
    """The decision by the rules alone: every ACL looked at, no index."""
    if principal in super_users:
        return True
    implied = {
        Op.DESCRIBE: {Op.DESCRIBE, Op.READ, Op.WRITE, Op.DELETE, Op.ALTER},
        Op.DESCRIBE_CONFIGS: {Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS},
    }
    pattern_matches = [
        a
        for a in acls
        if a.resource_type == resource_type
        and (
            (a.pattern_type == LITERAL and a.resource_name == name)
            # Kafka's walk skips the wildcard for the other names that begin with "*".
            or (a.pattern_type == LITERAL and a.resource_name == "*" and name[:1] != "*")
            or (a.pattern_type == PREFIXED and name.startswith(a.resource_name))
        )
    ]
    applying = [
        a
        for a in pattern_matches
        if a.principal in (principal, "User:*")
        and a.host in (host, "*")
        and (
            a.operation in (Op.ALL, operation)
            or (a.permission_type == ALLOW and a.operation in implied.get(operation, set()))
        )
    ]
    if any(a.permission_type == DENY for a in applying):
        return False
    if applying:
        return True
    return bool(allow_everyone and not pattern_matches)


def binding_of_row(row: list[object]) -> AclBinding:
    """An ACL of the golden file (`[type, name, pattern, principal, host, operation,
    permission]`, Kafka's codes) as a binding."""
    rtype, name, pattern, principal, host, op, permission = row
    return AclBinding(
        ResourceType(rtype),
        str(name),
        PatternType(pattern),
        str(principal),
        str(host),
        AclOperation(op),
        AclPermissionType(permission),
    )
