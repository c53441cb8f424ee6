"""OffsetControl: which metadata-log offsets the controller's in-memory state stands for.

It owns the controller's `SnapshotRegistry` and tracks four offsets (all inclusive, the
controller-side convention: the offset *of* a record, not the one after it):

- `last_committed_offset` / `last_committed_quorum_epoch`: the last offset (and its Raft epoch)
  of the newest batch Raft reported committed, control batches included.
- `last_stable_offset`: the newest offset whose state reads may show. It is the newest snapshot
  at or below the last committed offset; that equals the last committed offset except while a
  committed control batch (which carries no metadata) sits between two of our pending writes.
- `next_write_offset`: where the next record the active controller writes will land; None on a
  standby.

Rules:
- Invariant: a snapshot exists exactly at `last_stable_offset`, so a read at that offset
  always works and a revert to it is always possible. Construction creates one at -1 (the state
  before any record), as does loading a Raft snapshot (at its last contained offset).
- The active controller creates a snapshot at the last offset of every batch it writes
  (`handle_schedule_append`), after replaying the batch; the state at that snapshot is the state
  the batch leaves behind.
- A standby creates a snapshot at every committed batch's last offset (after replaying it).
- When `last_stable_offset` advances, every snapshot strictly below it is deleted: nothing may
  ever be reverted to below committed state, so their history is dead weight. Except a held
  one (`hold`): a reader that takes a committed state in steps (a stop's snapshot, a loop turn
  each) reads it at a fixed offset while commits go on; it stays until `release`, and the
  snapshots between it and the stable offset are folded into it as they go. Loading a Raft
  snapshot drops every hold (the reader's next read raises `UnknownSnapshotError`).
- `activate(next_write_offset)` makes this the active controller's; `deactivate()` reverts all
  timeline state to `last_stable_offset`, throwing away every replayed but uncommitted write.
- Offsets only move forward: commits must arrive in order, writes beyond the last write.

Theory of operation: the registry's snapshots between `last_stable_offset` and the newest one
are exactly the in-flight (written, uncommitted) batches of the active controller. A commit
consumes them from the oldest end; a revert drops them all.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import Counter

from replog.timeline import SnapshotRegistry
from replog.timeline.errors import UnknownSnapshotError

# The offset "before the first record": snapshots and committed offsets start here.
EMPTY_LOG_OFFSET = -1


class OffsetControl:
    """The committed, stable and next-write offsets, and the snapshots that back them."""

    __slots__ = (
        "_held",
        "_last_committed_offset",
        "_last_committed_quorum_epoch",
        "_last_stable_offset",
        "_next_write_offset",
        "registry",
    )

    def __init__(self, registry: SnapshotRegistry | None = None) -> None:
        self.registry = SnapshotRegistry() if registry is None else registry
        self._last_committed_offset = EMPTY_LOG_OFFSET
        self._last_committed_quorum_epoch = -1
        self._last_stable_offset = EMPTY_LOG_OFFSET
        self._next_write_offset: int | None = None
        self._held: Counter[int] = Counter()  # offset -> holds on its snapshot
        self.registry.get_or_create_snapshot(EMPTY_LOG_OFFSET)
        self._check()

    def __repr__(self) -> str:
        return (
            f"OffsetControl(committed={self._last_committed_offset}, "
            f"stable={self._last_stable_offset}, next_write={self._next_write_offset}, "
            f"snapshots={self.registry.snapshot_offsets()})"
        )

    # -- queries ----------------------------------------------------------------------------------

    @property
    def last_committed_offset(self) -> int:
        return self._last_committed_offset

    @property
    def last_committed_quorum_epoch(self) -> int:
        return self._last_committed_quorum_epoch

    @property
    def last_stable_offset(self) -> int:
        return self._last_stable_offset

    @property
    def next_write_offset(self) -> int | None:
        """Where the next written record lands (active only; None on a standby)."""
        return self._next_write_offset

    @property
    def active(self) -> bool:
        return self._next_write_offset is not None

    def pending_batch_end_offsets(self) -> list[int]:
        """Last offsets of the written batches not yet stable, oldest first."""
        return [o for o in self.registry.snapshot_offsets() if o > self._last_stable_offset]

    def is_pending_batch_end(self, offset: int) -> bool:
        """Whether `offset` ends a written batch not yet stable (a bisect, not a scan: the
        commit path asks for every committed batch)."""
        return offset > self._last_stable_offset and self.registry.has_snapshot(offset)

    # -- active controller -------------------------------------------------------------------

    def activate(self, next_write_offset: int) -> None:
        """Become the active controller's: writes start at `next_write_offset`."""
        if self.active:
            raise RuntimeError(f"already active: {self!r}")
        if next_write_offset <= self._last_committed_offset:
            raise ValueError(
                f"next write offset {next_write_offset} must be past the last committed "
                f"offset {self._last_committed_offset}"
            )
        # A standby never holds state beyond the stable offset, so the newest snapshot is it.
        assert self.registry.latest_offset() == self._last_stable_offset, self
        self._next_write_offset = next_write_offset

    def handle_schedule_append(self, last_offset: int) -> None:
        """A batch ending at `last_offset` was written and replayed: snapshot the state after
        it, so that reads and reverts can still reach the state before it."""
        if self._next_write_offset is None:
            raise RuntimeError(f"a standby does not write (batch ending at {last_offset})")
        if last_offset < self._next_write_offset:
            raise ValueError(
                f"batch ending at {last_offset} lies before the next write offset "
                f"{self._next_write_offset}"
            )
        self.registry.get_or_create_snapshot(last_offset)
        self._next_write_offset = last_offset + 1

    def deactivate(self) -> None:
        """Stop being active: revert every structure to the last stable offset."""
        if not self.active:
            raise RuntimeError(f"not active: {self!r}")
        self.registry.revert_to_snapshot(self._last_stable_offset)
        self._next_write_offset = None
        self._check()

    # -- commits and snapshots ------------------------------------------------------------------

    def handle_commit_batch(self, last_offset: int, quorum_epoch: int) -> None:
        """Raft committed a batch ending at `last_offset`. A standby calls this after replaying
        the batch; the active controller replayed it when writing it."""
        if last_offset <= self._last_committed_offset:
            raise ValueError(
                f"commit of a batch ending at {last_offset} does not advance the last "
                f"committed offset {self._last_committed_offset}"
            )
        self._last_committed_offset = last_offset
        self._last_committed_quorum_epoch = quorum_epoch
        latest = self.registry.latest_offset()
        assert latest is not None, "the stable snapshot always exists"
        if last_offset >= latest:
            # Nothing of ours is pending beyond this batch (always so on a standby): the live
            # state is the committed state, so it can be snapshotted here.
            self.registry.get_or_create_snapshot(last_offset)
            new_stable = last_offset
        else:
            # The commit stops inside our pending writes. Batches end at snapshots, so only a
            # control batch (no metadata) can end between two of them; the newest snapshot at
            # or below the commit holds the same metadata as the commit point.
            offsets = self.registry.snapshot_offsets()
            new_stable = offsets[bisect_right(offsets, last_offset) - 1]
        if new_stable > self._last_stable_offset:
            self._last_stable_offset = new_stable
            self._delete_unheld_below(new_stable)
        self._check()

    def hold(self, offset: int) -> None:
        """Keep the snapshot at `offset` (the stable one, or one held already) until as many
        `release(offset)` calls, for a reader taking that state in steps (module Rules)."""
        if offset != self._last_stable_offset and not self._held[offset]:
            raise UnknownSnapshotError(offset, self.registry.snapshot_offsets())
        self._held[offset] += 1

    def release(self, offset: int) -> None:
        """Give back one `hold(offset)`; the last one deletes the snapshot if it is below the
        stable offset. A hold a snapshot load dropped is released already."""
        if offset not in self._held:
            return
        self._held[offset] -= 1
        if not self._held[offset]:
            del self._held[offset]
            self._delete_unheld_below(self._last_stable_offset)

    def _delete_unheld_below(self, stable: int) -> None:
        if not self._held:
            self.registry.delete_snapshots_up_to(stable)
            return
        # Newest first: each deleted one folds its deltas into the next older snapshot, which
        # ends in the held one below it (or is dropped, below the oldest hold).
        oldest_held = min(self._held)
        for offset in reversed(self.registry.snapshot_offsets()):
            if oldest_held < offset < stable and offset not in self._held:
                self.registry.delete_snapshot(offset)
        self.registry.delete_snapshots_up_to(oldest_held)

    def handle_snapshot_loaded(self, last_contained_offset: int, quorum_epoch: int) -> None:
        """A Raft snapshot holding every record up to `last_contained_offset` was replayed into
        structures the caller emptied first with `begin_snapshot_load`."""
        if self.active:
            raise RuntimeError("the active controller never loads a snapshot")
        self._last_committed_offset = last_contained_offset
        self._last_committed_quorum_epoch = quorum_epoch
        self._last_stable_offset = last_contained_offset
        self.registry.get_or_create_snapshot(last_contained_offset)
        self._check()

    def begin_snapshot_load(self) -> None:
        """Drop every snapshot and empty every structure, before replaying a Raft snapshot."""
        if self.active:
            raise RuntimeError("the active controller never loads a snapshot")
        self._held.clear()
        self.registry.reset()

    def _check(self) -> None:
        # The invariant of the module docstring, asserted after every change.
        assert self.registry.has_snapshot(self._last_stable_offset), self
        assert self._last_stable_offset <= self._last_committed_offset, self
        assert all(self.registry.has_snapshot(offset) for offset in self._held), self
