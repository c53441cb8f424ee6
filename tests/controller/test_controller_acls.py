"""The controller's ACLs (`acl_state.py`, `QuorumController.write_acls` with Kafka's
AclControlManager decisions): created and deleted in one atomic batch each, replayed by
standbys, reverted when uncommitted at a failover, carried by snapshots, and a corrupt log
refused."""

from __future__ import annotations

import itertools
from uuid import UUID

import pytest
from controller_harness import Cluster, controller_view, image_view, replayed_image

from replog.common.acl_codes import AclOperation, AclPermissionType, PatternType, ResourceType
from replog.errors import InvalidAclError, MetadataReplayError
from replog.quorum.controller.acl_state import AclState
from replog.quorum.metadata.log_batches import SnapshotRecords
from replog.quorum.metadata.records import (
    AccessControlEntryRecord,
    RemoveAccessControlEntryRecord,
)
from replog.security.acl_bindings import AclBinding, AclBindingFilter
from replog.security.acl_control import create_acls, delete_acls
from replog.security.acl_index import AclIndex
from replog.timeline import SnapshotRegistry


def binding(
    name: str, principal: str = "User:alice", op: AclOperation = AclOperation.READ
) -> AclBinding:
    return AclBinding(
        ResourceType.TOPIC, name, PatternType.LITERAL, principal, "*", op, AclPermissionType.ALLOW
    )


def create(cluster: Cluster, *bindings: AclBinding, node: int | None = None) -> object:
    counter = itertools.count(100 * (len(cluster.active.acls.acls()) + 1))
    controller = cluster.active if node is None else cluster.controller(node)
    return controller.write_acls(
        lambda acls: create_acls(AclIndex(acls), list(bindings), lambda: UUID(int=next(counter))),
        cluster.now_ms,
        "create ACLs",
    )


def test_created_acls_commit_in_one_batch_and_every_standby_replays_them() -> None:
    cluster = Cluster.with_brokers([1])
    pending = create(cluster, binding("paid"), binding("paid"), binding("", principal="User:bob"))
    assert not pending.done  # type: ignore[attr-defined]
    cluster.log.commit()
    results = pending.result()  # type: ignore[attr-defined]
    assert results[0] is None and results[1] is None
    assert isinstance(results[2], InvalidAclError)
    for node in (1, 2, 3):
        assert [AclBinding.of(a) for a in cluster.controller(node).acls.acls()] == [binding("paid")]
    assert controller_view(cluster.active, None) == image_view(
        replayed_image(cluster.log.committed_records())
    )


def test_delete_removes_what_the_filters_match_once_and_answers_each_filter() -> None:
    cluster = Cluster.with_brokers([1])
    create(cluster, binding("paid"), binding("paid", op=AclOperation.WRITE), binding("other"))
    cluster.log.commit()
    pending = cluster.active.write_acls(
        lambda acls: delete_acls(
            AclIndex(acls),
            [
                AclBindingFilter(resource_name="paid"),
                AclBindingFilter(operation=AclOperation.WRITE),
            ],
        ),
        cluster.now_ms,
        "delete ACLs",
    )
    cluster.log.commit()
    first, second = pending.result()
    assert len(first) == 2 and second == [binding("paid", op=AclOperation.WRITE)]
    removals = [
        r
        for _, r in cluster.log.committed_records()
        if isinstance(r, RemoveAccessControlEntryRecord)
    ]
    assert len(removals) == 2
    assert [AclBinding.of(a) for a in cluster.controller(3).acls.acls()] == [binding("other")]


def test_uncommitted_acls_are_reverted_at_a_failover_and_the_new_leader_goes_on() -> None:
    cluster = Cluster.with_brokers([1])
    create(cluster, binding("kept"))
    cluster.log.commit()
    create(cluster, binding("lost"))
    cluster.elect(2, keep_uncommitted=False)
    for node in (1, 2):
        assert [a.resource_name for a in cluster.controller(node).acls.acls()] == ["kept"]
    pending = create(cluster, binding("after"), node=2)
    cluster.log.commit()
    assert pending.result() == [None]  # type: ignore[attr-defined]
    assert sorted(a.resource_name for a in cluster.controller(1).acls.acls()) == ["after", "kept"]


def test_snapshots_carry_the_acls_and_a_snapshot_load_restores_them() -> None:
    cluster = Cluster.with_brokers([1])
    create(cluster, binding("paid"), binding("paid", principal="User:*"))
    cluster.log.commit()
    records = cluster.active.snapshot_records()
    acls = [r for r in records if isinstance(r, AccessControlEntryRecord)]
    assert sorted(a.principal for a in acls) == ["User:*", "User:alice"]
    fresh = Cluster.create((4,))
    fresh.controller(4).handle_load_snapshot(
        SnapshotRecords(cluster.log.committed_offset, 1, tuple(records))
    )
    assert fresh.controller(4).acls.acls() == cluster.active.acls.acls()


def test_a_corrupt_log_is_refused() -> None:
    state = AclState(SnapshotRegistry())
    acl = binding("paid").with_id(UUID(int=1))
    state.replay(acl, 0)
    with pytest.raises(MetadataReplayError, match="already exists"):
        state.replay(acl, 1)
    with pytest.raises(MetadataReplayError, match="unknown ACL"):
        state.replay(RemoveAccessControlEntryRecord(UUID(int=2)), 2)
