"""Timeline: MVCC structures whose state can be read as of, and reverted to, a log offset.

The controller keeps all of its state in these structures, tied to one `SnapshotRegistry`.
It replays each write at once, creates a snapshot at the write's offset, answers only when the
Raft quorum has committed that offset, and reverts to the last committed snapshot if it loses
leadership, so that nothing it never committed survives in its state.

Rules:
- Pure: no I/O, no clock, no threads, no randomness; imports nothing from the rest of replog.
- Single-threaded: one owner drives a registry and its structures.
- Snapshots are named by metadata-log offsets (`snapshot_offset`) and never go backwards.
- Stored keys and values are treated as immutable and never None.

Theory of operation: each structure keeps its live state as plain Python values and, for each
snapshot, the old values of what it changed while that snapshot was the newest (recorded on
first touch). Reads at an offset walk those records forward from the offset; a revert writes
them back, newest first. See `snapshot_registry` for the details and `docs/timeline.md` for the
costs.
"""

from replog.timeline.errors import (
    NoneNotAllowedError,
    SnapshotOrderError,
    TimelineError,
    UnknownSnapshotError,
)
from replog.timeline.snapshot_registry import SnapshotRegistry
from replog.timeline.timeline_hash_map import TimelineHashMap
from replog.timeline.timeline_hash_set import TimelineHashSet
from replog.timeline.timeline_scalar import TimelineInteger, TimelineLong, TimelineObject

__all__ = [
    "NoneNotAllowedError",
    "SnapshotOrderError",
    "SnapshotRegistry",
    "TimelineError",
    "TimelineHashMap",
    "TimelineHashSet",
    "TimelineInteger",
    "TimelineLong",
    "TimelineObject",
    "UnknownSnapshotError",
]
