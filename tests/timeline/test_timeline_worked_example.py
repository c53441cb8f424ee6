"""Kafka's timeline worked example (docs/design/kraft.md#timeline-worked-example), step by step,
plus the CAS(1, 2) story that the timeline exists for: an uncommitted write must vanish when
leadership is lost."""

from __future__ import annotations

import pytest

from replog.timeline import SnapshotRegistry, TimelineHashMap, TimelineInteger, TimelineObject


class WorkedExample:
    """The state of docs/design/kraft.md#timeline-worked-example just before its revert."""

    def __init__(self) -> None:
        self.reg = SnapshotRegistry()
        self.m: TimelineHashMap[str, int] = TimelineHashMap(self.reg)
        self.n = TimelineInteger(self.reg)
        # No snapshots yet: nothing is recorded.
        self.m.put("a", 1)
        self.n.set(7)
        assert self.reg.delta_count() == 0
        self.reg.get_or_create_snapshot(10)
        assert self.m.put("a", 2) == 1  # a=1 saved in snapshot 10
        assert self.m.put("b", 5) is None  # new key: snapshot 10 records it as absent
        self.n.set(8)  # 7 saved in snapshot 10
        self.reg.get_or_create_snapshot(20)
        assert self.m.remove("a") == 2  # a=2 saved in snapshot 20
        self.n.set(9)  # 8 saved in snapshot 20


@pytest.fixture
def example() -> WorkedExample:
    return WorkedExample()


def test_reads_at_each_snapshot(example: WorkedExample) -> None:
    m, n = example.m, example.n
    assert m.get("a", offset=10) == 1
    assert m.get("a", offset=20) == 2
    assert m.get("a") is None
    assert m.get("b", offset=10) is None
    assert m.get("b", offset=20) == 5
    assert (m.size(10), m.size(20), m.size()) == (1, 2, 1)
    assert (n.get(10), n.get(20), n.get()) == (7, 8, 9)


def test_whole_state_at_each_snapshot(example: WorkedExample) -> None:
    m = example.m
    assert m.to_dict(10) == {"a": 1}
    assert m.to_dict(20) == {"a": 2, "b": 5}
    assert m == {"b": 5}
    assert dict(m.items(20)) == {"a": 2, "b": 5}
    assert set(m.keys(20)) == {"a", "b"}
    assert sorted(m.values(20)) == [2, 5]
    assert m.contains("a", 20) and not m.contains("a")


def test_revert_to_the_older_snapshot(example: WorkedExample) -> None:
    example.reg.revert_to_snapshot(10)
    assert example.m == {"a": 1}
    assert example.n.get() == 7
    assert example.reg.snapshot_offsets() == [10]
    # The kept snapshot still reads as it did, and now equals the live state.
    assert example.m.to_dict(10) == {"a": 1}
    assert example.n.get(10) == 7
    assert example.reg.delta_count() == 0


def test_deleting_the_last_snapshot_leaves_no_history(example: WorkedExample) -> None:
    example.reg.revert_to_snapshot(10)
    example.reg.delete_snapshots_up_to(11)
    assert example.reg.snapshot_offsets() == []
    assert example.reg.latest_offset() is None
    assert example.reg.delta_count() == 0
    assert example.m == {"a": 1} and example.n.get() == 7


@pytest.mark.parametrize("kind", ["map", "object"])
def test_failed_commit_does_not_keep_the_uncommitted_value(kind: str) -> None:
    """CAS(1, 2): value 1 is committed at offset 10; the leader replays CAS(1 -> 2) at offset
    11 but loses leadership before the quorum commits it."""
    reg = SnapshotRegistry()
    config: TimelineHashMap[str, int] = TimelineHashMap(reg)
    holder = TimelineObject(reg, 0)

    def read(offset: int | None = None) -> int | None:
        return config.get("x", offset=offset) if kind == "map" else holder.get(offset)

    def write(value: int) -> None:
        if kind == "map":
            config["x"] = value
        else:
            holder.set(value)

    def compare_and_set(expected: int, new: int) -> bool:
        if read() != expected:
            return False
        write(new)
        return True

    write(1)
    reg.get_or_create_snapshot(10)  # offset 10 committed, with value 1

    assert compare_and_set(1, 2)  # replayed at offset 11, not yet committed
    reg.get_or_create_snapshot(11)
    assert read() == 2
    assert read(10) == 1  # a read at the committed offset never sees 2

    reg.revert_to_snapshot(10)  # leadership lost: back to the last committed snapshot
    assert read() == 1
    assert read(10) == 1
    assert reg.snapshot_offsets() == [10]
    assert not compare_and_set(2, 5)  # the old leader must not believe the value is 2

    # The new leader's record at offset 11 is a different write, and it applies cleanly.
    assert compare_and_set(1, 3)
    reg.get_or_create_snapshot(11)
    assert (read(10), read(11), read()) == (1, 3, 3)
    reg.delete_snapshots_up_to(11)  # offset 11 committed
    assert reg.snapshot_offsets() == [11]
    assert read() == 3
