"""A broker's authorizer settings, with Kafka's names and defaults.

Rules:
- `authorizer.class.name`: empty (the default) leaves authorization off, as in Kafka: every
  request is allowed and the ACL APIs answer SECURITY_DISABLED. Kafka's KRaft authorizer,
  `org.apache.kafka.metadata.authorizer.StandardAuthorizer`, turns it on; any other class is
  refused naming it (replog has no plug-in authorizers).
- `super.users`: principals allowed everything (`principal.parse_super_users`).
- `allow.everyone.if.no.acl.found`: true or false (default false).
- `ssl.principal.mapping.rules`: how an SSL client's certificate subject becomes its principal
  (`principal_mapping`; default `DEFAULT`), read whether or not the authorizer is on.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from replog.errors import ConfigError
from replog.security.principal import parse_super_users
from replog.security.principal_mapping import RULES_KEY, PrincipalMapper

AUTHORIZER_CLASS = "authorizer.class.name"
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
SUPER_USERS = "super.users"
ALLOW_EVERYONE = "allow.everyone.if.no.acl.found"
AUTHORIZER_PROPERTIES = frozenset({AUTHORIZER_CLASS, SUPER_USERS, ALLOW_EVERYONE, RULES_KEY})
DEFAULT_MAPPER = PrincipalMapper.from_rules()


@dataclass(frozen=True, slots=True)
class AuthorizerConfig:
    enabled: bool = False
    super_users: frozenset[str] = frozenset()
    allow_everyone_if_no_acl_found: bool = False
    principal_mapper: PrincipalMapper = DEFAULT_MAPPER

    @classmethod
    def from_properties(cls, properties: Mapping[str, str]) -> AuthorizerConfig:
        name = properties.get(AUTHORIZER_CLASS, "").strip()
        if name not in ("", STANDARD_AUTHORIZER):
            raise ConfigError(
                f"{AUTHORIZER_CLASS}={name}: replog serves Kafka's {STANDARD_AUTHORIZER} only "
                "(or empty: no authorization)"
            )
        allow = properties.get(ALLOW_EVERYONE, "false").strip().lower()
        if allow not in ("true", "false"):
            raise ConfigError(f"{ALLOW_EVERYONE}={allow}: expected true or false")
        return cls(
            enabled=bool(name),
            super_users=parse_super_users(properties.get(SUPER_USERS, "")),
            allow_everyone_if_no_acl_found=allow == "true",
            principal_mapper=PrincipalMapper.from_rules(properties.get(RULES_KEY, "DEFAULT")),
        )


NO_AUTHORIZATION = AuthorizerConfig()  # Kafka's defaults: authorization off
