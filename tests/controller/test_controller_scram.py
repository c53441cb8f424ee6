"""The controller's SCRAM credentials: AlterUserScramCredentials as a controller write over its
timeline state (`ScramCredentials`), kept through a failover, a snapshot load and a reverted
write; the broker's image replays the same records."""

from __future__ import annotations

import pytest

from replog.common.scram_mechanism import SCRAM_SHA_256, SCRAM_SHA_512
from replog.errors import MetadataReplayError, ResourceNotFoundError, UnsupportedVersionError
from replog.quorum.controller.scram_credentials import ScramCredentials
from replog.quorum.metadata.log_batches import SnapshotRecords
from replog.quorum.metadata.records import (
    METADATA_VERSION_SCRAM,
    RemoveUserScramCredentialRecord,
    UserScramCredentialRecord,
)
from replog.security.scram_control import (
    ScramDeletion,
    ScramUpsertion,
    alter_credentials_write,
)
from replog.security.scram_credential import salted_password
from replog.timeline import SnapshotRegistry
from tests.controller.controller_harness import Cluster, replayed_image

SALT = b"a salt of bytes"


def upsertion(user: str, password: str, mechanism=SCRAM_SHA_512, iterations: int = 4096):  # type: ignore[no-untyped-def]
    salted = salted_password(mechanism, password, SALT, iterations)
    return ScramUpsertion(user, mechanism.code, iterations, SALT, salted)


def alter(cluster: Cluster, deletions=(), upsertions=()):  # type: ignore[no-untyped-def]
    pending = cluster.active.write(
        alter_credentials_write(list(deletions), list(upsertions)),
        cluster.now_ms,
        "alter SCRAM credentials",
    )
    cluster.log.commit()
    return pending.result()


def test_a_log_below_the_scram_metadata_version_takes_no_credential() -> None:
    """A log begun at 3.5-IV1 (level 10): every user UNSUPPORTED_VERSION, nothing written;
    at 3.5-IV2 the same request is done."""
    below = Cluster.create((1,), bootstrap_metadata_version=METADATA_VERSION_SCRAM - 1)
    below.elect(1)
    below.log.commit()
    assert not below.active.features.scram_supported()
    answers = alter(below, upsertions=[upsertion("alice", "a")])
    assert isinstance(answers["alice"], UnsupportedVersionError)
    assert not any(
        isinstance(r, UserScramCredentialRecord) for _, r in below.log.committed_records()
    )
    at = Cluster.create((1,), bootstrap_metadata_version=METADATA_VERSION_SCRAM)
    at.elect(1)
    at.log.commit()
    assert at.active.features.scram_supported()
    assert alter(at, upsertions=[upsertion("alice", "a")]) == {"alice": None}


def test_credentials_are_written_replayed_by_standbys_and_kept_through_a_failover() -> None:
    cluster = Cluster.create((1, 2, 3))
    cluster.elect(1)
    cluster.log.commit()
    assert alter(
        cluster, upsertions=[upsertion("alice", "a"), upsertion("bob", "b", SCRAM_SHA_256)]
    ) == {
        "alice": None,
        "bob": None,
    }
    for controller in cluster.controllers.values():
        assert controller.scram.mechanisms_of("alice") == [SCRAM_SHA_512.code]
        assert controller.scram.mechanisms_of("bob") == [SCRAM_SHA_256.code]
    cluster.elect(2)
    cluster.log.commit()
    answers = alter(cluster, deletions=[ScramDeletion("alice", 2), ScramDeletion("carol", 2)])
    assert answers["alice"] is None and isinstance(answers["carol"], ResourceNotFoundError)
    image = replayed_image(cluster.log.committed_records())
    assert sorted(image.scram.credentials) == [("bob", SCRAM_SHA_256.code)]
    assert cluster.controller(3).scram.mechanisms_of("alice") == []


def test_a_snapshot_carries_the_credentials_and_never_a_password() -> None:
    cluster = Cluster.create((1, 2))
    cluster.elect(1)
    cluster.log.commit()
    alter(cluster, upsertions=[upsertion("alice", "secret-password")])
    active = cluster.active
    records = active.snapshot_records(active.last_stable_offset)
    scram = [r for r in records if isinstance(r, UserScramCredentialRecord)]
    assert [(r.name, r.mechanism, r.iterations) for r in scram] == [("alice", 2, 4096)]
    assert b"secret-password" not in repr(records).encode()
    fresh = Cluster.create((9,)).controller(9)
    fresh.handle_load_snapshot(SnapshotRecords(active.last_committed_offset, 1, tuple(records)))
    assert fresh.scram.mechanisms_of("alice") == [2]
    assert fresh.scram.snapshot_records() == scram


def test_the_timeline_reverts_an_uncommitted_write() -> None:
    registry = SnapshotRegistry()
    credentials = ScramCredentials(registry)
    record = UserScramCredentialRecord("alice", 1, SALT, b"s" * 32, b"k" * 32, 4096)
    credentials.replay(record, 0)
    registry.get_or_create_snapshot(0)
    credentials.replay(RemoveUserScramCredentialRecord("alice", 1), 1)
    assert credentials.mechanisms_of("alice") == [] and credentials.mechanisms_of("alice", 0) == [1]
    registry.revert_to_snapshot(0)
    assert credentials.snapshot_records() == [record]
    with pytest.raises(MetadataReplayError, match="does not have"):
        credentials.replay(RemoveUserScramCredentialRecord("bob", 1), 2)
