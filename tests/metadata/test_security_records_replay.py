"""The security records in the image: ACLs and SCRAM credentials replayed by every node like the
rest of the metadata, the delta's changes for publishers, snapshots that keep them, and the
typed error for a record the controller never writes."""

from __future__ import annotations

from uuid import UUID

import pytest
from metadata_helpers import bootstrapped, delta_of, replayed

from replog.common.acl_codes import AclOperation, AclPermissionType, PatternType, ResourceType
from replog.common.scram_mechanism import SCRAM_SHA_256, SCRAM_SHA_512
from replog.errors import MetadataReplayError
from replog.quorum.metadata.delta import MetadataDelta
from replog.quorum.metadata.image import MetadataImage
from replog.quorum.metadata.records import (
    AccessControlEntryRecord,
    RemoveAccessControlEntryRecord,
    RemoveUserScramCredentialRecord,
    UserScramCredentialRecord,
)
from replog.quorum.metadata.snapshot import image_from_records, image_record_count, image_to_records

READ_ORDERS = AccessControlEntryRecord(
    UUID(int=1),
    ResourceType.TOPIC,
    "orders",
    PatternType.LITERAL,
    "User:alice",
    "*",
    AclOperation.READ,
    AclPermissionType.ALLOW,
)
ALICE_256 = UserScramCredentialRecord("alice", SCRAM_SHA_256.code, b"s", bytes(32), bytes(32), 4096)
ALICE_512 = UserScramCredentialRecord("alice", SCRAM_SHA_512.code, b"s", bytes(64), bytes(64), 8192)


def test_acls_are_added_and_removed_by_id() -> None:
    image = replayed(bootstrapped(), READ_ORDERS)
    assert dict(image.acls.acls) == {READ_ORDERS.acl_id: READ_ORDERS}
    assert not image.is_empty()
    delta = delta_of(image, RemoveAccessControlEntryRecord(READ_ORDERS.acl_id))
    assert dict(delta.acl_changes) == {READ_ORDERS.acl_id: None}
    after = replayed(image, RemoveAccessControlEntryRecord(READ_ORDERS.acl_id))
    assert not after.acls.acls
    assert after.scram is image.scram and after.topics is image.topics  # untouched, shared


@pytest.mark.parametrize(
    ("records", "expected"),
    [
        ((READ_ORDERS, READ_ORDERS), "AccessControlEntryRecord at offset 2 names an existing"),
        ((RemoveAccessControlEntryRecord(UUID(int=9)),), "names an unknown ACL id"),
        (
            (
                READ_ORDERS,
                RemoveAccessControlEntryRecord(READ_ORDERS.acl_id),
                RemoveAccessControlEntryRecord(READ_ORDERS.acl_id),
            ),
            "RemoveAccessControlEntryRecord at offset 3 names an unknown",
        ),
        (
            (RemoveUserScramCredentialRecord("alice", 1),),
            "removes a credential the user does not have",
        ),
    ],
)
def test_records_the_controller_never_writes_are_refused(
    records: tuple[object, ...], expected: str
) -> None:
    with pytest.raises(MetadataReplayError, match=expected):
        delta_of(bootstrapped(), *records)  # type: ignore[arg-type]


def test_credentials_are_per_user_and_mechanism_and_replaced_by_a_newer_one() -> None:
    stronger = UserScramCredentialRecord("alice", 1, b"t", bytes(32), bytes(32), 16384)
    image = replayed(bootstrapped(), ALICE_256, ALICE_512, stronger)
    assert dict(image.scram.credentials) == {("alice", 1): stronger, ("alice", 2): ALICE_512}
    image = replayed(image, RemoveUserScramCredentialRecord("alice", 1))
    assert dict(image.scram.credentials) == {("alice", 2): ALICE_512}
    assert "stored_key" not in repr(ALICE_512) and "iterations=8192" in repr(ALICE_512)


def test_snapshots_keep_acls_and_credentials() -> None:
    image = replayed(bootstrapped(), READ_ORDERS, ALICE_512)
    records = image_to_records(image)
    assert records[-2:] == [READ_ORDERS, ALICE_512]
    assert image_record_count(image) == len(records)
    assert image_from_records(records, image.provenance) == image
    assert MetadataDelta.of_image(image).apply(image.provenance) == image
    assert MetadataImage.EMPTY.is_empty()
