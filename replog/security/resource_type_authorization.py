"""May a principal do an operation on at least one resource of a type? Kafka's
`Authorizer.authorizeByResourceType` (the default StandardAuthorizer uses), which a broker asks
where no one resource is named: InitProducerId of an idempotent producer without
IDEMPOTENT_WRITE on the cluster asks it for WRITE on some topic.

Rules (Kafka 4.4.0's default method, step by step):
- Arguments: an operation or resource type that is a filter value (UNKNOWN, ANY) raises
  `InvalidAclError`.
- First the ordinary decision on a resource named "hardcode" of that type: ALLOWED answers
  (super users, a wildcard allow, `allow.everyone.if.no.acl.found` with no ACL on that name).
- Then the ACLs of the type whose principal is the caller's or "User:*", whose host is the
  caller's or "*", and whose operation is the one asked or ALL (no implications here): a DENY
  of the literal wildcard "*" denies; an ALLOW of the literal wildcard allows; else an ALLOW
  pattern allows unless a DENY covers it: the same literal name (for a literal allow), or a
  prefixed DENY that is a prefix of the allowed name. Nothing left: DENIED.
"""

from __future__ import annotations

from replog.common.acl_codes import (
    WILDCARD,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from replog.errors import InvalidAclError
from replog.security.authorizer import Action, Authorizer
from replog.security.principal import WILDCARD_PRINCIPAL, KafkaPrincipal

PROBE_NAME = "hardcode"  # Kafka's: the name its first, ordinary decision is asked about
FILTER_VALUES = ("UNKNOWN", "ANY")


def authorize_by_resource_type(
    authorizer: Authorizer,
    principal: KafkaPrincipal,
    host: str,
    operation: AclOperation,
    resource_type: ResourceType,
) -> bool:
    if operation.name in FILTER_VALUES or resource_type.name in FILTER_VALUES:
        raise InvalidAclError(
            f"authorization by resource type needs a concrete operation and resource type, "
            f"got {operation.name} on {resource_type.name}"
        )
    if authorizer.authorize(principal, host, Action(operation, resource_type, PROBE_NAME)):
        return True
    caller = str(principal)
    denied_literal: set[str] = set()
    denied_prefixes: set[str] = set()
    allowed: list[tuple[PatternType, str]] = []
    wildcard_allowed = False
    for acl in authorizer.acls.of_type(resource_type):
        if acl.host != host and acl.host != WILDCARD:
            continue
        if acl.principal != caller and acl.principal != WILDCARD_PRINCIPAL:
            continue
        if acl.operation != operation and acl.operation != AclOperation.ALL:
            continue
        literal = acl.pattern_type == PatternType.LITERAL
        if acl.permission_type == AclPermissionType.DENY:
            if literal and acl.resource_name == WILDCARD:
                return False
            (denied_literal if literal else denied_prefixes).add(acl.resource_name)
        elif literal and acl.resource_name == WILDCARD:
            wildcard_allowed = True
        else:
            allowed.append((acl.pattern_type, acl.resource_name))
    if wildcard_allowed:
        return True
    for pattern_type, name in allowed:
        if pattern_type == PatternType.LITERAL and name in denied_literal:
            continue
        if not any(name[:length] in denied_prefixes for length in range(1, len(name) + 1)):
            return True
    return False
