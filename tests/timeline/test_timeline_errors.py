"""Every misuse of the timeline package raises a typed error that names what it is about."""

from __future__ import annotations

import copy
import pickle
from collections.abc import Callable
from typing import Any

import pytest

from replog.timeline import (
    NoneNotAllowedError,
    SnapshotOrderError,
    SnapshotRegistry,
    TimelineError,
    TimelineHashMap,
    TimelineHashSet,
    TimelineInteger,
    TimelineLong,
    TimelineObject,
    UnknownSnapshotError,
)


class Structures:
    def __init__(self) -> None:
        self.reg = SnapshotRegistry()
        self.m: TimelineHashMap[str, int] = TimelineHashMap(self.reg)
        self.s: TimelineHashSet[str] = TimelineHashSet(self.reg)
        self.n = TimelineInteger(self.reg)
        self.o = TimelineObject(self.reg, "initial")
        self.m["a"] = 1
        self.s.add("a")
        self.reg.get_or_create_snapshot(5)
        self.reg.get_or_create_snapshot(9)


@pytest.fixture
def st() -> Structures:
    return Structures()


HISTORICAL_READS: dict[str, Callable[[Structures, int], object]] = {
    "map.get": lambda st, o: st.m.get("a", offset=o),
    "map.keys": lambda st, o: st.m.keys(o),
    "map.values": lambda st, o: st.m.values(o),
    "map.items": lambda st, o: st.m.items(o),
    "map.size": lambda st, o: st.m.size(o),
    "map.contains": lambda st, o: st.m.contains("a", o),
    "map.to_dict": lambda st, o: st.m.to_dict(o),
    "set.contains": lambda st, o: st.s.contains("a", o),
    "set.size": lambda st, o: st.s.size(o),
    "set.iter": lambda st, o: st.s.iter(o),
    "set.to_set": lambda st, o: st.s.to_set(o),
    "integer.get": lambda st, o: st.n.get(o),
    "object.get": lambda st, o: st.o.get(o),
}


@pytest.mark.parametrize("read", HISTORICAL_READS.values(), ids=HISTORICAL_READS.keys())
@pytest.mark.parametrize("offset", [4, 7, 10])
def test_read_at_an_offset_without_a_snapshot(
    st: Structures, read: Callable[[Structures, int], object], offset: int
) -> None:
    with pytest.raises(UnknownSnapshotError) as raised:
        read(st, offset)
    assert raised.value.snapshot_offset == offset
    assert raised.value.snapshot_offsets == (5, 9)
    assert str(raised.value) == f"no snapshot at offset {offset}; snapshots exist at offsets 5, 9"
    assert isinstance(raised.value, LookupError)
    assert isinstance(raised.value, TimelineError)


def test_read_with_no_snapshots_at_all() -> None:
    reg = SnapshotRegistry()
    m: TimelineHashMap[str, int] = TimelineHashMap(reg)
    with pytest.raises(
        UnknownSnapshotError, match="no snapshot at offset 0; there are no snapshots"
    ):
        m.get("a", offset=0)


@pytest.mark.parametrize(
    "operation",
    [SnapshotRegistry.revert_to_snapshot, SnapshotRegistry.delete_snapshot],
    ids=["revert_to_snapshot", "delete_snapshot"],
)
def test_revert_or_delete_of_an_unknown_snapshot(
    st: Structures, operation: Callable[[SnapshotRegistry, int], None]
) -> None:
    with pytest.raises(UnknownSnapshotError, match="no snapshot at offset 6; "):
        operation(st.reg, 6)
    # Nothing changed.
    assert st.reg.snapshot_offsets() == [5, 9]


def test_snapshot_offsets_must_not_decrease(st: Structures) -> None:
    with pytest.raises(SnapshotOrderError) as raised:
        st.reg.get_or_create_snapshot(7)
    assert raised.value.snapshot_offset == 7
    assert raised.value.latest_offset == 9
    assert "offset 7" in str(raised.value) and "offset 9" in str(raised.value)
    assert isinstance(raised.value, ValueError)
    assert st.reg.snapshot_offsets() == [5, 9]


def test_creating_the_newest_offset_again_returns_it(st: Structures) -> None:
    st.m["a"] = 2
    assert st.reg.get_or_create_snapshot(9) == 9
    assert st.reg.snapshot_offsets() == [5, 9]
    # The existing snapshot kept what it recorded.
    assert st.m.get("a", offset=9) == 1


@pytest.mark.parametrize("offset", ["5", 5.0, True, None])
def test_offsets_must_be_ints(st: Structures, offset: Any) -> None:
    with pytest.raises(TypeError, match="snapshot offset must be an int"):
        st.reg.get_or_create_snapshot(offset)


NONE_WRITES: dict[str, Callable[[Structures], object]] = {
    "map key": lambda st: st.m.__setitem__(None, 1),  # type: ignore[index]
    "map value": lambda st: st.m.__setitem__("b", None),  # type: ignore[assignment]
    "map put": lambda st: st.m.put("b", None),  # type: ignore[arg-type]
    "map update": lambda st: st.m.update({"b": None}),  # type: ignore[dict-item]
    "map setdefault": lambda st: st.m.setdefault("b"),  # type: ignore[call-arg]
    "set add": lambda st: st.s.add(None),  # type: ignore[arg-type]
    "object set": lambda st: st.o.set(None),  # type: ignore[arg-type]
    "object initial": lambda st: TimelineObject(st.reg, None),
    "integer set": lambda st: st.n.set(None),  # type: ignore[arg-type]
    "long set": lambda st: TimelineLong(st.reg).set(None),  # type: ignore[arg-type]
}


@pytest.mark.parametrize("write", NONE_WRITES.values(), ids=NONE_WRITES.keys())
def test_none_is_rejected(st: Structures, write: Callable[[Structures], object]) -> None:
    deltas = st.reg.delta_count()
    with pytest.raises(NoneNotAllowedError, match="does not accept None"):
        write(st)
    assert isinstance(NoneNotAllowedError("x", "y"), TypeError)
    # A rejected write records nothing and changes nothing.
    assert st.reg.delta_count() == deltas
    assert st.m == {"a": 1} and st.s.to_set() == {"a"}
    assert st.n.get() == 0 and st.o.get() == "initial"


@pytest.mark.parametrize("value", ["1", 1.5, True])
def test_integers_hold_only_ints(st: Structures, value: Any) -> None:
    with pytest.raises(TypeError, match="holds ints"):
        st.n.set(value)


def test_missing_keys_raise_key_error_and_record_nothing(st: Structures) -> None:
    deltas = st.reg.delta_count()
    with pytest.raises(KeyError):
        del st.m["missing"]
    with pytest.raises(KeyError):
        st.s.remove("missing")
    st.s.discard("missing")
    assert st.m.remove("missing") is None
    assert st.reg.delta_count() == deltas


@pytest.mark.parametrize("structure", ["m", "s", "n", "o"])
@pytest.mark.parametrize(
    "duplicate", [copy.copy, copy.deepcopy, pickle.dumps], ids=["copy", "deepcopy", "pickle"]
)
def test_structures_cannot_be_copied(
    st: Structures, structure: str, duplicate: Callable[[object], object]
) -> None:
    with pytest.raises(TypeError, match="cannot be copied or pickled"):
        duplicate(getattr(st, structure))


def test_live_views_are_read_only(st: Structures) -> None:
    with pytest.raises(TypeError):
        st.m.live["b"] = 2  # type: ignore[index]
    assert not hasattr(st.s.live, "add")
