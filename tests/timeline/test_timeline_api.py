"""The Python surface of the timeline structures: every way to write records history, views
behave like dict and set views, and the registry answers questions about its snapshots."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from replog.timeline import (
    SnapshotRegistry,
    TimelineHashMap,
    TimelineHashSet,
    TimelineInteger,
    TimelineLong,
    TimelineObject,
)

MAP_WRITES: dict[str, Callable[[TimelineHashMap[str, int]], object]] = {
    "setitem": lambda m: m.__setitem__("a", 9),
    "delitem": lambda m: m.__delitem__("a"),
    "put": lambda m: m.put("c", 9),
    "remove": lambda m: m.remove("b"),
    "pop": lambda m: m.pop("a"),
    "popitem": lambda m: m.popitem(),
    "setdefault": lambda m: m.setdefault("c", 9),
    "update": lambda m: m.update({"a": 9, "c": 9}),
    "clear": lambda m: m.clear(),
}


@pytest.mark.parametrize("write", MAP_WRITES.values(), ids=MAP_WRITES.keys())
def test_every_map_write_is_recorded(write: Callable[[TimelineHashMap[str, int]], object]) -> None:
    reg = SnapshotRegistry()
    m: TimelineHashMap[str, int] = TimelineHashMap(reg)
    m.update(a=1, b=2)
    reg.get_or_create_snapshot(3)
    write(m)
    assert m != {"a": 1, "b": 2}
    assert m.to_dict(3) == {"a": 1, "b": 2}
    reg.revert_to_snapshot(3)
    assert m == {"a": 1, "b": 2}


SET_WRITES: dict[str, Callable[[TimelineHashSet[str]], object]] = {
    "add": lambda s: s.add("c"),
    "discard": lambda s: s.discard("a"),
    "remove": lambda s: s.remove("b"),
    "pop": lambda s: s.pop(),
    "clear": lambda s: s.clear(),
    "ior": lambda s: s.__ior__({"c", "d"}),
    "isub": lambda s: s.__isub__({"a"}),
    "iand": lambda s: s.__iand__({"a"}),
    "ixor": lambda s: s.__ixor__({"a", "c"}),
}


@pytest.mark.parametrize("write", SET_WRITES.values(), ids=SET_WRITES.keys())
def test_every_set_write_is_recorded(write: Callable[[TimelineHashSet[str]], object]) -> None:
    reg = SnapshotRegistry()
    s: TimelineHashSet[str] = TimelineHashSet(reg)
    s.add("a")
    s.add("b")
    reg.get_or_create_snapshot(3)
    write(s)
    assert s.to_set() != {"a", "b"}
    assert s.to_set(3) == {"a", "b"} and set(s.iter(3)) == {"a", "b"} and s.size(3) == 2
    reg.revert_to_snapshot(3)
    assert s.to_set() == {"a", "b"}


def test_map_reads_live_and_at_offsets() -> None:
    reg = SnapshotRegistry()
    m: TimelineHashMap[str, int] = TimelineHashMap(reg)
    m["a"] = 1
    reg.get_or_create_snapshot(1)
    m["b"] = 2
    assert m["a"] == 1 and "b" in m and len(m) == 2 and sorted(m) == ["a", "b"]
    assert m.live["b"] == 2 and "b" in m.live and len(m.live) == 2
    assert m.get("z", 0) == 0 and m.get("z", 0, offset=1) == 0
    assert m.get("b", -1, offset=1) == -1
    assert not m.contains("b", 1) and m.contains("b")
    assert m.keys() == {"a", "b"} and list(m.values()) == [1, 2]
    assert m.items() == {("a", 1), ("b", 2)}
    assert repr(m) == "TimelineHashMap({'a': 1, 'b': 2})"


def test_views_at_an_offset_do_not_change_afterwards() -> None:
    reg = SnapshotRegistry()
    m: TimelineHashMap[str, int] = TimelineHashMap(reg)
    s: TimelineHashSet[str] = TimelineHashSet(reg)
    m["a"] = 1
    s.add("a")
    reg.get_or_create_snapshot(1)
    items = m.items(1)
    elements = s.iter(1)
    for i in range(10):
        m[str(i)] = i
        s.add(str(i))
    del m["a"]
    s.discard("a")
    assert dict(items) == {"a": 1}
    assert list(elements) == ["a"]


def test_set_reads_and_algebra() -> None:
    reg = SnapshotRegistry()
    s: TimelineHashSet[int] = TimelineHashSet(reg)
    s.add(1)
    s.add(2)
    assert 1 in s and 1 in s.live and len(s) == 2 and sorted(s) == [1, 2]
    union = s | {3}
    assert type(union) is set and union == {1, 2, 3}
    assert s & {2, 5} == {2} and s - {1} == {2}
    assert s.live == {1, 2} and s.live | {4} == {1, 2, 4}
    assert repr(s) == "TimelineHashSet({1, 2})"


def test_scalars() -> None:
    reg = SnapshotRegistry()
    n = TimelineInteger(reg)
    total = TimelineLong(reg)
    o: TimelineObject[tuple[int, ...]] = TimelineObject(reg, ())
    reg.get_or_create_snapshot(1)
    assert n.increment() == 1 and n.increment() == 2 and n.decrement() == 1
    total.set(2**70)
    o.set((1, 2))
    assert (n.get(1), total.get(1), o.get(1)) == (0, 0, ())
    assert (n.get(), total.get(), o.get()) == (1, 2**70, (1, 2))
    assert repr(n) == "TimelineInteger(1)" and repr(o) == "TimelineObject((1, 2))"
    reg.revert_to_snapshot(1)
    assert (n.get(), total.get(), o.get()) == (0, 0, ())


def test_registry_queries() -> None:
    reg = SnapshotRegistry()
    assert reg.latest_offset() is None and reg.snapshot_offsets() == []
    assert reg.get_or_create_snapshot(-1) == -1  # "nothing committed yet" is a valid offset
    reg.get_or_create_snapshot(4)
    reg.get_or_create_snapshot(8)
    assert reg.latest_offset() == 8
    assert reg.snapshot_offsets() == [-1, 4, 8]
    assert reg.has_snapshot(4) and not reg.has_snapshot(5) and not reg.has_snapshot(9)
    reg.delete_snapshots_up_to(4)  # strictly below 4
    assert reg.snapshot_offsets() == [4, 8]
    reg.delete_snapshot(8)
    assert reg.snapshot_offsets() == [4]
    reg.delete_snapshots_up_to(4)
    assert reg.snapshot_offsets() == [4]
    assert repr(reg) == "SnapshotRegistry(snapshot_offsets=[4])"


def test_structure_created_after_a_snapshot_reads_live_there() -> None:
    """As in Kafka: a structure created while snapshots exist reads at them as if it had held
    its initial value then, and reverting to them restores that value."""
    reg = SnapshotRegistry()
    reg.get_or_create_snapshot(1)
    late: TimelineHashMap[str, int] = TimelineHashMap(reg)
    late["a"] = 1
    assert late.get("a", offset=1) is None
    later: TimelineObject[str] = TimelineObject(reg, "x")
    assert later.get(1) == "x"
    reg.get_or_create_snapshot(2)
    later.set("y")
    assert later.get(1) == "x"  # the value saved in snapshot 2 is also its value at 1
    reg.revert_to_snapshot(1)
    assert late == {} and later.get() == "x"


def test_set_writes_record_the_state_before_them_whatever_the_tier() -> None:
    """`add` and `discard` infer a change from the live size and record after writing; a
    write that opens a snapshot's delta must still record the size from before it, a repeat
    write within one snapshot must keep the oldest state, and a no-op records nothing."""
    reg = SnapshotRegistry()
    s: TimelineHashSet[str] = TimelineHashSet(reg)
    s.add("a")
    s.add("a")  # no snapshots: nothing is recorded, the element stays
    assert s.to_set() == {"a"}
    reg.get_or_create_snapshot(1)
    s.discard("x")  # a no-op as the first write: no delta opened
    s.add("a")
    assert reg._deltas_since(1, s._serial) == []
    s.add("b")  # opens the delta: the size then was 1
    s.discard("b")
    s.add("b")
    s.discard("a")
    s.add("a")
    s.discard("a")
    reg.get_or_create_snapshot(2)
    s.discard("b")  # opens snapshot 2's delta: the size then was 1
    s.add("c")
    s.add("c")
    assert (s.to_set(1), s.size(1)) == ({"a"}, 1)
    assert (s.to_set(2), s.size(2)) == ({"b"}, 1)
    assert s.to_set() == {"c"}
    reg.revert_to_snapshot(2)
    assert s.to_set() == {"b"}
    reg.revert_to_snapshot(1)
    assert s.to_set() == {"a"}
