"""A Kafka principal ("User:alice"): who a connection authenticated as.

Rules (Kafka's `KafkaPrincipal` and `SecurityUtils.parseKafkaPrincipal`):
- The text form is "Type:name", split at the first colon, so a name may hold colons (a
  certificate's DN) and a type never does; equal text means the same principal.
- `ANONYMOUS` ("User:ANONYMOUS") is a connection that did not authenticate (PLAINTEXT, or SSL
  without a client certificate).
- `WILDCARD_PRINCIPAL` ("User:*") in an ACL matches every principal.
- `super.users` is a semicolon-separated list of principals, each trimmed; empty entries are
  skipped, an entry without a colon is refused naming it.
"""

from __future__ import annotations

from dataclasses import dataclass

from replog.errors import ConfigError, InvalidAclError

USER_TYPE = "User"


@dataclass(frozen=True, slots=True)
class KafkaPrincipal:
    principal_type: str
    name: str

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"


ANONYMOUS = KafkaPrincipal(USER_TYPE, "ANONYMOUS")
WILDCARD_PRINCIPAL = f"{USER_TYPE}:*"


def parse_principal(text: str) -> KafkaPrincipal:
    """The principal "Type:name" names; InvalidAclError when `text` has no colon."""
    principal_type, colon, name = text.partition(":")
    if not colon:
        raise InvalidAclError(
            f"principal {text!r} is not Type:name (no colon between the type and the name)"
        )
    return KafkaPrincipal(principal_type, name)


def parse_super_users(value: str) -> frozenset[str]:
    """The principals of a `super.users` value ("User:admin;User:CN=ops")."""
    users = set()
    for entry in value.split(";"):
        entry = entry.strip()
        if not entry:
            continue
        if ":" not in entry:
            raise ConfigError(f"super.users entry {entry!r} is not a principal Type:name")
        users.add(entry)
    return frozenset(users)
