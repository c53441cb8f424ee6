"""SnapshottableTable: the hash table behind TimelineHashMap and TimelineHashSet.

Rules:
- The live state is one plain dict, `_live`, key -> value (a set stores True). Live reads are
  dict reads and nothing else: no per-entry offsets or wrappers are stored, so reading the
  current state never pays for history.
- None is never stored: it is how a delta says "this key was absent".
- A write records into the newest snapshot only the first time it touches a key after that
  snapshot was created; with no snapshots, writes record nothing at all.
- Iteration order is unspecified: a revert re-inserts keys, so insertion order does not survive
  it.

Theory of operation:
- The delta of this table in snapshot S (a `HashDelta`) holds `size`, the table's size when S
  was created, and `changes`, key -> the value the key had when S was created (None: absent),
  for each key first touched while S was the newest snapshot. It is opened lazily, by the first
  write after S became the newest, which is when the size is still S's.
- `_tier` caches the newest snapshot's `changes` for the write path, so a write costs one
  attribute read, one membership test and, on first touch, one dict lookup and one store. It
  is None when no snapshot exists (record nothing), `_PENDING` when the newest snapshot has no
  delta of this table yet (open one on the next write), or the newest delta's `changes`.
- The value at offset o: walk this table's deltas from snapshot o forward; the first one that
  recorded the key holds its value at o. If none did, the key has not changed since o and its
  live value is the answer. The size at o is the `size` of the first delta found, else the live
  size.
- Undoing a delta writes its recorded values back, O(entries in the delta).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator
from typing import Any, Generic, NoReturn, TypeVar

from replog.timeline.errors import NoneNotAllowedError
from replog.timeline.revertable import Delta, refuse_copy
from replog.timeline.snapshot_registry import SnapshotRegistry

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

# The recording state "the newest snapshot has no delta of this table yet". A shared dict, so
# the write path can test `key not in tier` before telling it apart; nothing is ever stored in
# it (asserted whenever recording state changes).
_PENDING: dict[Any, Any] = {}

# Marks "this delta did not record the key", as opposed to a recorded None ("absent").
_NOT_RECORDED: Any = object()


class HashDelta(Generic[K, V]):
    """What a table recorded in one snapshot: its size then, and the old values of the keys it
    changed while that snapshot was the newest (None: the key was absent)."""

    __slots__ = ("changes", "size")

    def __init__(self, size: int, changes: dict[K, V | None]) -> None:
        self.size = size
        self.changes = changes

    def absorb(self, newer: Delta) -> None:
        assert isinstance(newer, HashDelta), "a table's deltas are all HashDeltas"
        changes = self.changes
        for key, old in newer.changes.items():
            # A key already here was changed earlier, so its entry holds the older value.
            if key not in changes:
                changes[key] = old

    def entry_count(self) -> int:
        return len(self.changes)


class SnapshottableTable(Generic[K, V]):
    """Live dict plus lazily recorded per-snapshot deltas; see the module docstring."""

    __slots__ = ("__weakref__", "_live", "_registry", "_serial", "_tier")

    def __init__(self, registry: SnapshotRegistry) -> None:
        self._registry = registry
        self._live: dict[K, V] = {}
        self._tier: dict[K, V | None] | None = None
        self._serial = registry._register(self)

    # -- live state ----------------------------------------------------------------------------

    def __contains__(self, key: object) -> bool:
        return key in self._live

    def __len__(self) -> int:
        return len(self._live)

    def __iter__(self) -> Iterator[K]:
        return iter(self._live)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._live!r})"

    __reduce_ex__ = refuse_copy

    def clear(self) -> None:
        """Remove every entry (recording each one that is first touched here)."""
        live = self._live
        tier = self._tier
        if tier is not None and live:
            if tier is _PENDING:
                tier = self._open_tier()
            for key, value in live.items():
                if key not in tier:
                    tier[key] = value
        live.clear()

    # -- history ------------------------------------------------------------------------------

    def contains(self, key: K, offset: int | None = None) -> bool:
        """Whether `key` was present in snapshot `offset` (None: now)."""
        if offset is None:
            return key in self._live
        return self._value_at(key, offset) is not None

    def size(self, offset: int | None = None) -> int:
        """The number of entries in snapshot `offset` (None: now)."""
        if offset is None:
            return len(self._live)
        deltas: list[HashDelta[K, V]] = self._registry._deltas_since(offset, self._serial)
        return deltas[0].size if deltas else len(self._live)

    def _value_at(self, key: K, offset: int) -> V | None:
        for delta in self._registry._deltas_since(offset, self._serial):
            old = delta.changes.get(key, _NOT_RECORDED)
            if old is not _NOT_RECORDED:
                recorded: V | None = old
                return recorded
        return self._live.get(key)

    def _state_at(self, offset: int | None) -> dict[K, V]:
        """A fresh dict of the entries in snapshot `offset` (None: now)."""
        if offset is None:
            return dict(self._live)
        deltas: list[HashDelta[K, V]] = self._registry._deltas_since(offset, self._serial)
        if not deltas:
            return dict(self._live)
        # Oldest entry wins, so apply the newer deltas first and let older ones overwrite.
        recorded: dict[K, V | None] = {}
        for delta in reversed(deltas):
            recorded.update(delta.changes)
        state = {key: value for key, value in self._live.items() if key not in recorded}
        for key, old in recorded.items():
            if old is not None:
                state[key] = old
        assert len(state) == deltas[0].size, "reconstructed size must match the recorded size"
        return state

    # -- recording (package-internal) -----------------------------------------------------------

    def _open_tier(self) -> dict[K, V | None]:
        """Open this table's delta in the newest snapshot; called on the first write after the
        newest snapshot was created, while the live size is still the snapshot's."""
        tier: dict[K, V | None] = {}
        self._registry._record(self._serial, HashDelta(len(self._live), tier))
        self._tier = tier
        return tier

    def _reject_none(self, what: str) -> NoReturn:
        raise NoneNotAllowedError(type(self).__name__, what)

    # -- Revertable ---------------------------------------------------------------------------

    def _undo(self, delta: HashDelta[K, V]) -> None:
        live = self._live
        for key, old in delta.changes.items():
            if old is None:
                live.pop(key, None)
            else:
                live[key] = old

    def _follow_newest(self, delta: HashDelta[K, V] | None, snapshots_exist: bool) -> None:
        assert not _PENDING, "nothing may ever be recorded into the shared pending marker"
        if delta is not None:
            self._tier = delta.changes
        elif snapshots_exist:
            self._tier = _PENDING
        else:
            self._tier = None

    def _reset(self) -> None:
        self._live.clear()
