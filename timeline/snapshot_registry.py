"""SnapshotRegistry: the ordered snapshots that every timeline structure can be read at and
reverted to.

A snapshot is named by a metadata-log offset (`snapshot_offset`). The controller creates one
after replaying each batch; reading a structure at that offset later returns exactly what it
held when the snapshot was created, and reverting to it undoes every write made since.

Rules:
- Snapshot offsets never decrease. Creating the newest offset again returns it unchanged;
  creating a lower one raises `SnapshotOrderError`.
- Naming an offset that holds no snapshot (read, revert, delete) raises `UnknownSnapshotError`.
- `revert_to_snapshot(o)` undoes every write made since snapshot `o` was created, in every
  registered structure, drops the newer snapshots, and keeps `o` (now with nothing recorded).
- `delete_snapshot(o)` forgets one snapshot; reads at the others are unaffected.
  `delete_snapshots_up_to(o)` forgets every snapshot strictly below `o`.
- `reset()` drops every snapshot and empties every structure (before loading a Raft snapshot).
- The registry holds its structures weakly: a structure nobody references any more is
  released, and whatever it recorded in live snapshots is skipped by later reverts.
- Single-threaded: the controller owns the registry and its structures; nothing locks.

Theory of operation:
- Each snapshot holds, for every structure written since it became the newest (and before the
  next snapshot was created), one delta: the old values of what was changed in that interval,
  recorded on first touch. The value of anything at offset `o` is therefore found by walking the
  snapshots from `o` forward: the first delta that recorded it holds its value at `o`; if none
  did, it has not changed since `o` and the live value is the answer.
- Reverting undoes deltas newest first, so the costs are O(changes since the target), not
  O(live size) as in Kafka, whose hash tables scan their live entries on revert.
- Deleting the oldest snapshot drops its deltas. Deleting any other folds its deltas into the
  next-older snapshot, where older entries win (they hold the older state).
- Structures cache whether their next write must record (see `revertable`). The registry
  refreshes those caches when the newest snapshot changes: on creation, only structures that
  recorded into the previous newest snapshot need telling; going from no snapshots to some (or
  back) tells every structure, which is O(structures) but happens only when a controller gains
  or loses leadership.
"""

from __future__ import annotations

import weakref
from bisect import bisect_left
from collections.abc import Iterable
from typing import Any

from replog.timeline.errors import SnapshotOrderError, UnknownSnapshotError
from replog.timeline.revertable import Delta, Revertable


class _Snapshot:
    """One snapshot: its offset and the deltas recorded into it, keyed by structure serial."""

    __slots__ = ("deltas", "snapshot_offset")

    def __init__(self, snapshot_offset: int) -> None:
        self.snapshot_offset = snapshot_offset
        self.deltas: dict[int, Delta] = {}


def _check_offset(snapshot_offset: object) -> int:
    # bool is an int subclass; True as an offset is always a caller's mistake.
    if not isinstance(snapshot_offset, int) or isinstance(snapshot_offset, bool):
        raise TypeError(f"snapshot offset must be an int, not {snapshot_offset!r}")
    return snapshot_offset


