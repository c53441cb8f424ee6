"""The SCRAM credentials of the metadata log: per user and mechanism, what a broker's SCRAM
server looks a user up in.

Rules:
- Built by replaying `UserScramCredentialRecord` (set the user's credential for its
  mechanism, replacing any) and `RemoveUserScramCredentialRecord` (remove it; one that is not
  there raises `MetadataReplayError`: the controller writes a removal only for a stored one).
- `record_of` turns a credential into its record: salt, keys and iterations, never a password.
"""

from __future__ import annotations

from collections.abc import Callable

from replog.common.scram_mechanism import ScramMechanism
from replog.errors import MetadataReplayError
from replog.quorum.metadata.records import (
    RemoveUserScramCredentialRecord,
    UserScramCredentialRecord,
)
from replog.security.scram_credential import ScramCredential


def record_of(
    name: str, mechanism: ScramMechanism, credential: ScramCredential
) -> UserScramCredentialRecord:
    return UserScramCredentialRecord(
        name=name,
        mechanism=mechanism.code,
        salt=credential.salt,
        stored_key=credential.stored_key,
        server_key=credential.server_key,
        iterations=credential.iterations,
    )


class ScramStore:
    __slots__ = ("_credentials",)

    def __init__(self) -> None:
        self._credentials: dict[tuple[str, int], ScramCredential] = {}

    def __len__(self) -> int:
        return len(self._credentials)

    def replay(self, record: UserScramCredentialRecord | RemoveUserScramCredentialRecord) -> None:
        key = (record.name, record.mechanism)
        if isinstance(record, UserScramCredentialRecord):
            self._credentials[key] = ScramCredential(
                record.salt, record.stored_key, record.server_key, record.iterations
            )
        elif self._credentials.pop(key, None) is None:
            raise MetadataReplayError(
                f"{record!r} removes a credential user {record.name!r} does not have"
            )

    def lookup(self, mechanism: ScramMechanism) -> Callable[[str], ScramCredential | None]:
        """A user's credential for `mechanism` by name, as a SCRAM server asks for it."""
        return lambda name: self._credentials.get((name, mechanism.code))

    def mechanisms_of(self, name: str) -> list[int]:
        """The mechanism codes `name` has a credential for (DescribeUserScramCredentials)."""
        return sorted(code for user, code in self._credentials if user == name)
