"""OffsetControl: the snapshot at the last stable offset, per-batch snapshots, commits, reverts
(docs/design/kraft.md#controller, "Offset control")."""

from __future__ import annotations

import pytest

from replog.quorum.controller.offset_control import OffsetControl
from replog.timeline import TimelineHashMap, TimelineInteger, UnknownSnapshotError


def test_a_new_offset_control_holds_a_snapshot_at_minus_one() -> None:
    control = OffsetControl()
    assert control.registry.snapshot_offsets() == [-1]
    assert (control.last_committed_offset, control.last_stable_offset) == (-1, -1)
    assert control.last_committed_quorum_epoch == -1
    assert not control.active and control.next_write_offset is None


def test_a_standby_snapshots_each_committed_batch_and_keeps_only_the_stable_one() -> None:
    control = OffsetControl()
    value = TimelineInteger(control.registry)
    value.set(5)  # replayed batch 0..3
    control.handle_commit_batch(3, quorum_epoch=1)
    assert control.registry.snapshot_offsets() == [3]
    value.set(6)  # replayed batch 4..4
    control.handle_commit_batch(4, quorum_epoch=2)
    assert control.registry.snapshot_offsets() == [4]
    assert (control.last_committed_offset, control.last_stable_offset) == (4, 4)
    assert control.last_committed_quorum_epoch == 2
    assert value.get(4) == 6


def test_the_worked_timeline_of_section_3_4() -> None:
    control = OffsetControl()
    topics: TimelineHashMap[str, int] = TimelineHashMap(control.registry)
    topics["committed"] = 99
    control.handle_commit_batch(99, quorum_epoch=1)
    control.activate(100)
    # CreateTopics: 4 records at 100..103, replayed at once, snapshot at 103.
    topics["created"] = 103
    control.handle_schedule_append(103)
    # Another write: 104..105.
    topics["second"] = 105
    control.handle_schedule_append(105)
    assert control.registry.snapshot_offsets() == [99, 103, 105]
    assert control.next_write_offset == 106
    # Raft commits through 103: stable moves, the snapshot at 99 goes.
    control.handle_commit_batch(103, quorum_epoch=1)
    assert control.last_stable_offset == 103
    assert control.registry.snapshot_offsets() == [103, 105]
    assert topics.to_dict(103) == {"committed": 99, "created": 103}
    # Leadership lost: revert to 103; the second write is gone.
    control.deactivate()
    assert topics.to_dict() == {"committed": 99, "created": 103}
    assert control.registry.snapshot_offsets() == [103]
    assert not control.active


def test_a_commit_ending_at_a_control_batch_between_pending_writes_stops_at_the_last_snapshot() -> (
    None
):
    control = OffsetControl()
    control.activate(0)
    control.handle_schedule_append(2)
    control.handle_schedule_append(6)
    # Raft committed up to a control batch at 4 (between our writes ending at 2 and 6).
    control.handle_commit_batch(4, quorum_epoch=1)
    assert control.last_committed_offset == 4
    assert control.last_stable_offset == 2
    assert control.registry.snapshot_offsets() == [2, 6]


def test_a_commit_past_every_pending_write_snapshots_the_commit_point() -> None:
    control = OffsetControl()
    control.activate(0)
    control.handle_schedule_append(2)
    control.handle_commit_batch(2, quorum_epoch=1)
    control.handle_commit_batch(3, quorum_epoch=1)  # a control batch, nothing pending
    assert control.last_stable_offset == 3
    assert control.registry.snapshot_offsets() == [3]


def test_deactivate_reverts_every_structure_to_the_stable_offset() -> None:
    control = OffsetControl()
    value = TimelineInteger(control.registry)
    control.activate(0)
    value.set(1)
    control.handle_schedule_append(0)
    value.set(2)
    control.handle_schedule_append(1)
    control.handle_commit_batch(0, quorum_epoch=1)
    control.deactivate()
    assert value.get() == 1
    assert control.next_write_offset is None


