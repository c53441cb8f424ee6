"""DeferredQueue: the controller's purgatory, where answers wait for their offset to commit.

A write's response may only leave once Raft has committed the last offset of the write (or,
for a write that produced no records, the highest offset still pending when it ran, so that it
never reveals state that could still be rolled back). Until then it waits here, keyed by that
offset.

Rules:
- `add(offset, deferred)` requires offsets in non-decreasing order: the controller writes
  batches in offset order, so a lower offset is a bug, reported at once (`ValueError`).
- `complete_up_to(offset)` completes every waiter whose offset is `<= offset`, in offset
  order and, for one offset, in the order added.
- `fail_all(error)` fails every waiter, in the same order, and empties the queue.
- A waiter is completed or failed exactly once; the queue forgets it before calling it, so a
  waiter that adds more work from its callback sees a consistent queue.

Theory of operation: because offsets arrive sorted, a deque of (offset, waiters) pairs is a
sorted map whose completions pop from the left: O(1) per waiter, no tree needed.
"""

from __future__ import annotations

from collections import deque
from typing import Protocol


class Deferred(Protocol):
    """Something waiting for an offset to commit."""

    def complete(self, error: Exception | None) -> None:
        """The offset committed (`error` None), or the wait failed with `error`."""


class DeferredQueue:
    """Waiters keyed by the metadata-log offset they wait for, oldest first."""

    __slots__ = ("_entries", "_size")

    def __init__(self) -> None:
        self._entries: deque[tuple[int, list[Deferred]]] = deque()
        self._size = 0

    def __len__(self) -> int:
        return self._size

    def __repr__(self) -> str:
        return f"DeferredQueue(offsets={[offset for offset, _ in self._entries]})"

    def highest_pending_offset(self) -> int | None:
        """The offset of the newest waiter, or None when nothing waits."""
        return self._entries[-1][0] if self._entries else None

    def add(self, offset: int, deferred: Deferred) -> None:
        """Park `deferred` until `offset` commits."""
        if self._entries:
            highest, waiters = self._entries[-1]
            if offset < highest:
                raise ValueError(
                    f"cannot wait for offset {offset}: a waiter already waits for the later "
                    f"offset {highest}, and offsets must not decrease"
                )
            if offset == highest:
                waiters.append(deferred)
                self._size += 1
                return
        self._entries.append((offset, [deferred]))
        self._size += 1

    def complete_up_to(self, offset: int) -> int:
        """Complete every waiter whose offset is `<= offset`; return how many."""
        completed = 0
        entries = self._entries
        while entries and entries[0][0] <= offset:
            _, waiters = entries.popleft()
            self._size -= len(waiters)
            for deferred in waiters:
                deferred.complete(None)
            completed += len(waiters)
        return completed

    def fail_all(self, error: Exception) -> int:
        """Fail every waiter with `error` and empty the queue; return how many."""
        entries = list(self._entries)
        self._entries.clear()
        self._size = 0
        failed = 0
        for _, waiters in entries:
            for deferred in waiters:
                deferred.complete(error)
            failed += len(waiters)
        return failed
