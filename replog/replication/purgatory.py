"""Bookkeeping of delayed operations (acks=all produces, long-poll fetches, DeleteRecords).

Rules (docs/design/replication.md#acks-and-min-isr, #delayed-fetch-completion; Kafka's
`DelayedOperationPurgatory` without its timer thread):

- An operation is watched on any number of keys (topic-partitions) with one deadline; one
  watched on none is woken by its owner (a dirty-only fetch session round). It stays
  pending until `complete(op)` or until `expire(now_ms)` finds its deadline <= now_ms; either
  removes it from every key at once, so it can never be answered twice.
- At most `max_pending` operations are pending; one more is refused with PurgatoryFullError
  and the shell answers that request without parking it: a fetch with what it already read, a
  produce or DeleteRecords with UNKNOWN_SERVER_ERROR.
- `watchers(key)` lists the pending ops on a key in the order they were watched; the shell
  re-checks them (`checkAndComplete`) when that partition's HW, LEO or leadership changes.
- `expire(now_ms)` returns ops in deadline order (ties: watch order).

Theory of operation: no futures, no clock. The shell owns the op objects (hashable) and their
completion; this class only answers "who waits on this key" and "who has timed out" cheaply.
Each op keeps the tuple of its keys, and each key an insertion-ordered dict of its ops, so
`watchers` costs the number of watchers of that key and `complete` the number of keys of that
op. Deadlines sit in a binary heap with lazy deletion: a completed op's heap entry stays until it
reaches the top (or the heap is compacted when stale entries outnumber live ones), and a heap
entry is live only while its watch sequence number is still the op's current one, so an op that
completes and is watched again is not expired by its old entry.
"""

from __future__ import annotations

import heapq
from collections.abc import Hashable, Iterable
from typing import Generic, TypeVar

from replog.errors import PurgatoryFullError

K = TypeVar("K", bound=Hashable)
Op = TypeVar("Op", bound=Hashable)

# Compact the heap once it holds this many entries and more than twice the pending ops, so
# stale entries of completed ops cost O(pending) memory, not O(ops ever watched).
_COMPACT_MIN_ENTRIES = 64


class Purgatory(Generic[K, Op]):
    """Pending delayed operations by key, with deadlines. No I/O, no time source."""

    def __init__(self, name: str, max_pending: int) -> None:
        if max_pending < 1:
            raise ValueError(f"purgatory {name}: max_pending must be >= 1, got {max_pending}")
        self.name = name
        self.max_pending = max_pending
        self._keys_of: dict[Op, tuple[K, ...]] = {}
        self._deadline_ms_of: dict[Op, int] = {}
        self._watch_sequence_of: dict[Op, int] = {}
        self._watchers: dict[K, dict[Op, None]] = {}
        self._heap: list[tuple[int, int, Op]] = []  # (deadline_ms, watch sequence, op)
        self._next_watch_sequence = 0

    def __len__(self) -> int:
        return len(self._keys_of)

    def __contains__(self, op: object) -> bool:
        return op in self._keys_of

    def watch(self, op: Op, keys: Iterable[K], deadline_ms: int) -> None:
        """Park `op` on every key until completed or `deadline_ms`."""
        if op in self._keys_of:
            raise ValueError(f"purgatory {self.name}: operation {op!r} is already pending")
        unique_keys = tuple(dict.fromkeys(keys))
        if len(self._keys_of) >= self.max_pending:
            raise PurgatoryFullError(
                f"purgatory {self.name} is full: {len(self._keys_of)} pending operations, "
                f"the bound is {self.max_pending}"
            )
        sequence = self._next_watch_sequence
        self._next_watch_sequence += 1
        self._keys_of[op] = unique_keys
        self._deadline_ms_of[op] = deadline_ms
        self._watch_sequence_of[op] = sequence
        for key in unique_keys:
            self._watchers.setdefault(key, {})[op] = None
        heapq.heappush(self._heap, (deadline_ms, sequence, op))
        self._maybe_compact()

    def watchers(self, key: K) -> list[Op]:
        """The pending ops watching `key`, in watch order (a copy: completing them is safe)."""
        ops = self._watchers.get(key)
        return list(ops) if ops else []

    def keys(self, op: Op) -> tuple[K, ...]:
        """The keys a pending op watches (empty if not pending)."""
        return self._keys_of.get(op, ())

    def deadline_ms(self, op: Op) -> int | None:
        return self._deadline_ms_of.get(op)

    def complete(self, op: Op) -> bool:
        """Remove `op` everywhere; False if it was not pending (already completed or expired)."""
        keys = self._keys_of.pop(op, None)
        if keys is None:
            return False
        del self._deadline_ms_of[op]
        del self._watch_sequence_of[op]
        for key in keys:
            ops = self._watchers[key]
            del ops[op]
            if not ops:
                del self._watchers[key]
        # The heap entry is left behind; it is stale from now on (see _is_live).
        return True

    def expire(self, now_ms: int) -> list[Op]:
        """Remove and return the ops whose deadline is <= now_ms, earliest deadline first."""
        expired: list[Op] = []
        heap = self._heap
        while heap and heap[0][0] <= now_ms:
            _, sequence, op = heapq.heappop(heap)
            if self._is_live(sequence, op):
                self.complete(op)
                expired.append(op)
        return expired

    def next_deadline_ms(self) -> int | None:
        """The earliest deadline of a pending op, or None when nothing is pending."""
        heap = self._heap
        while heap and not self._is_live(heap[0][1], heap[0][2]):
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    def _is_live(self, sequence: int, op: Op) -> bool:
        return self._watch_sequence_of.get(op) == sequence

    def _maybe_compact(self) -> None:
        if len(self._heap) >= _COMPACT_MIN_ENTRIES and len(self._heap) > 2 * len(self._keys_of):
            self._heap = [entry for entry in self._heap if self._is_live(entry[1], entry[2])]
            heapq.heapify(self._heap)
        assert len(self._heap) >= len(self._keys_of), "every pending op has a heap entry"
