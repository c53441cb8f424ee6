"""TimelineHashSet: a set that can be read at, and reverted to, any live snapshot.

Rules:
- The set's own methods (`add`, `discard`, `remove`, `x in s`, `len(s)`, iteration, and the
  MutableSet mixins such as `|=` and `pop`) work on the live state. `contains(x, offset)`,
  `size(offset)`, `iter(offset)` and `to_set(offset)` read snapshot `offset` and raise
  `UnknownSnapshotError` if the registry holds no snapshot there.
- `live` is a read-only view of the live elements (a dict keys view): membership tests and
  iteration through it cost what they cost on a plain set, so hot loops should use it.
- None is rejected as an element (`NoneNotAllowedError`). Elements must be immutable, as for
  any set.
- Set algebra (`s | t`, `s & t`, ...) returns a plain `set` of live elements.

Theory of operation: see `replog.timeline.snapshottable_table`; the set is that table with every
value True, so a delta records True (was a member) or None (was not). The two hot write paths
are written out in full because a Python call costs as much as the rest of the write.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, KeysView, MutableSet
from typing import Any

from replog.timeline.snapshot_registry import SnapshotRegistry
from replog.timeline.snapshottable_table import _PENDING, K, SnapshottableTable


class TimelineHashSet(SnapshottableTable[K, bool], MutableSet[K]):
    """A set whose membership at every live snapshot stays readable and restorable."""

    __slots__ = ("live",)

    def __init__(self, registry: SnapshotRegistry) -> None:
        super().__init__(registry)
        # The keys view tracks `_live`, which is never rebound, so it stays valid for life.
        self.live: KeysView[K] = self._live.keys()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({set(self._live)!r})"

    @classmethod
    def _from_iterable(cls, it: Iterable[Any]) -> set[Any]:
        # MutableSet's operators build their results with this; a timeline structure needs a
        # registry, and a result detached from history is what callers of `s | t` expect.
        return set(it)

    # -- live state: hot paths ------------------------------------------------------------------

    def add(self, value: K) -> None:
        """Add `value` to the live set."""
        if value is None:
            self._reject_none("an element")
        live = self._live
        tier = self._tier
        if tier is None:
            live[value] = True  # storing True over True changes nothing
            return
        if tier is _PENDING:
            # The delta must be opened before the live size moves (it records that size).
            if value in live:
                return  # no change, nothing to record
            tier = self._open_tier()
        # Elements hash in Python (a UUID in a tuple): one insert, its effect read off the size,
        # costs a hash less than a membership test before it.
        size = len(live)
        live[value] = True
        if len(live) != size:
            tier.setdefault(value, None)  # absent then, unless this tier recorded it before

    def discard(self, value: K) -> None:
        """Remove `value` from the live set if present."""
        live = self._live
        tier = self._tier
        if tier is _PENDING:
            if value not in live:
                return
            tier = self._open_tier()
        if live.pop(value, None) is None:  # every stored value is True
            return
        if tier is not None:
            tier.setdefault(value, True)  # a member then, unless this tier recorded it before

    # -- reads at a snapshot --------------------------------------------------------------------

    def iter(self, offset: int | None = None) -> Iterator[K]:
        """Iterate over the elements in snapshot `offset` (None: the live elements)."""
        if offset is None:
            return iter(self._live)
        return iter(self._state_at(offset))

    def to_set(self, offset: int | None = None) -> set[K]:
        """A new plain set of the elements in snapshot `offset` (None: now)."""
        if offset is None:
            return set(self._live)
        return set(self._state_at(offset))
