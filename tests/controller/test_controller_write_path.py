"""QuorumController: the write path, the purgatory, reads at the stable offset, leadership
changes and failures (docs/design/kraft.md#controller)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from controller_harness import Cluster, controller_view

from replog.errors import (
    InvalidConfigError,
    InvalidRequestError,
    MessageSizeTooLargeError,
    NotControllerError,
    RequestTimedOutError,
    UnknownServerError,
)
from replog.quorum.controller.config_control import (
    AlterConfigOp,
    AlterConfigOpType,
    broker_resource,
)
from replog.quorum.controller.controller_result import ControllerResult
from replog.quorum.controller.operation import ReadContext, WriteContext
from replog.quorum.metadata.log_batches import CommittedRecords, SnapshotRecords
from replog.quorum.metadata.records import (
    METADATA_VERSION_FEATURE,
    METADATA_VERSION_LATEST,
    TRANSACTION_VERSION_FEATURE,
    TRANSACTION_VERSION_LATEST,
    ConfigRecord,
    ConfigResourceType,
    FeatureLevelRecord,
    MetadataRecord,
    NoOpRecord,
)

DEFAULT = broker_resource()
SET = AlterConfigOpType.SET


def set_configs(**values: str) -> list[AlterConfigOp]:
    return [AlterConfigOp(name.replace("_", "."), SET, value) for name, value in values.items()]


def describe_default(ctx: ReadContext) -> dict[str, str]:
    return ctx.configs.describe(DEFAULT, ctx.offset)


def records_op(*records: MetadataRecord, atomic: bool = False) -> Callable[[Any], Any]:
    def op(ctx: WriteContext) -> ControllerResult[str]:
        return ControllerResult.of(records, "ok", is_atomic=atomic)

    return op


@pytest.fixture
def cluster() -> Cluster:
    cluster = Cluster.create((1, 2))
    cluster.elect(1)
    cluster.log.commit()  # the bootstrap records
    return cluster


# -- bootstrap ----------------------------------------------------------------------------------


def test_the_first_leader_of_an_empty_log_writes_metadata_version() -> None:
    cluster = Cluster.create((1, 2))
    cluster.elect(1)
    active = cluster.controller(1)
    (bootstrap,) = cluster.log.uncommitted_batches()
    assert bootstrap.records == (
        FeatureLevelRecord(METADATA_VERSION_FEATURE, METADATA_VERSION_LATEST),
        FeatureLevelRecord(TRANSACTION_VERSION_FEATURE, TRANSACTION_VERSION_LATEST),
    )
    # Replayed at once, but not visible to reads until committed.
    assert active.features.metadata_version() == METADATA_VERSION_LATEST
    assert active.read(lambda ctx: ctx.features.metadata_version(ctx.offset)) is None
    cluster.log.commit()
    assert (
        active.read(lambda ctx: ctx.features.metadata_version(ctx.offset))
        == METADATA_VERSION_LATEST
    )
    assert cluster.controller(2).features.metadata_version() == METADATA_VERSION_LATEST


def test_a_later_leader_writes_no_bootstrap_records(cluster: Cluster) -> None:
    cluster.elect(2)
    assert cluster.controller(2).is_active
    assert cluster.log.uncommitted_batches() == []


# -- write, purgatory, commit ---------------------------------------------------------------------


def test_a_response_waits_for_the_commit_of_its_records(cluster: Cluster) -> None:
    active = cluster.controller(1)
    pending = active.incremental_alter_configs(
        {DEFAULT: set_configs(min_insync_replicas="2")}, cluster.now_ms
    )
    (batch,) = cluster.log.uncommitted_batches()
    assert batch.records == (
        ConfigRecord(ConfigResourceType.BROKER, "", "min.insync.replicas", "2"),
    )
    assert not pending.done
    assert active.configs.describe(DEFAULT) == {"min.insync.replicas": "2"}  # latest state
    assert active.read(describe_default) == {}  # committed state
    assert active.purgatory.highest_pending_offset() == batch.last_offset
    cluster.log.commit()
    assert pending.done and pending.result() == {DEFAULT: None}
    assert active.read(describe_default) == {"min.insync.replicas": "2"}
    assert active.last_stable_offset == batch.last_offset


def test_the_worked_timeline_of_section_3_4(cluster: Cluster) -> None:
    active = cluster.controller(1)
    cluster.register(1)  # the second write alters broker 1's configs
    stable = active.last_stable_offset
    first = active.incremental_alter_configs(
        {
            DEFAULT: set_configs(
                min_insync_replicas="2",
                log_retention_ms="1000",
                log_segment_bytes="4096",
                message_max_bytes="100",
            )
        },
        cluster.now_ms,
    )
    first_end = stable + 4
    second = active.incremental_alter_configs(
        {broker_resource(1): set_configs(log_retention_ms="5", log_retention_bytes="6")},
        cluster.now_ms,
    )
    second_end = first_end + 2
    registry = active.offset_control.registry
    assert registry.snapshot_offsets() == [stable, first_end, second_end]
    # Raft commits through the first write: the snapshot at the old stable offset goes and
    # the first caller is answered.
    cluster.log.commit_through(first_end)
    assert active.last_stable_offset == first_end
    assert registry.snapshot_offsets() == [first_end, second_end]
    assert first.done and not second.done
    # Node 1 loses the election before the second write commits: revert to the stable offset.
    active.handle_leader_change(2, cluster.log.quorum_epoch + 1, cluster.now_ms)
    assert not active.is_active
    assert isinstance(second.error, NotControllerError)
    assert "the active controller is node 2" in str(second.error)
    assert registry.snapshot_offsets() == [first_end]
    assert active.configs.describe(broker_resource(1)) == {}
    assert active.configs.describe(DEFAULT)["log.retention.ms"] == "1000"
    # Node 2's log never had the second write: it is truncated away, never seen anywhere.
    cluster.elect(2, keep_uncommitted=False)
    for node in (1, 2):
        assert cluster.controller(node).configs.describe(broker_resource(1)) == {}


def test_reads_never_see_uncommitted_state(cluster: Cluster) -> None:
    active = cluster.controller(1)
    active.incremental_alter_configs({DEFAULT: set_configs(log_retention_ms="1")}, 0)
    active.incremental_alter_configs({DEFAULT: set_configs(log_retention_ms="2")}, 0)
    assert active.read(describe_default) == {}
    cluster.log.commit(1)
    assert active.read(describe_default) == {"log.retention.ms": "1"}
    assert active.configs.describe(DEFAULT) == {"log.retention.ms": "2"}
    cluster.log.commit()
    assert active.read(describe_default) == {"log.retention.ms": "2"}


def test_a_write_without_records_waits_for_the_highest_pending_offset(cluster: Cluster) -> None:
    active = cluster.controller(1)
    idle = active.write(records_op(), cluster.now_ms, "read through the write path")
    assert idle.done and idle.result() == "ok"  # nothing pending: answered at once
    first = active.write(records_op(NoOpRecord(), NoOpRecord()), cluster.now_ms)
    second = active.write(records_op(NoOpRecord()), cluster.now_ms)
    empty = active.write(records_op(), cluster.now_ms)
    assert not empty.done
    cluster.log.commit(1)
    assert first.done and not second.done and not empty.done
    cluster.log.commit()
    assert second.done and empty.done


def test_a_standby_refuses_writes_naming_the_active_controller(cluster: Cluster) -> None:
    refused = cluster.controller(2).write(records_op(NoOpRecord()), 0, "write a record")
    assert isinstance(refused.error, NotControllerError)
    assert str(refused.error) == (
        "cannot write a record: node 2 is not the active controller; the active controller is "
        "node 1"
    )
    fresh = Cluster.create((3,))
    unknown = fresh.controller(3).write(records_op(NoOpRecord()), 0)
    assert "no active controller is known yet" in str(unknown.error)


def test_an_invalid_request_is_answered_and_changes_nothing(cluster: Cluster) -> None:
    active = cluster.controller(1)
    before = len(cluster.log.batches)
    pending = active.incremental_alter_configs({DEFAULT: set_configs(x_y="1")}, 0)
    # A per-resource error is part of the response; nothing to write, nothing pending.
    assert isinstance(pending.result()[DEFAULT], InvalidConfigError)

    def invalid(ctx: WriteContext) -> ControllerResult[None]:
        raise InvalidRequestError("the request names nothing valid")

    refused = active.write(invalid, 0)
    assert isinstance(refused.error, InvalidRequestError)
    assert active.is_active and len(cluster.log.batches) == before


# -- failures -------------------------------------------------------------------------------------


def test_an_unexpected_exception_makes_the_active_controller_resign(cluster: Cluster) -> None:
    active = cluster.controller(1)
    waiting = active.incremental_alter_configs({DEFAULT: set_configs(log_retention_ms="7")}, 0)

    def broken(ctx: WriteContext) -> ControllerResult[None]:
        raise ZeroDivisionError("bug")

    failed = active.write(broken, 0, "do something buggy")
    assert isinstance(failed.error, UnknownServerError)
    assert "do something buggy failed: ZeroDivisionError('bug')" in str(failed.error)
    assert not active.is_active
    assert cluster.log.resigned == [(1, cluster.log.quorum_epoch)]
    assert active.last_failover_reason is not None and "bug" in active.last_failover_reason
    assert isinstance(waiting.error, NotControllerError)
    assert active.configs.describe(DEFAULT) == {}  # reverted


def test_losing_raft_leadership_during_an_append_renounces(cluster: Cluster) -> None:
    active = cluster.controller(1)
    cluster.log.leader_id = None  # Raft moved on; the controller has not heard yet
    pending = active.write(records_op(NoOpRecord()), 0, "write a record")
    assert isinstance(pending.error, NotControllerError)
    assert not active.is_active


def test_an_append_refused_before_anything_was_written_only_fails_the_caller(
    cluster: Cluster,
) -> None:
    active = cluster.controller(1)
    cluster.log.fail_next_append = MessageSizeTooLargeError("batch of 9 MiB exceeds 8 MiB")
    pending = active.write(records_op(NoOpRecord()), 0)
    assert isinstance(pending.error, MessageSizeTooLargeError)
    assert active.is_active


def test_a_log_placing_a_batch_elsewhere_than_expected_makes_the_controller_resign(
    cluster: Cluster,
) -> None:
    active = cluster.controller(1)
    # Someone else appended to the log behind the controller's back.
    cluster.log.append(1, cluster.log.quorum_epoch, [NoOpRecord()])
    pending = active.write(records_op(NoOpRecord()), 0, "write a record")
    assert isinstance(pending.error, UnknownServerError)
    assert not active.is_active
    assert active.last_failover_reason is not None
    assert "but the controller expected" in active.last_failover_reason


def test_a_committed_batch_the_active_controller_did_not_write_makes_it_a_standby(
    cluster: Cluster,
) -> None:
    active = cluster.controller(1)
    mine = active.incremental_alter_configs({DEFAULT: set_configs(log_retention_ms="1")}, 0)
    # A batch of a stale epoch shows up as committed: the controller's view is wrong.
    stray = CommittedRecords(
        cluster.log.log_end_offset,
        cluster.log.log_end_offset,
        0,
        (ConfigRecord(ConfigResourceType.BROKER, "", "log.retention.ms", "9"),),
    )
    cluster.log.commit()
    assert mine.done
    active.handle_commit(stray)
    assert not active.is_active
    assert active.read(describe_default) == {"log.retention.ms": "9"}  # replayed as standby


# -- batches and limits ---------------------------------------------------------------------------


def test_records_are_split_into_batches_unless_atomic() -> None:
    cluster = Cluster.create((1,), max_records_per_batch=2)
    cluster.elect(1)
    cluster.log.commit()
    active = cluster.controller(1)
    refused = active.write(records_op(*[NoOpRecord()] * 3, atomic=True), 0, "write three")
    assert isinstance(refused.error, InvalidRequestError)
    assert "takes 3 records, which must commit together, but a batch holds at most 2" in str(
        refused.error
    )
    start = cluster.log.log_end_offset
    split = active.write(records_op(*[NoOpRecord()] * 5), 0)
    assert [(b.base_offset, b.last_offset) for b in cluster.log.uncommitted_batches()] == [
        (start, start + 1),
        (start + 2, start + 3),
        (start + 4, start + 4),
    ]
    # One snapshot per batch, since a revert may stop between them.
    assert active.offset_control.pending_batch_end_offsets() == [start + 1, start + 3, start + 4]
    cluster.log.commit(2)
    assert not split.done
    cluster.log.commit()
    assert split.done


def test_the_purgatory_is_bounded() -> None:
    cluster = Cluster.create((1,), max_pending_writes=2)
    cluster.elect(1)  # the bootstrap write is the first pending one
    active = cluster.controller(1)
    assert not active.write(records_op(NoOpRecord()), 0).done
    full = active.write(records_op(NoOpRecord()), 0, "write more")
    assert isinstance(full.error, RequestTimedOutError)
    assert full.error.retriable


# -- leadership ---------------------------------------------------------------------------------


def test_leader_changes_of_older_epochs_are_ignored(cluster: Cluster) -> None:
    active = cluster.controller(1)
    epoch = cluster.log.quorum_epoch
    active.handle_leader_change(2, epoch - 1, 0)
    assert active.is_active and active.leader_id == 1


def test_the_same_leader_in_a_newer_epoch_stays_active(cluster: Cluster) -> None:
    active = cluster.controller(1)
    pending = active.write(records_op(NoOpRecord()), 0)
    cluster.elect(1)  # re-elected; its uncommitted batch survives and commits
    assert active.is_active and active.claim_epoch == cluster.log.quorum_epoch
    assert pending.done


def test_an_epoch_renounced_after_a_failure_is_never_claimed_again(cluster: Cluster) -> None:
    active = cluster.controller(1)

    def broken(ctx: WriteContext) -> ControllerResult[None]:
        raise RuntimeError("bug")

    active.write(broken, 0)
    epoch = cluster.log.quorum_epoch
    active.handle_leader_change(1, epoch, 0)
    assert not active.is_active
    active.handle_leader_change(1, epoch + 1, 0)
    assert active.is_active


def test_a_standby_loads_a_snapshot_and_the_active_controller_refuses_to(cluster: Cluster) -> None:
    active = cluster.controller(1)
    active.incremental_alter_configs({DEFAULT: set_configs(log_retention_ms="3")}, 0)
    cluster.log.commit()
    snapshot = SnapshotRecords(
        active.last_stable_offset,
        cluster.log.quorum_epoch,
        tuple(active.snapshot_records(active.last_stable_offset)),
    )
    newcomer = Cluster.create((3,)).controller(3)
    newcomer.handle_load_snapshot(snapshot)
    assert newcomer.last_stable_offset == active.last_stable_offset
    assert controller_view(newcomer, newcomer.last_stable_offset) == controller_view(
        active, active.last_stable_offset
    )
    with pytest.raises(RuntimeError, match="must never load a snapshot"):
        active.handle_load_snapshot(snapshot)


def test_batches_of_the_previous_epoch_commit_normally_after_a_reelection(
    cluster: Cluster,
) -> None:
    active = cluster.controller(1)
    pending = active.write(records_op(NoOpRecord()), 0)
    # Re-elected before its batch of the old epoch committed (Raft announcing early).
    active.handle_leader_change(1, cluster.log.quorum_epoch + 1, 0)
    cluster.log.commit()
    assert active.is_active and pending.done and pending.error is None


def test_losing_leadership_to_nobody_yet_says_so(cluster: Cluster) -> None:
    active = cluster.controller(1)
    pending = active.write(records_op(NoOpRecord()), 0)
    cluster.elect(None)
    assert not active.is_active and active.leader_id is None
    assert isinstance(pending.error, NotControllerError)
    assert "no active controller is known yet" in str(pending.error)
