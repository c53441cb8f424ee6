"""Kafka's StandardAuthorizer as a pure decision: may this principal, from this host, do this
operation on this resource, given the ACLs of the metadata log and the broker's settings.

Rules (Kafka 4.4.0's StandardAuthorizerData):
- A super user (`super.users`, matched on the principal's text) may do everything, even before
  the ACLs are loaded. Anyone else gets `AuthorizerNotReadyError` until `complete_initial_load`
  (the broker calls it once its metadata has caught up).
- The ACLs that apply are those whose pattern matches the resource (`acl_index`), whose
  principal is the caller's or "User:*", and whose host is the caller's address or "*".
- Operations: an ACL for ALL applies to every operation. An ALLOW ACL for READ, WRITE, DELETE
  or ALTER also allows DESCRIBE, and one for ALTER_CONFIGS also allows DESCRIBE_CONFIGS; a
  DENY ACL denies only its own operation (or every one, for ALL).
- DENY wins over ALLOW. With no applying ACL: DENY if some ACL's pattern matches the resource
  (whoever it is for), else `allow.everyone.if.no.acl.found` decides (false by default).
- The decision names its rule as Kafka's audit log does: "SuperUser", "MatchingAcl(...)",
  "DefaultAllow", "DefaultDeny".
"""

from __future__ import annotations

from dataclasses import dataclass

from replog.common.acl_codes import (
    WILDCARD,
    AclOperation,
    AclPermissionType,
    ResourceType,
)
from replog.errors import AuthorizerNotReadyError
from replog.quorum.metadata.records import AccessControlEntryRecord
from replog.security.acl_index import AclIndex
from replog.security.principal import WILDCARD_PRINCIPAL, KafkaPrincipal

IMPLIES_DESCRIBE = frozenset(
    {
        AclOperation.DESCRIBE,
        AclOperation.READ,
        AclOperation.WRITE,
        AclOperation.DELETE,
        AclOperation.ALTER,
    }
)
IMPLIES_DESCRIBE_CONFIGS = frozenset({AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS})


@dataclass(frozen=True, slots=True)
class Action:
    """An operation on one resource, as a request handler asks about it."""

    operation: AclOperation
    resource_type: ResourceType
    resource_name: str


@dataclass(frozen=True, slots=True)
class Decision:
    allowed: bool
    named: str  # the rule, when no ACL decided
    acl: AccessControlEntryRecord | None = None  # the ACL that decided

    def __bool__(self) -> bool:
        return self.allowed

    @property
    def rule(self) -> str:
        """Why, for the audit log line. Made when asked: most decisions are never logged, and
        an ACL's text costs more than the decision."""
        return self.named if self.acl is None else f"MatchingAcl({self.acl!r})"


SUPER_USER = Decision(True, "SuperUser")
DEFAULT_ALLOW = Decision(True, "DefaultAllow")
DEFAULT_DENY = Decision(False, "DefaultDeny")


def acl_applies(
    acl: AccessControlEntryRecord, principal: str, host: str, operation: AclOperation
) -> bool:
    """Whether `acl` (whose pattern matches the resource) speaks for this caller and operation."""
    if acl.principal != principal and acl.principal != WILDCARD_PRINCIPAL:
        return False
    if acl.host != WILDCARD and acl.host != host:
        return False
    if acl.operation == AclOperation.ALL or acl.operation == operation:
        return True
    if acl.permission_type != AclPermissionType.ALLOW:
        return False
    if operation == AclOperation.DESCRIBE:
        return acl.operation in IMPLIES_DESCRIBE
    if operation == AclOperation.DESCRIBE_CONFIGS:
        return acl.operation in IMPLIES_DESCRIBE_CONFIGS
    return False


class Authorizer:
    """The decisions of one broker: its settings, and the ACLs it has replayed."""

    __slots__ = ("acls", "allow_everyone_if_no_acl_found", "loaded", "super_users")

    def __init__(
        self,
        acls: AclIndex | None = None,
        super_users: frozenset[str] = frozenset(),
        allow_everyone_if_no_acl_found: bool = False,
        loaded: bool = False,
    ) -> None:
        self.acls = acls if acls is not None else AclIndex()
        self.super_users = super_users
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self.loaded = loaded

    def complete_initial_load(self) -> None:
        """The ACLs up to the metadata log's end as of start-up are in: answer everyone."""
        self.loaded = True

    def authorize(self, principal: KafkaPrincipal, host: str, action: Action) -> Decision:
        """The decision for `principal` connected from `host` (an IP address) on `action`."""
        text = str(principal)
        if text in self.super_users:
            return SUPER_USER
        if not self.loaded:
            raise AuthorizerNotReadyError(
                f"the authorizer has not loaded the ACLs yet; {text} cannot be answered"
            )
        own, wildcard = self.acls.matching(action.resource_type, action.resource_name)
        allow: AccessControlEntryRecord | None = None
        for section in (own, wildcard):
            for acl in section:
                if not acl_applies(acl, text, host, action.operation):
                    continue
                if acl.permission_type == AclPermissionType.DENY:
                    return Decision(False, "MatchingAcl", acl)
                allow = acl
        if allow is not None:
            return Decision(True, "MatchingAcl", allow)
        if own or wildcard:
            return DEFAULT_DENY
        return DEFAULT_ALLOW if self.allow_everyone_if_no_acl_found else DEFAULT_DENY
