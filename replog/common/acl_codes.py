"""Kafka's ACL vocabulary as its numeric codes: resource types, pattern types, operations and
permission types, as `AccessControlEntryRecord` and the ACL APIs carry them.

Rules:
- The codes are Kafka's (`org.apache.kafka.common.resource.ResourceType`, `PatternType`,
  `org.apache.kafka.common.acl.AclOperation`, `AclPermissionType`, Kafka 4.4.0); names are
  Kafka's enum names.
- UNKNOWN and ANY (and the pattern type MATCH) are filter values: a stored ACL never holds them
  (`STORED_*` list what one may hold).
"""

from __future__ import annotations

from enum import IntEnum


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15


class AclPermissionType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


FILTER_ONLY = frozenset({"UNKNOWN", "ANY", "MATCH"})
STORED_RESOURCE_TYPES = frozenset(t for t in ResourceType if t.name not in FILTER_ONLY)
STORED_PATTERN_TYPES = frozenset(t for t in PatternType if t.name not in FILTER_ONLY)
STORED_OPERATIONS = frozenset(t for t in AclOperation if t.name not in FILTER_ONLY)
STORED_PERMISSION_TYPES = frozenset(t for t in AclPermissionType if t.name not in FILTER_ONLY)

# The resource name of a literal pattern that matches every name, and the host that matches
# every host.
WILDCARD = "*"