class SnapshotRegistry:
    """The snapshots of one controller's state, oldest first, and the structures they cover."""

    __slots__ = ("_next_serial", "_offsets", "_revertables", "_snapshots")

    def __init__(self) -> None:
        # Parallel lists, oldest first; `_offsets` exists so lookups can bisect.
        self._snapshots: list[_Snapshot] = []
        self._offsets: list[int] = []
        self._revertables: weakref.WeakValueDictionary[int, Revertable[Any]] = (
            weakref.WeakValueDictionary()
        )
        # Serials, not id(), key the deltas: an id can be reused once a structure is released,
        # and its leftover deltas must never be applied to a newcomer.
        self._next_serial = 0

    def __repr__(self) -> str:
        return f"SnapshotRegistry(snapshot_offsets={self._offsets})"

    # -- snapshots ---------------------------------------------------------------------------

    def get_or_create_snapshot(self, snapshot_offset: int) -> int:
        """Create a snapshot at `snapshot_offset` and return that offset.

        Creating the newest snapshot's offset again is a no-op; a lower offset raises
        `SnapshotOrderError`."""
        _check_offset(snapshot_offset)
        if self._snapshots:
            latest = self._offsets[-1]
            if snapshot_offset == latest:
                return latest
            if snapshot_offset < latest:
                raise SnapshotOrderError(snapshot_offset, latest)
            # Only structures that recorded into the old newest snapshot had an open delta.
            stale = list(self._snapshots[-1].deltas)
        else:
            stale = list(self._revertables)
        self._snapshots.append(_Snapshot(snapshot_offset))
        self._offsets.append(snapshot_offset)
        self._refresh(stale)
        return snapshot_offset

    def has_snapshot(self, snapshot_offset: int) -> bool:
        """Whether a snapshot exists at `snapshot_offset`."""
        index = bisect_left(self._offsets, snapshot_offset)
        return index < len(self._offsets) and self._offsets[index] == snapshot_offset

    def latest_offset(self) -> int | None:
        """The newest snapshot's offset, or None when there are no snapshots."""
        return self._offsets[-1] if self._offsets else None

    def snapshot_offsets(self) -> list[int]:
        """Every snapshot's offset, oldest first."""
        return list(self._offsets)

    def revert_to_snapshot(self, snapshot_offset: int) -> None:
        """Return every structure to its state when snapshot `snapshot_offset` was created.

        Newer snapshots are deleted; the target is kept, with nothing recorded in it."""
        index = self._index_of(snapshot_offset)
        opened = list(self._snapshots[-1].deltas)
        # Newest first, so that for anything changed in several intervals the oldest recorded
        # value (the one at the target offset) is applied last and stays.
        for snapshot in reversed(self._snapshots[index:]):
            for serial, delta in snapshot.deltas.items():
                revertable = self._revertables.get(serial)
                if revertable is not None:
                    revertable._undo(delta)
        target = self._snapshots[index]
        target.deltas.clear()
        del self._snapshots[index + 1 :]
        del self._offsets[index + 1 :]
        assert self._offsets[-1] == snapshot_offset, "the target must be the newest snapshot"
        self._refresh(opened)

    def delete_snapshot(self, snapshot_offset: int) -> None:
        """Forget snapshot `snapshot_offset`; reads at every other snapshot are unchanged."""
        index = self._index_of(snapshot_offset)
        was_newest = index == len(self._snapshots) - 1
        removed = self._snapshots.pop(index)
        del self._offsets[index]
        if index > 0:
            # The older neighbour's interval now runs up to the next snapshot (or to now), so
            # it takes over what `removed` recorded, keeping its own (older) entries.
            older = self._snapshots[index - 1]
            for serial, delta in removed.deltas.items():
                kept = older.deltas.get(serial)
                if kept is None:
                    older.deltas[serial] = delta
                else:
                    kept.absorb(delta)
        if not self._snapshots:
            self._refresh(list(self._revertables))
        elif was_newest:
            # Everything `removed` recorded now lives in the new newest snapshot.
            self._refresh(list(self._snapshots[-1].deltas))

    def delete_snapshots_up_to(self, snapshot_offset: int) -> None:
        """Forget every snapshot whose offset is strictly less than `snapshot_offset`.

        Each one is the oldest when it goes, so its deltas are simply dropped."""
        _check_offset(snapshot_offset)
        count = bisect_left(self._offsets, snapshot_offset)
        if count == 0:
            return
        del self._snapshots[:count]
        del self._offsets[:count]
        if not self._snapshots:
            self._refresh(list(self._revertables))

    def reset(self) -> None:
        """Drop every snapshot and return every structure to its initial, empty value."""
        self._snapshots.clear()
        self._offsets.clear()
        for revertable in list(self._revertables.values()):
            revertable._reset()
            revertable._follow_newest(None, False)

    # -- introspection -----------------------------------------------------------------------

    def delta_count(self) -> int:
        """How many entries all snapshots hold (each displaced map entry or set element and each
        scalar's saved value counts one). For tests and benchmarks: it walks every delta."""
        return sum(
            delta.entry_count()
            for snapshot in self._snapshots
            for delta in snapshot.deltas.values()
        )

    # -- package-internal: used by the structures ---------------------------------------------

    def _register(self, revertable: Revertable[Any]) -> int:
        """Track `revertable` and return its serial number.

        A structure created while snapshots exist behaves, as in Kafka, as if it had held its
        initial value (empty, 0, `initial`) when they were created: its first write records
        that value into the newest snapshot, and reverts restore it."""
        serial = self._next_serial
        self._next_serial += 1
        self._revertables[serial] = revertable
        revertable._follow_newest(None, bool(self._snapshots))
        return serial

    def _record(self, serial: int, delta: Delta) -> None:
        """Store a structure's first delta in the newest snapshot."""
        assert self._snapshots, "structures only record while a snapshot exists"
        deltas = self._snapshots[-1].deltas
        assert serial not in deltas, "a structure records into a snapshot at most once"
        deltas[serial] = delta

    def _deltas_since(self, snapshot_offset: int, serial: int) -> list[Any]:
        """The structure's deltas in snapshot `snapshot_offset` and every newer one, oldest
        first. The first one that recorded something holds its value at `snapshot_offset`."""
        index = self._index_of(snapshot_offset)
        return [
            delta
            for snapshot in self._snapshots[index:]
            if (delta := snapshot.deltas.get(serial)) is not None
        ]

    def _index_of(self, snapshot_offset: int) -> int:
        _check_offset(snapshot_offset)
        index = bisect_left(self._offsets, snapshot_offset)
        if index == len(self._offsets) or self._offsets[index] != snapshot_offset:
            raise UnknownSnapshotError(snapshot_offset, self._offsets)
        return index

    def _refresh(self, serials: Iterable[int]) -> None:
        """Tell these structures what the newest snapshot now means for their next write."""
        newest = self._snapshots[-1].deltas if self._snapshots else {}
        snapshots_exist = bool(self._snapshots)
        for serial in serials:
            revertable = self._revertables.get(serial)
            if revertable is not None:
                revertable._follow_newest(newest.get(serial), snapshots_exist)
