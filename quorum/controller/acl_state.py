"""AclState: the controller's ACLs, by id, in timeline state (the state Kafka's
AclControlManager keeps).

Rules:
- Replayed from `AccessControlEntryRecord` (an ACL under its id) and
  `RemoveAccessControlEntryRecord` (that id gone). An id added twice or a removal of an id not
  there is a corrupt log (`MetadataReplayError`): the controller never writes either.
- What CreateAcls and DeleteAcls write is decided elsewhere (`replog.security.acl_control`,
  over `acls()`): this state only holds what the log says, so that a failover or a restart
  finds the same ACLs (snapshots carry them, in id order).
- Reads take an `offset` (the last stable offset) or None for the latest state.
"""

from __future__ import annotations

from uuid import UUID

from replog.errors import MetadataReplayError
from replog.quorum.metadata.records import (
    AccessControlEntryRecord,
    RemoveAccessControlEntryRecord,
)
from replog.timeline import SnapshotRegistry, TimelineHashMap


class AclState:
    __slots__ = ("_acls",)

    def __init__(self, registry: SnapshotRegistry) -> None:
        self._acls: TimelineHashMap[UUID, AccessControlEntryRecord] = TimelineHashMap(registry)

    def acls(self, offset: int | None = None) -> list[AccessControlEntryRecord]:
        """Every ACL at `offset` (None: latest), in id order."""
        stored = self._acls.to_dict(offset)
        return [stored[acl_id] for acl_id in sorted(stored)]

    def replay(
        self, record: AccessControlEntryRecord | RemoveAccessControlEntryRecord, offset: int
    ) -> None:
        acl_id = record.acl_id
        if isinstance(record, AccessControlEntryRecord):
            if acl_id in self._acls:
                raise MetadataReplayError(
                    f"AccessControlEntryRecord at offset {offset} adds ACL id {acl_id}, which "
                    "already exists"
                )
            self._acls[acl_id] = record
            return
        if self._acls.remove(acl_id) is None:
            raise MetadataReplayError(
                f"RemoveAccessControlEntryRecord at offset {offset} names unknown ACL {acl_id}"
            )

    def snapshot_records(self, offset: int | None = None) -> list[AccessControlEntryRecord]:
        return self.acls(offset)
