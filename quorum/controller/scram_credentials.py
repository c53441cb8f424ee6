"""The controller's SCRAM credentials (Kafka's ScramControlManager state): each user's
`UserScramCredentialRecord` per mechanism, in timeline state, so that a write's decisions see
what the writes before it planned and a revert or snapshot load puts it back.

Rules:
- `UserScramCredentialRecord` sets (or replaces) a user's credential for its mechanism;
  `RemoveUserScramCredentialRecord` removes it, and one naming a credential that is not there
  raises `MetadataReplayError` (the controller writes a removal only for a stored one).
- Reads take an `offset` (the last stable offset) or None for the latest state.
- A snapshot holds one `UserScramCredentialRecord` per stored credential, by user then
  mechanism: salt, keys and iterations, never a password.
- The decisions on AlterUserScramCredentials are `replog.security.scram_control`'s, given this
  table (`mechanisms_of`); the controller's service runs them as a write.
"""

from __future__ import annotations

from replog.errors import MetadataReplayError
from replog.quorum.metadata.records import (
    RemoveUserScramCredentialRecord,
    UserScramCredentialRecord,
)
from replog.timeline import SnapshotRegistry, TimelineHashMap


class ScramCredentials:
    """Every user's SCRAM credentials, by (user, mechanism code)."""

    __slots__ = ("_credentials",)

    def __init__(self, registry: SnapshotRegistry) -> None:
        self._credentials: TimelineHashMap[tuple[str, int], UserScramCredentialRecord] = (
            TimelineHashMap(registry)
        )

    def replay(
        self, record: UserScramCredentialRecord | RemoveUserScramCredentialRecord, offset: int
    ) -> None:
        """Apply `record`, written at `offset` (the timeline keeps the state per offset)."""
        key = (record.name, record.mechanism)
        if isinstance(record, UserScramCredentialRecord):
            self._credentials[key] = record
        elif self._credentials.remove(key) is None:
            raise MetadataReplayError(
                f"{record!r} removes a credential user {record.name!r} does not have"
            )

    def credential(
        self, name: str, mechanism: int, offset: int | None = None
    ) -> UserScramCredentialRecord | None:
        """`name`'s credential for mechanism code `mechanism`, None when it has none."""
        return self._credentials.get((name, mechanism), offset=offset)

    def mechanisms_of(self, name: str, offset: int | None = None) -> list[int]:
        """The mechanism codes `name` has a credential for."""
        return sorted(code for user, code in self._credentials.keys(offset) if user == name)

    def snapshot_records(self, offset: int | None = None) -> list[UserScramCredentialRecord]:
        return [record for _, record in sorted(self._credentials.items(offset))]
