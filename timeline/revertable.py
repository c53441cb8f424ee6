"""The package-internal contract between `SnapshotRegistry` and the timeline structures.

Rules:
- A delta is what one structure recorded in one snapshot: enough to restore that structure to
  its state as of the snapshot's offset. It is created lazily, by the structure's first write
  after the snapshot became the newest, so a structure untouched since a snapshot has no delta
  in it.
- The registry owns the deltas (keyed by the structure's serial number) and decides when they
  are undone, merged or dropped; the structure decides what a delta holds and how to apply it.
- Users never call these methods; they are underscore names so that they stay out of the
  structures' public surface.

Theory of operation:
- Only the newest snapshot ever receives new deltas. Each structure caches whether it must
  record on its next write ("recording state"), so the write path reads one attribute instead
  of asking the registry. The registry keeps those caches right by calling `_follow_newest`
  whenever the newest snapshot changes for that structure.
- Deleting a snapshot that has an older neighbour folds its deltas into the neighbour with
  `Delta.absorb`: the older delta's entries win, because they hold the older state.
"""

from __future__ import annotations

from typing import Any, NoReturn, Protocol, TypeVar


class Delta(Protocol):
    """One structure's record in one snapshot."""

    def absorb(self, newer: Delta) -> None:
        """Fold in the delta of the same structure from the next-newer snapshot, which is being
        deleted. Entries already here win: they describe the older (this snapshot's) state."""

    def entry_count(self) -> int:
        """How many recorded entries this delta holds (a scalar's delta holds one)."""


DeltaT_contra = TypeVar("DeltaT_contra", bound=Delta, contravariant=True)


class Revertable(Protocol[DeltaT_contra]):
    """A structure registered with a `SnapshotRegistry`."""

    def _undo(self, delta: DeltaT_contra) -> None:
        """Restore the state recorded in `delta`. The registry undoes the deltas of several
        snapshots newest first, so the oldest one applied last decides the result."""

    def _follow_newest(self, delta: DeltaT_contra | None, snapshots_exist: bool) -> None:
        """The newest snapshot changed: `delta` is this structure's delta in it (None if it has
        none yet) and `snapshots_exist` says whether the next write must record anything."""

    def _reset(self) -> None:
        """Return to the initial, empty value (the registry drops every snapshot itself)."""


def refuse_copy(structure: object, protocol: Any) -> NoReturn:
    """`__reduce_ex__` of every timeline structure: a copy would share the original's
    registry serial, so the two would overwrite each other's history."""
    raise TypeError(
        f"{type(structure).__name__} cannot be copied or pickled; read its state into a plain "
        "container instead (to_dict(), to_set(), get())"
    )