def test_offsets_never_go_back() -> None:
    control = OffsetControl()
    control.handle_commit_batch(5, quorum_epoch=1)
    with pytest.raises(ValueError, match="does not advance"):
        control.handle_commit_batch(5, quorum_epoch=1)
    with pytest.raises(ValueError, match="past the last committed offset 5"):
        control.activate(5)
    control.activate(6)
    with pytest.raises(ValueError, match="before the next write offset 6"):
        control.handle_schedule_append(5)
    with pytest.raises(RuntimeError, match="already active"):
        control.activate(7)


def test_only_the_active_side_writes_and_deactivates() -> None:
    control = OffsetControl()
    with pytest.raises(RuntimeError, match="standby does not write"):
        control.handle_schedule_append(0)
    with pytest.raises(RuntimeError, match="not active"):
        control.deactivate()


def test_a_snapshot_load_replaces_everything() -> None:
    control = OffsetControl()
    value = TimelineInteger(control.registry)
    value.set(3)
    control.handle_commit_batch(10, quorum_epoch=1)
    control.begin_snapshot_load()
    assert value.get() == 0
    value.set(42)
    control.handle_snapshot_loaded(99, quorum_epoch=4)
    assert (control.last_committed_offset, control.last_stable_offset) == (99, 99)
    assert control.last_committed_quorum_epoch == 4
    assert control.registry.snapshot_offsets() == [99]
    assert value.get(99) == 42
    control.activate(100)
    with pytest.raises(RuntimeError, match="never loads a snapshot"):
        control.begin_snapshot_load()


def test_a_held_snapshot_stays_readable_while_commits_go_on_until_released() -> None:
    """A stop's snapshot state is taken in steps at one offset while commits go on: the held
    snapshot keeps that state (the ones after it fold into it) until its release."""
    control = OffsetControl()
    value = TimelineInteger(control.registry)
    value.set(5)
    control.handle_commit_batch(3, quorum_epoch=1)
    control.hold(3)
    for offset, new in ((4, 6), (5, 7), (6, 8)):
        value.set(new)
        control.handle_commit_batch(offset, quorum_epoch=1)
        assert control.registry.snapshot_offsets() == [3, offset]
        assert (value.get(3), value.get(offset)) == (5, new)
    control.release(3)
    assert control.registry.snapshot_offsets() == [6]
    control.release(3)  # one release too many: nothing held any more, nothing changes
    assert control.registry.snapshot_offsets() == [6]


def test_a_hold_survives_a_revert_and_counts_its_holders() -> None:
    control = OffsetControl()
    value = TimelineInteger(control.registry)
    value.set(1)
    control.handle_commit_batch(0, quorum_epoch=1)
    control.hold(0)
    control.hold(0)
    control.activate(1)
    value.set(2)
    control.handle_schedule_append(1)
    control.handle_commit_batch(1, quorum_epoch=1)
    value.set(3)
    control.handle_schedule_append(2)
    control.deactivate()  # back to the stable offset 1; the hold below it is untouched
    assert (value.get(0), value.get(1), value.get()) == (1, 2, 2)
    control.release(0)
    assert control.registry.snapshot_offsets() == [0, 1]
    control.release(0)
    assert control.registry.snapshot_offsets() == [1]


def test_only_the_stable_snapshot_can_be_held_and_a_load_drops_the_holds() -> None:
    control = OffsetControl()
    control.handle_commit_batch(3, quorum_epoch=1)
    with pytest.raises(UnknownSnapshotError):
        control.hold(2)
    control.hold(3)
    control.begin_snapshot_load()
    control.handle_snapshot_loaded(9, quorum_epoch=2)
    assert control.registry.snapshot_offsets() == [9]
    with pytest.raises(UnknownSnapshotError):
        TimelineInteger(control.registry).get(3)
    control.release(3)  # dropped by the load: nothing to give back
    assert control.registry.snapshot_offsets() == [9]
