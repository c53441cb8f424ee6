"""TimelineObject, TimelineInteger, TimelineLong: single values readable at, and revertible to,
any live snapshot.

Rules:
- `get()` returns the live value; `get(offset)` the value when snapshot `offset` was created,
  raising `UnknownSnapshotError` if the registry holds no snapshot there.
- None is rejected (`NoneNotAllowedError`); integers also reject anything that is not an int
  (bool included).
- `TimelineInteger` and `TimelineLong` start at 0 and behave identically: Python ints do not
  overflow, so Kafka's 32/64-bit distinction survives only in the names, for readers mapping
  controller code across.
- Stored values are treated as immutable; mutating the object held by a TimelineObject in place
  rewrites its history too, which is a caller bug.
- `reset()` of the registry returns each scalar to the initial value it was created with.

Theory of operation: the first `set` after the newest snapshot was created saves the old value
in that snapshot (a `ScalarDelta`); later sets only overwrite the live value. `get(offset)`
returns the value saved in the first delta found from snapshot `offset` forward, else the live
value. Undoing a delta writes its saved value back. `_pending` caches "the newest snapshot has
no delta of mine yet", so a set costs one attribute test when nothing needs recording.
"""

from __future__ import annotations

from typing import Generic, TypeVar

from replog.timeline.errors import NoneNotAllowedError
from replog.timeline.revertable import Delta, refuse_copy
from replog.timeline.snapshot_registry import SnapshotRegistry

T = TypeVar("T")


class ScalarDelta(Generic[T]):
    """The value a scalar had when one snapshot was created."""

    __slots__ = ("value",)

    def __init__(self, value: T) -> None:
        self.value = value

    def absorb(self, newer: Delta) -> None:
        # The older snapshot's saved value is the older one, so it stays; nothing to take.
        assert isinstance(newer, ScalarDelta), "a scalar's deltas are all ScalarDeltas"

    def entry_count(self) -> int:
        return 1


class TimelineObject(Generic[T]):
    """A single non-None value with history."""

    __slots__ = ("__weakref__", "_initial", "_pending", "_registry", "_serial", "_value")

    def __init__(self, registry: SnapshotRegistry, initial: T) -> None:
        self._check(initial)
        self._registry = registry
        self._initial = initial
        self._value = initial
        self._pending = False
        self._serial = registry._register(self)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._value!r})"

    __reduce_ex__ = refuse_copy

    def get(self, offset: int | None = None) -> T:
        """The value in snapshot `offset` (None: now)."""
        if offset is None:
            return self._value
        deltas: list[ScalarDelta[T]] = self._registry._deltas_since(offset, self._serial)
        return deltas[0].value if deltas else self._value

    def set(self, value: T) -> None:
        """Replace the live value."""
        self._check(value)
        if self._pending:
            self._registry._record(self._serial, ScalarDelta(self._value))
            self._pending = False
        self._value = value

    def _check(self, value: T) -> None:
        if value is None:
            raise NoneNotAllowedError(type(self).__name__, "a value")

    # -- Revertable ---------------------------------------------------------------------------

    def _undo(self, delta: ScalarDelta[T]) -> None:
        self._value = delta.value

    def _follow_newest(self, delta: ScalarDelta[T] | None, snapshots_exist: bool) -> None:
        self._pending = snapshots_exist and delta is None

    def _reset(self) -> None:
        self._value = self._initial


class TimelineInteger(TimelineObject[int]):
    """An int with history, starting at 0."""

    __slots__ = ()

    def __init__(self, registry: SnapshotRegistry) -> None:
        super().__init__(registry, 0)

    def increment(self) -> int:
        """Add one to the live value and return the result."""
        self.set(self._value + 1)
        return self._value

    def decrement(self) -> int:
        """Subtract one from the live value and return the result."""
        self.set(self._value - 1)
        return self._value

    def _check(self, value: int) -> None:
        super()._check(value)
        if not isinstance(value, int) or isinstance(value, bool):
            raise TypeError(f"{type(self).__name__} holds ints, not {value!r}")


class TimelineLong(TimelineInteger):
    """Kafka's 64-bit counterpart of TimelineInteger; identical here (Python ints)."""

    __slots__ = ()
