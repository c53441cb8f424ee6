"""Timeline structures against a naive model that deep-copies the whole state at every
snapshot, over random interleavings of writes, snapshots, historical reads, reverts, deletes and
resets. After every step, every structure must read exactly like the model, live and at every
live snapshot."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from replog.timeline import (
    SnapshotOrderError,
    SnapshotRegistry,
    TimelineHashMap,
    TimelineHashSet,
    TimelineInteger,
    TimelineLong,
    TimelineObject,
    UnknownSnapshotError,
)

# A small universe, so that keys collide and are rewritten across snapshots.
KEYS = st.sampled_from("abcd")
VALUES = st.integers(0, 9)
INITIAL_OBJECT = (-1, -1)
# (method of TimelineMachine, key, value); each write uses what it needs of key and value.
WRITES = st.tuples(
    st.sampled_from(
        [
            "map_set",
            "map_set",
            "map_put",
            "map_delete",
            "map_remove",
            "map_clear",
            "set_add",
            "set_discard",
            "integer_set",
            "integer_step",
            "long_increment",
            "object_set",
        ]
    ),
    KEYS,
    VALUES,
)


@dataclass
class Model:
    map: dict[str, int] = field(default_factory=dict)
    set: set[str] = field(default_factory=set)
    integer: int = 0
    long: int = 0
    object: tuple[int, int] = INITIAL_OBJECT


class TimelineMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.reg = SnapshotRegistry()
        self.map: TimelineHashMap[str, int] = TimelineHashMap(self.reg)
        self.set: TimelineHashSet[str] = TimelineHashSet(self.reg)
        self.integer = TimelineInteger(self.reg)
        self.long = TimelineLong(self.reg)
        self.object: TimelineObject[tuple[int, int]] = TimelineObject(self.reg, INITIAL_OBJECT)
        self.live = Model()
        # Offset -> deep copy of the model when that snapshot was created; oldest first.
        self.snapshots: dict[int, Model] = {}

    # -- writes --------------------------------------------------------------------------------

    # Writes come in short batches, like a controller replaying the records of one write, and
    # a batch is usually followed by a snapshot at its offset, so that several snapshots are
    # often alive at once.
    @rule(batch=st.lists(WRITES, min_size=1, max_size=4))
    def write(self, batch: list[tuple[str, str, int]]) -> None:
        for write, key, value in batch:
            getattr(self, write)(key, value)

    @rule(batch=st.lists(WRITES, max_size=4), gap=st.integers(0, 3), start=st.integers(-1, 5))
    def replay(self, batch: list[tuple[str, str, int]], gap: int, start: int) -> None:
        self.write(batch)
        self.create_snapshot(gap, start)

    def map_set(self, key: str, value: int) -> None:
        self.map[key] = value
        self.live.map[key] = value

    def map_put(self, key: str, value: int) -> None:
        assert self.map.put(key, value) == self.live.map.get(key)
        self.live.map[key] = value

    def map_delete(self, key: str, value: int) -> None:
        if key in self.live.map:
            del self.map[key]
            del self.live.map[key]
        else:
            with pytest.raises(KeyError):
                del self.map[key]

    def map_remove(self, key: str, value: int) -> None:
        assert self.map.remove(key) == self.live.map.pop(key, None)

    def map_clear(self, key: str, value: int) -> None:
        self.map.clear()
        self.live.map.clear()

    def set_add(self, key: str, value: int) -> None:
        self.set.add(key)
        self.live.set.add(key)

    def set_discard(self, key: str, value: int) -> None:
        self.set.discard(key)
        self.live.set.discard(key)

    def integer_set(self, key: str, value: int) -> None:
        self.integer.set(value)
        self.live.integer = value

    def integer_step(self, key: str, value: int) -> None:
        up = value % 2 == 0
        self.live.integer += 1 if up else -1
        assert (self.integer.increment() if up else self.integer.decrement()) == self.live.integer

    def long_increment(self, key: str, value: int) -> None:
        self.long.increment()
        self.live.long += 1

    def object_set(self, key: str, value: int) -> None:
        self.object.set((value, len(key)))
        self.live.object = (value, len(key))

    # -- snapshots -----------------------------------------------------------------------------

    @rule(gap=st.integers(-2, 3), start=st.integers(-1, 5))
    def create_snapshot(self, gap: int, start: int) -> None:
        latest = self.reg.latest_offset()
        offset = start if latest is None else latest + gap
        if latest is not None and offset < latest:
            with pytest.raises(SnapshotOrderError):
                self.reg.get_or_create_snapshot(offset)
            return
        assert self.reg.get_or_create_snapshot(offset) == offset
        if offset not in self.snapshots:
            self.snapshots[offset] = copy.deepcopy(self.live)

    def draw_offset(self, data: st.DataObject) -> int | None:
        """A live snapshot's offset, or None after checking that an offset without a snapshot
        is refused (always when there are none, sometimes otherwise)."""
        missing = max(self.snapshots, default=0) + 1
        offset = data.draw(st.sampled_from([*self.snapshots, missing]))
        if offset != missing:
            return offset
        with pytest.raises(UnknownSnapshotError):
            self.reg.revert_to_snapshot(offset)
        with pytest.raises(UnknownSnapshotError):
            self.reg.delete_snapshot(offset)
        return None

    @rule(data=st.data())
    def revert(self, data: st.DataObject) -> None:
        offset = self.draw_offset(data)
        if offset is not None:
            self.reg.revert_to_snapshot(offset)
            self.live = copy.deepcopy(self.snapshots[offset])
            self.snapshots = {o: m for o, m in self.snapshots.items() if o <= offset}

    @rule(data=st.data())
    def delete_snapshot(self, data: st.DataObject) -> None:
        offset = self.draw_offset(data)
        if offset is not None:
            self.reg.delete_snapshot(offset)
            del self.snapshots[offset]

    @rule(data=st.data())
    def delete_snapshots_up_to(self, data: st.DataObject) -> None:
        low, high = min(self.snapshots, default=0), max(self.snapshots, default=0)
        offset = data.draw(st.integers(low - 1, high + 1))
        self.reg.delete_snapshots_up_to(offset)
        self.snapshots = {o: m for o, m in self.snapshots.items() if o >= offset}

    # Only now and then: a reset throws away everything the other rules built up.
    @precondition(lambda self: len(self.snapshots) >= 3)
    @rule()
    def reset(self) -> None:
        self.reg.reset()
        self.live = Model()
        self.snapshots = {}

    # -- checks --------------------------------------------------------------------------------

    @invariant()
    def snapshots_match(self) -> None:
        assert self.reg.snapshot_offsets() == list(self.snapshots)
        assert self.reg.latest_offset() == (max(self.snapshots) if self.snapshots else None)
        if not self.snapshots:
            assert self.reg.delta_count() == 0

    @invariant()
    def live_state_matches(self) -> None:
        self.check(None, self.live)
        assert dict(self.map.live) == self.live.map
        assert set(self.set.live) == self.live.set

    @invariant()
    def every_snapshot_reads_as_created(self) -> None:
        for offset, model in self.snapshots.items():
            self.check(offset, model)

    @invariant()
    def unknown_offsets_raise(self) -> None:
        missing = max(self.snapshots, default=0) + 1
        with pytest.raises(UnknownSnapshotError):
            self.map.get("a", offset=missing)
        with pytest.raises(UnknownSnapshotError):
            self.object.get(missing)

    def check(self, offset: int | None, model: Model) -> None:
        m = self.map
        assert m.to_dict(offset) == model.map
        assert dict(m.items(offset)) == model.map
        assert set(m.keys(offset)) == set(model.map)
        assert sorted(m.values(offset)) == sorted(model.map.values())
        assert m.size(offset) == len(model.map)
        for key in "abcd":
            assert m.get(key, offset=offset) == model.map.get(key)
            assert m.contains(key, offset) == (key in model.map)
            assert self.set.contains(key, offset) == (key in model.set)
        assert self.set.to_set(offset) == model.set
        assert sorted(self.set.iter(offset)) == sorted(model.set)
        assert self.set.size(offset) == len(model.set)
        assert self.integer.get(offset) == model.integer
        assert self.long.get(offset) == model.long
        assert self.object.get(offset) == model.object


TimelineMachine.TestCase.settings = settings(
    max_examples=400, stateful_step_count=40, deadline=None
)
TestTimelineModel = TimelineMachine.TestCase
