"""What the timeline records, and that it lets go: writes record only on first touch after the
newest snapshot, nothing without snapshots, and deleted or reverted history is freed."""

from __future__ import annotations

import gc
import weakref

from replog.timeline import SnapshotRegistry, TimelineHashMap, TimelineHashSet, TimelineObject


class Value:
    """A weak-referenceable stored value, to watch history release it."""

    def __init__(self, name: str) -> None:
        self.name = name


def test_no_snapshots_means_nothing_recorded() -> None:
    reg = SnapshotRegistry()
    m: TimelineHashMap[int, int] = TimelineHashMap(reg)
    s: TimelineHashSet[int] = TimelineHashSet(reg)
    o = TimelineObject(reg, 0)
    for i in range(1000):
        m[i % 10] = i
        s.add(i % 7)
        s.discard(i % 5)
        o.set(i)
    assert reg.delta_count() == 0


def test_a_key_is_recorded_once_per_snapshot() -> None:
    reg = SnapshotRegistry()
    m: TimelineHashMap[str, int] = TimelineHashMap(reg)
    o = TimelineObject(reg, 0)
    reg.get_or_create_snapshot(1)
    for i in range(100):
        m["a"] = i
        o.set(i)
    assert reg.delta_count() == 2
    del m["a"]
    m["a"] = 5
    assert reg.delta_count() == 2
    reg.get_or_create_snapshot(2)
    m["a"] = 6
    o.set(-1)
    assert reg.delta_count() == 4
    assert (m.get("a", offset=1), m.get("a", offset=2), m["a"]) == (None, 5, 6)
    assert (o.get(1), o.get(2), o.get()) == (0, 99, -1)


def test_delete_snapshots_up_to_frees_the_old_values() -> None:
    reg = SnapshotRegistry()
    m: TimelineHashMap[str, Value] = TimelineHashMap(reg)
    first = Value("first")
    m["a"] = first
    reg.get_or_create_snapshot(1)
    m["a"] = Value("second")
    assert reg.delta_count() == 1
    watch = weakref.ref(first)
    del first
    gc.collect()
    assert watch() is not None, "snapshot 1 still needs the old value"
    reg.delete_snapshots_up_to(2)
    gc.collect()
    assert watch() is None
    assert reg.delta_count() == 0


def test_revert_frees_the_undone_deltas() -> None:
    reg = SnapshotRegistry()
    m: TimelineHashMap[str, Value] = TimelineHashMap(reg)
    reg.get_or_create_snapshot(1)
    m["a"] = Value("one")
    reg.get_or_create_snapshot(2)
    replaced = Value("two")
    m["a"] = replaced
    m["a"] = Value("three")
    watch = weakref.ref(replaced)
    del replaced
    assert reg.delta_count() == 2
    reg.revert_to_snapshot(1)
    gc.collect()
    assert watch() is None
    assert reg.delta_count() == 0
    assert m == {}


def test_deleting_a_middle_snapshot_merges_and_keeps_the_older_value() -> None:
    reg = SnapshotRegistry()
    m: TimelineHashMap[str, int] = TimelineHashMap(reg)
    m.update(a=1, b=1)
    reg.get_or_create_snapshot(1)
    m["a"] = 2  # snapshot 1 records a=1
    reg.get_or_create_snapshot(2)
    m["a"] = 3  # snapshot 2 records a=2
    m["b"] = 3  # snapshot 2 records b=1
    reg.get_or_create_snapshot(3)
    assert reg.delta_count() == 3
    reg.delete_snapshot(2)
    # The duplicate record of "a" is gone; snapshot 1 kept its own (older) value.
    assert reg.delta_count() == 2
    assert m.to_dict(1) == {"a": 1, "b": 1}
    assert m.to_dict(3) == {"a": 3, "b": 3}
    reg.revert_to_snapshot(1)
    assert m == {"a": 1, "b": 1}


def test_deleting_the_newest_snapshot_moves_recording_to_the_previous_one() -> None:
    reg = SnapshotRegistry()
    m: TimelineHashMap[str, int] = TimelineHashMap(reg)
    o = TimelineObject(reg, "x")
    m["a"] = 1
    reg.get_or_create_snapshot(1)
    m["a"] = 2
    reg.get_or_create_snapshot(2)
    m["b"] = 1
    o.set("y")
    reg.delete_snapshot(2)
    # Snapshot 1 is the newest again, and already holds "a"; new writes land there too.
    m["a"] = 3
    m["c"] = 1
    o.set("z")
    assert m.to_dict(1) == {"a": 1} and o.get(1) == "x"
    reg.revert_to_snapshot(1)
    assert m == {"a": 1} and o.get() == "x"


def test_registry_does_not_keep_structures_alive() -> None:
    reg = SnapshotRegistry()
    kept: TimelineHashMap[str, int] = TimelineHashMap(reg)
    dropped: TimelineHashMap[str, int] = TimelineHashMap(reg)
    reg.get_or_create_snapshot(1)
    kept["a"] = 1
    dropped["a"] = 1
    watch = weakref.ref(dropped)
    del dropped
    gc.collect()
    assert watch() is None
    # Reverting skips the released structure's leftover delta.
    reg.revert_to_snapshot(1)
    assert kept == {}
    reg.delete_snapshots_up_to(2)
    assert reg.delta_count() == 0


def test_reset_empties_everything() -> None:
    reg = SnapshotRegistry()
    m: TimelineHashMap[str, int] = TimelineHashMap(reg)
    s: TimelineHashSet[str] = TimelineHashSet(reg)
    o = TimelineObject(reg, "initial")
    m["a"] = 1
    reg.get_or_create_snapshot(1)
    s.add("x")
    o.set("changed")
    reg.reset()
    assert (m.to_dict(), s.to_set(), o.get()) == ({}, set(), "initial")
    assert reg.snapshot_offsets() == [] and reg.delta_count() == 0
    m["b"] = 2
    assert reg.delta_count() == 0
    # Offsets may start anywhere after a reset.
    reg.get_or_create_snapshot(0)
    m["b"] = 3
    assert m.get("b", offset=0) == 2
