"""The ACLs of the metadata log, indexed for one question: which ACLs' resource patterns match
a resource (Kafka's StandardAuthorizerData keeps them in a tree sorted by reverse name for the
same question).

Rules:
- Built by replaying `AccessControlEntryRecord` (add one ACL under its id) and
  `RemoveAccessControlEntryRecord` (remove that id), as every broker replays the metadata log.
  An id added twice, an id removed that is not there, or a second ACL equal to a stored one in
  every field but its id raises `MetadataReplayError` (Kafka's authorizer refuses the same; the
  controller never writes such records).
- A pattern matches a resource of its type when it is LITERAL with the resource's name, LITERAL
  with the wildcard name "*", or PREFIXED with a prefix of the resource's name (the whole name
  included). Nothing else matches: a PREFIXED "*" matches only names that begin with "*".
  As in Kafka 4.4.0, the wildcard does not match a name that begins with "*" ("*x"): its tree
  walk meets the wildcard as a literal prefix of such a name and skips it (topic names cannot
  hold "*"; group and transactional ids can). `tests/security/gold` holds Kafka's answers.
- `matching` yields the ACLs of the resource's own name and prefixes first, then the literal
  wildcard's, so a caller that stops at the first DENY of the first group behaves as Kafka's.

Theory of operation: per resource type, literal ACLs by name and prefixed ACLs by prefix, each
a dict of ACLs by id; a lookup tries the resource's name, "*", and the resource's prefixes of
the lengths some prefixed ACL has (counted per length), so it costs one dict probe per distinct
prefix length, not a scan of the ACLs.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from uuid import UUID

from replog.common.acl_codes import WILDCARD, PatternType, ResourceType
from replog.errors import MetadataReplayError
from replog.quorum.metadata.records import (
    AccessControlEntryRecord,
    RemoveAccessControlEntryRecord,
)
from replog.security.acl_bindings import AclBinding


class _TypeAcls:
    """The ACLs of one resource type."""

    __slots__ = ("literal", "prefix_lengths", "prefixed")

    def __init__(self) -> None:
        self.literal: dict[str, dict[UUID, AccessControlEntryRecord]] = {}
        self.prefixed: dict[str, dict[UUID, AccessControlEntryRecord]] = {}
        self.prefix_lengths: dict[int, int] = {}  # prefix length -> prefixed names of it

    def section(self, pattern_type: PatternType) -> dict[str, dict[UUID, AccessControlEntryRecord]]:
        return self.literal if pattern_type == PatternType.LITERAL else self.prefixed


class AclIndex:
    """ACLs by id, and by resource pattern for `matching`."""

    __slots__ = ("_by_id", "_by_type", "_contents")

    def __init__(self, acls: Iterable[AccessControlEntryRecord] = ()) -> None:
        self._by_id: dict[UUID, AccessControlEntryRecord] = {}
        self._contents: set[AclBinding] = set()  # every ACL but its id: one rule each
        self._by_type: dict[ResourceType, _TypeAcls] = {}
        for acl in acls:
            self.add(acl)

    def __len__(self) -> int:
        return len(self._by_id)

    def get(self, acl_id: UUID) -> AccessControlEntryRecord | None:
        return self._by_id.get(acl_id)

    def acls(self) -> list[AccessControlEntryRecord]:
        """Every ACL, in id order (equal indexes list equal ACLs)."""
        return [self._by_id[acl_id] for acl_id in sorted(self._by_id)]

    def replay(self, record: AccessControlEntryRecord | RemoveAccessControlEntryRecord) -> None:
        if isinstance(record, AccessControlEntryRecord):
            self.add(record)
        else:
            self.remove(record.acl_id)

    def add(self, acl: AccessControlEntryRecord) -> None:
        if acl.acl_id in self._by_id:
            raise MetadataReplayError(f"{acl!r} adds ACL id {acl.acl_id}, which already exists")
        content = AclBinding.of(acl)
        if content in self._contents:
            raise MetadataReplayError(f"{acl!r} repeats an ACL stored under another id")
        self._by_id[acl.acl_id] = acl
        self._contents.add(content)
        acls = self._by_type.setdefault(acl.resource_type, _TypeAcls())
        named = acls.section(acl.pattern_type).setdefault(acl.resource_name, {})
        named[acl.acl_id] = acl
        if acl.pattern_type == PatternType.PREFIXED and len(named) == 1:
            length = len(acl.resource_name)
            acls.prefix_lengths[length] = acls.prefix_lengths.get(length, 0) + 1

    def remove(self, acl_id: UUID) -> None:
        acl = self._by_id.pop(acl_id, None)
        if acl is None:
            raise MetadataReplayError(f"RemoveAccessControlEntryRecord names unknown ACL {acl_id}")
        self._contents.discard(AclBinding.of(acl))
        acls = self._by_type[acl.resource_type]
        section = acls.section(acl.pattern_type)
        named = section[acl.resource_name]
        del named[acl_id]
        if named:
            return
        del section[acl.resource_name]
        if acl.pattern_type == PatternType.PREFIXED:
            length = len(acl.resource_name)
            acls.prefix_lengths[length] -= 1
            if not acls.prefix_lengths[length]:
                del acls.prefix_lengths[length]

    def of_type(self, resource_type: ResourceType) -> list[AccessControlEntryRecord]:
        """Every ACL on resources of `resource_type`, whatever its pattern."""
        acls = self._by_type.get(resource_type)
        if acls is None:
            return []
        sections = (acls.literal, acls.prefixed)
        return [acl for section in sections for named in section.values() for acl in named.values()]

    def matching(
        self, resource_type: ResourceType, name: str
    ) -> tuple[list[AccessControlEntryRecord], list[AccessControlEntryRecord]]:
        """The ACLs whose patterns match resource `name` of `resource_type`: those of its name
        and its prefixes, then those of the literal wildcard (none for a name that begins with
        "*": "*" itself has them in the first list, and Kafka skips them for the others)."""
        acls = self._by_type.get(resource_type)
        if acls is None:
            return [], []
        own = list(_values(acls.literal.get(name)))
        for length in acls.prefix_lengths:
            if length <= len(name):
                own.extend(_values(acls.prefixed.get(name[:length])))
        wildcard = [] if name.startswith(WILDCARD) else list(_values(acls.literal.get(WILDCARD)))
        return own, wildcard


def _values(
    named: dict[UUID, AccessControlEntryRecord] | None,
) -> Iterator[AccessControlEntryRecord]:
    return iter(()) if named is None else iter(named.values())
