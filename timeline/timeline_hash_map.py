"""TimelineHashMap: a dict-like map that can be read at, and reverted to, any live snapshot.

Rules:
- The map's own methods (`m[k]`, `m[k] = v`, `del m[k]`, `k in m`, `len(m)`, iteration,
  `m.get(k)`, and the MutableMapping mixins such as `pop`, `setdefault` and `update`) work on
  the live state. The read methods that take an `offset` read snapshot `offset` instead and
  raise `UnknownSnapshotError` if the registry holds no snapshot there.
- `live` is a read-only view of the live dict. Reading through it costs a plain dict read, so
  hot loops should use it; the map's own dunder methods each pay one Python call on top.
- None keys and None values are rejected (`NoneNotAllowedError`).
- Stored values are treated as immutable. History keeps references, not copies: mutating a
  stored value in place rewrites the past too, which is a caller bug. Store a new object.
- Views returned for an offset are built from a private copy and do not change afterwards.

Theory of operation: see `replog.timeline.snapshottable_table`, which holds the live dict and the
per-snapshot deltas. This module adds the Mapping surface and the two hot write paths, which
are written out in full (not shared helpers) because a Python call costs as much as the rest
of the write.
"""

from __future__ import annotations

from collections.abc import ItemsView, KeysView, MutableMapping, ValuesView
from types import MappingProxyType
from typing import TypeVar, overload

from replog.timeline.snapshot_registry import SnapshotRegistry
from replog.timeline.snapshottable_table import _PENDING, K, SnapshottableTable, V

T = TypeVar("T")


class TimelineHashMap(SnapshottableTable[K, V], MutableMapping[K, V]):
    """A map whose state at every live snapshot stays readable and restorable."""

    __slots__ = ("live",)

    def __init__(self, registry: SnapshotRegistry) -> None:
        super().__init__(registry)
        # The proxy tracks `_live`, which is never rebound, so it stays valid for life.
        self.live: MappingProxyType[K, V] = MappingProxyType(self._live)

    # -- live state: hot paths ------------------------------------------------------------------

    def __getitem__(self, key: K) -> V:
        return self._live[key]

    def __setitem__(self, key: K, value: V) -> None:
        if key is None or value is None:
            self._reject_none(f"a key or value (key {key!r}, value {value!r})")
        tier = self._tier
        if tier is not None and key not in tier:
            if tier is _PENDING:
                tier = self._open_tier()
            tier[key] = self._live.get(key)
        self._live[key] = value

    def __delitem__(self, key: K) -> None:
        live = self._live
        tier = self._tier
        if tier is not None and key not in tier:
            previous = live[key]  # a missing key raises KeyError before anything is recorded
            if tier is _PENDING:
                tier = self._open_tier()
            tier[key] = previous
        del live[key]

    # -- live state: Kafka-style writes ---------------------------------------------------------

    def put(self, key: K, value: V) -> V | None:
        """Set `key` to `value`; return the previous value, or None if the key was absent."""
        previous = self._live.get(key)
        self[key] = value
        return previous

    def remove(self, key: K) -> V | None:
        """Remove `key`; return its value, or None if it was absent (which is not an error)."""
        previous = self._live.get(key)
        if previous is not None:
            del self[key]
        return previous

    # -- reads, live or at a snapshot -----------------------------------------------------------

    @overload
    def get(self, key: K, /, *, offset: int | None = None) -> V | None: ...

    @overload
    def get(self, key: K, /, default: V | T, *, offset: int | None = None) -> V | T: ...

    def get(
        self, key: K, /, default: V | T | None = None, *, offset: int | None = None
    ) -> V | T | None:
        """The value of `key` in snapshot `offset` (None: now), or `default` if absent."""
        if offset is None:
            return self._live.get(key, default)
        value = self._value_at(key, offset)
        return default if value is None else value

    def keys(self, offset: int | None = None) -> KeysView[K]:
        """The keys in snapshot `offset`; without one, the live keys view."""
        if offset is None:
            return self._live.keys()
        return self._state_at(offset).keys()

    def values(self, offset: int | None = None) -> ValuesView[V]:
        """The values in snapshot `offset`; without one, the live values view."""
        if offset is None:
            return self._live.values()
        return self._state_at(offset).values()

    def items(self, offset: int | None = None) -> ItemsView[K, V]:
        """The (key, value) pairs in snapshot `offset`; without one, the live items view."""
        if offset is None:
            return self._live.items()
        return self._state_at(offset).items()

    def to_dict(self, offset: int | None = None) -> dict[K, V]:
        """A new plain dict of the entries in snapshot `offset` (None: now)."""
        return self._state_at(offset)
