"""ACL bindings and their filters, as the ACL APIs carry them (Kafka's AclBinding,
AclBindingFilter, ResourcePatternFilter, AccessControlEntryFilter).

Rules (Kafka 4.4.0):
- A binding is an ACL without its id. A new one must have a concrete resource type, a LITERAL
  or PREFIXED pattern, a concrete operation, ALLOW or DENY, a non-empty resource name and a
  principal "Type:name" (`check_new_binding`, `InvalidAclError` naming the field).
- A filter matches a binding when each of its parts does: resource type ANY or equal; pattern
  type ANY (any pattern, and a name must equal), MATCH (the patterns that would apply to a
  resource named so: literal equal or the literal wildcard "*", or a prefix of the name) or
  equal (name equal); a name, principal or host of None matches any; operation and permission
  type ANY or equal. A filter with an UNKNOWN part is refused (`check_filter`).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from uuid import UUID

from replog.common.acl_codes import (
    STORED_OPERATIONS,
    STORED_PATTERN_TYPES,
    STORED_PERMISSION_TYPES,
    STORED_RESOURCE_TYPES,
    WILDCARD,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from replog.errors import InvalidAclError
from replog.quorum.metadata.records import AccessControlEntryRecord
from replog.security.principal import parse_principal


@dataclass(frozen=True, slots=True)
class AclBinding:
    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType

    @classmethod
    def of(cls, acl: AccessControlEntryRecord) -> AclBinding:
        return cls(
            acl.resource_type,
            acl.resource_name,
            acl.pattern_type,
            acl.principal,
            acl.host,
            acl.operation,
            acl.permission_type,
        )

    def with_id(self, acl_id: UUID) -> AccessControlEntryRecord:
        return AccessControlEntryRecord(
            acl_id,
            self.resource_type,
            self.resource_name,
            self.pattern_type,
            self.principal,
            self.host,
            self.operation,
            self.permission_type,
        )


def check_new_binding(binding: AclBinding) -> None:
    fields: tuple[tuple[str, IntEnum, frozenset[IntEnum]], ...] = (
        ("resourceType", binding.resource_type, STORED_RESOURCE_TYPES),
        ("patternType", binding.pattern_type, STORED_PATTERN_TYPES),
        ("operation", binding.operation, STORED_OPERATIONS),
        ("permissionType", binding.permission_type, STORED_PERMISSION_TYPES),
    )
    for field, value, allowed in fields:
        if value not in allowed:
            raise InvalidAclError(f"Invalid {field} {value.name}")
    if not binding.resource_name:
        raise InvalidAclError("Resource name should not be empty")
    parse_principal(binding.principal)


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    resource_type: ResourceType = ResourceType.ANY
    resource_name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission_type: AclPermissionType = AclPermissionType.ANY

    def matches(self, binding: AclBinding) -> bool:
        return self._pattern_matches(binding) and (
            (self.principal is None or self.principal == binding.principal)
            and (self.host is None or self.host == binding.host)
            and self.operation in (AclOperation.ANY, binding.operation)
            and self.permission_type in (AclPermissionType.ANY, binding.permission_type)
        )

    def _pattern_matches(self, binding: AclBinding) -> bool:
        if self.resource_type not in (ResourceType.ANY, binding.resource_type):
            return False
        wanted = self.pattern_type
        if wanted not in (PatternType.ANY, PatternType.MATCH, binding.pattern_type):
            return False
        name = self.resource_name
        if name is None:
            return True
        if wanted in (PatternType.ANY, binding.pattern_type):
            return name == binding.resource_name
        if binding.pattern_type == PatternType.LITERAL:
            return name == binding.resource_name or binding.resource_name == WILDCARD
        return name.startswith(binding.resource_name)


def check_filter(binding_filter: AclBindingFilter) -> None:
    pattern = (binding_filter.resource_type, binding_filter.pattern_type)
    if ResourceType.UNKNOWN in pattern or PatternType.UNKNOWN in pattern:
        raise InvalidAclError("Unknown patternFilter.")
    entry = (binding_filter.operation, binding_filter.permission_type)
    if AclOperation.UNKNOWN in entry or AclPermissionType.UNKNOWN in entry:
        raise InvalidAclError("Unknown entryFilter.")
