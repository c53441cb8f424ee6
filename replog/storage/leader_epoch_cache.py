"""The leader-epoch cache of one partition: which leader epoch began at which offset.

Rules:
- An entry (E, S) says leader epoch E began at offset S. E covers the offsets from S up to the
  next entry's start offset, or up to the log end offset for the latest entry.
- Invariant: leader epochs and start offsets both strictly increase along the entries. It is
  asserted on loading and before every write.
- `assign(E, S)` rejects a negative E or S with ValueError. It changes nothing when the latest
  entry already has leader epoch E and a start offset <= S, which is the common case: every
  append calls it, and every batch after the first in an epoch starts later. Otherwise (the
  cache is empty, E differs from the latest leader epoch, or E began earlier than recorded) it
  drops trailing entries, newest first, while their leader epoch is >= E or their start offset
  is >= S, then appends (E, S). So (E, S) is the latest entry afterwards.
- `truncate_from_end(X)` drops every entry whose start offset is >= X (the log was cut at X).
- `truncate_from_start(X)` drops entries whose start offset is <= X, oldest first, and puts the
  last leader epoch it dropped back with start offset X: the leader epoch in force at the new
  log start offset survives with a corrected start.
  Example: [(0, 0), (1, 5), (2, 10)] truncated from start 6 is [(1, 6), (2, 10)].
- `clear_and_flush()` drops everything (the log was emptied and restarted elsewhere).
- `end_offset_for(R, log_end_offset)` answers OffsetsForLeaderEpoch: the largest leader epoch
  <= R this replica knows, and the offset where that epoch ends in this replica's log.
  1. R is UNDEFINED_LEADER_EPOCH (-1)               -> (-1, -1)
  2. R is the latest leader epoch                   -> (R, log_end_offset)
  3. R is above every known leader epoch            -> (-1, -1): nothing to say about R
  4. R is below every known leader epoch            -> (R, start offset of the first entry):
     that old data is gone, so resume from the oldest boundary
  5. otherwise                                      -> (largest leader epoch <= R,
                                                        start offset of the next entry)
- Every change is written through the store before the method returns, and memory changes only
  once the write succeeded, so the cache never holds an entry the checkpoint may lack.

Theory of operation:
- Durability. The checkpoint must hold a new leader epoch before any batch of that epoch is
  acknowledged, or a restarted replica would answer OffsetsForLeaderEpoch with a stale boundary
  and a follower could keep divergent data; so `assign` writes synchronously, as in Kafka. Kafka
  writes truncations asynchronously and repairs a stale file when recovery truncates the cache
  to the recovered log (`truncate_from_end(log_end_offset)`, then
  `truncate_from_start(log_start_offset)`). replog writes truncations synchronously too: they are
  rare (follower truncation, retention, DeleteRecords), the file is a few lines, and a reopened
  cache then always equals the one in memory. Recovery still runs both truncations, because the
  log itself can lose its unflushed tail in a crash.
- The store is anything with `read()` and `write(entries)`: a `LeaderEpochCheckpointFile` for a
  partition, another file for the Raft log, or `InMemoryLeaderEpochStore` in tests. A corrupt
  checkpoint raises `CorruptCheckpointError` from the constructor; the log decides what to do.
- Entries sit in a sorted list and lookups bisect it. Changes copy the list, which is cheap: it
  holds one entry per leader election whose data is still in the log, usually a handful.
- `latest_epoch` is None for an empty cache rather than Kafka's -1, so that "no leader epoch" is
  a distinct type; the wire layer maps None to -1 (`UNDEFINED_LEADER_EPOCH`).
- No lock: the partition's log owns its cache and already orders appends and truncations.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from typing import NamedTuple, Protocol

from replog.checkpoints.leader_epoch_checkpoint import EpochEntry, is_strictly_increasing
from replog.checkpoints.text_format import INT32_MAX, INT64_MAX, range_problem

UNDEFINED_LEADER_EPOCH = -1
UNDEFINED_END_OFFSET = -1


class EpochEndOffset(NamedTuple):
    """An answer of `end_offset_for`: a leader epoch and the exclusive offset where it ends."""

    leader_epoch: int
    end_offset: int


_UNDEFINED = EpochEndOffset(UNDEFINED_LEADER_EPOCH, UNDEFINED_END_OFFSET)


class LeaderEpochStore(Protocol):
    """Where a `LeaderEpochCache` keeps its entries; `LeaderEpochCheckpointFile` is one."""

    def read(self) -> Sequence[EpochEntry]: ...

    def write(self, entries: Sequence[EpochEntry]) -> None: ...


class InMemoryLeaderEpochStore:
    """A store that keeps entries in memory, for tests and simulations; counts its writes."""

    __slots__ = ("entries", "writes")

    def __init__(self, entries: Sequence[EpochEntry] = ()) -> None:
        self.entries = tuple(entries)
        self.writes = 0

    def read(self) -> Sequence[EpochEntry]:
        return self.entries

    def write(self, entries: Sequence[EpochEntry]) -> None:
        self.entries = tuple(entries)
        self.writes += 1


def _leader_epoch(entry: EpochEntry) -> int:
    return entry.leader_epoch


def _start_offset(entry: EpochEntry) -> int:
    return entry.start_offset


class LeaderEpochCache:
    """The leader epochs of one partition's log and the offsets where each began (see Rules)."""

    __slots__ = ("_entries", "_store", "name")

    def __init__(
        self,
        store: LeaderEpochStore,
        *,
        name: str = "leader-epoch cache",
        entries: Sequence[EpochEntry] | None = None,
    ) -> None:
        """Load the entries from `store` (or take `entries`, what the store is known to hold:
        none, for a new log's); `name` (e.g. the topic-partition) prefixes errors."""
        self.name = name
        self._store = store
        entries = list(store.read() if entries is None else entries)
        # The checkpoint parser refuses out-of-order files; this guards every other store.
        # (A new log's none or one entry need no look: it is built for every new replica.)
        assert len(entries) < 2 or is_strictly_increasing(entries), (
            f"{name}: loaded entries out of order: {entries}"
        )
        self._entries = entries

    def make_durable(self) -> None:
        """Sync the store's last write if it was made without one (a store that is always
        durable, or in memory, has nothing to do)."""
        make_durable = getattr(self._store, "make_durable", None)
        if make_durable is not None:
            make_durable()

    def drop_unwritten(self) -> None:
        """Forget a write the store has not made yet: the log's directory is going (deleted or
        set aside), and a later write there would fail on a path that no longer exists."""
        drop_unwritten = getattr(self._store, "drop_unwritten", None)
        if drop_unwritten is not None:
            drop_unwritten()

    # --- Queries ---------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        pairs = ", ".join(f"{e.leader_epoch}@{e.start_offset}" for e in self._entries)
        return f"LeaderEpochCache({self.name!r}, [{pairs}])"

    def entries(self) -> tuple[EpochEntry, ...]:
        return tuple(self._entries)

    @property
    def latest_entry(self) -> EpochEntry | None:
        return self._entries[-1] if self._entries else None

    @property
    def earliest_entry(self) -> EpochEntry | None:
        return self._entries[0] if self._entries else None

    @property
    def latest_epoch(self) -> int | None:
        """The newest leader epoch, or None when the cache is empty."""
        return self._entries[-1].leader_epoch if self._entries else None

    @property
    def previous_epoch(self) -> int | None:
        """The leader epoch before the newest one, or None when there are fewer than two."""
        return self._entries[-2].leader_epoch if len(self._entries) >= 2 else None

    def epoch_for_offset(self, offset: int) -> int | None:
        """The leader epoch whose range holds `offset`, or None when `offset` precedes them all.

        Offsets past the log end offset still map to the latest leader epoch: the cache does
        not know the log end offset.
        """
        covering = bisect_right(self._entries, offset, key=_start_offset)
        return self._entries[covering - 1].leader_epoch if covering else None

    def end_offset_for(self, requested_leader_epoch: int, log_end_offset: int) -> EpochEndOffset:
        """The five cases of Rules, for OffsetsForLeaderEpoch and Fetch's diverging epoch."""
        if requested_leader_epoch == UNDEFINED_LEADER_EPOCH:
            return _UNDEFINED
        if requested_leader_epoch == self.latest_epoch:
            return EpochEndOffset(requested_leader_epoch, log_end_offset)
        higher = bisect_right(self._entries, requested_leader_epoch, key=_leader_epoch)
        if higher == len(self._entries):
            return _UNDEFINED
        end_offset = self._entries[higher].start_offset
        if higher == 0:
            return EpochEndOffset(requested_leader_epoch, end_offset)
        return EpochEndOffset(self._entries[higher - 1].leader_epoch, end_offset)

    # --- Changes (each persisted before it returns) ----------------------------------------

    def assign(self, leader_epoch: int, start_offset: int) -> bool:
        """Record that `leader_epoch` began at `start_offset`; True when the cache changed."""
        self._check(
            range_problem(leader_epoch, "leader epoch", INT32_MAX)
            or range_problem(start_offset, "start offset", INT64_MAX),
            f"assign leader epoch {leader_epoch} at start offset {start_offset}",
        )
        latest = self.latest_entry
        if (
            latest is not None
            and latest.leader_epoch == leader_epoch
            and latest.start_offset <= start_offset
        ):
            return False
        kept = list(self._entries)
        while kept and (
            kept[-1].leader_epoch >= leader_epoch or kept[-1].start_offset >= start_offset
        ):
            kept.pop()
        kept.append(EpochEntry(leader_epoch, start_offset))
        self._replace(kept)
        return True

    def truncate_from_end(self, end_offset: int) -> bool:
        """Drop entries starting at or after `end_offset`; True when the cache changed."""
        self._check(range_problem(end_offset, "end offset", INT64_MAX), "truncate from the end")
        kept = bisect_left(self._entries, end_offset, key=_start_offset)
        if kept == len(self._entries):
            return False
        self._replace(self._entries[:kept])
        return True

    def truncate_from_start(self, start_offset: int) -> bool:
        """Make `start_offset` the first covered offset (Rules); True when the cache changed."""
        self._check(range_problem(start_offset, "start offset", INT64_MAX), "truncate from start")
        dropped = bisect_right(self._entries, start_offset, key=_start_offset)
        if dropped == 0:
            return False
        survivor = EpochEntry(self._entries[dropped - 1].leader_epoch, start_offset)
        if dropped == 1 and self._entries[0] == survivor:
            return False
        self._replace([survivor, *self._entries[dropped:]])
        return True

    def clear_and_flush(self) -> None:
        """Drop every entry and write the empty checkpoint, even when already empty."""
        self._replace([])

    def _check(self, problem: str | None, action: str) -> None:
        if problem is not None:
            raise ValueError(f"{self.name}: cannot {action}: {problem}")

    def _replace(self, entries: list[EpochEntry]) -> None:
        assert is_strictly_increasing(entries), f"{self.name}: entries out of order: {entries}"
        self._store.write(entries)
        self._entries = entries
