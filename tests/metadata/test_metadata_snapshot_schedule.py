"""SnapshotSchedule: snapshots by committed bytes, by time with new data, at a clean stop with
any new data, and never backwards."""

from __future__ import annotations

import pytest

from replog.quorum.metadata.snapshot_schedule import SnapshotSchedule


def test_due_by_bytes() -> None:
    schedule = SnapshotSchedule(0, max_bytes_between=100, max_interval_ms=0)
    schedule.committed(60, is_control=False)
    schedule.committed(1000, is_control=True)  # control batches carry no metadata
    assert not schedule.due(10, 5)
    schedule.committed(40, is_control=False)
    assert schedule.due(10, 5)
    schedule.taken(10, 5)
    assert not schedule.due(11, 5)
    assert schedule.next_due_ms() is None  # the interval rule is off


def test_due_by_time_only_with_new_data() -> None:
    schedule = SnapshotSchedule(1000, max_bytes_between=1 << 20, max_interval_ms=500)
    assert schedule.next_due_ms() is None
    assert not schedule.due(5, 5000)  # nothing committed since the start
    schedule.committed(10, is_control=False)
    assert schedule.next_due_ms() == 1500
    assert not schedule.due(5, 1499)
    assert schedule.due(5, 1500)


def test_never_at_or_before_the_newest_snapshot() -> None:
    schedule = SnapshotSchedule(0, max_bytes_between=1, max_interval_ms=0)
    schedule.taken(50, 0)  # a loaded snapshot counts
    schedule.committed(10, is_control=False)
    assert not schedule.due(50, 0)
    assert schedule.due(51, 0)


def test_at_a_clean_stop_any_new_data_makes_a_snapshot_due() -> None:
    schedule = SnapshotSchedule(0, max_bytes_between=1 << 20, max_interval_ms=0)
    assert not schedule.due_at_stop(5)  # nothing committed in this run
    schedule.committed(1000, is_control=True)
    assert not schedule.due_at_stop(5)  # a LeaderChange is no metadata
    schedule.committed(1, is_control=False)
    assert not schedule.due(5, 0)  # far below the byte rule, and no interval
    assert schedule.due_at_stop(5)
    schedule.taken(5, 0)
    assert not schedule.due_at_stop(6)  # taken: nothing new since


def test_at_a_clean_stop_never_at_or_before_the_newest_snapshot() -> None:
    schedule = SnapshotSchedule(0, max_bytes_between=1, max_interval_ms=0)
    schedule.taken(50, 0)  # the snapshot the start loaded
    schedule.committed(10, is_control=False)
    assert not schedule.due_at_stop(50)
    assert not schedule.due_at_stop(0)  # an image not published yet ends at 0
    assert schedule.due_at_stop(51)


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"max_bytes_between": 0}, "metadata.log.max.record.bytes.between.snapshots"),
        ({"max_interval_ms": -1}, "metadata.log.max.snapshot.interval.ms"),
    ],
)
def test_bad_settings_name_the_key(kwargs: dict[str, int], named: str) -> None:
    with pytest.raises(ValueError, match=named):
        SnapshotSchedule(0, **kwargs)
