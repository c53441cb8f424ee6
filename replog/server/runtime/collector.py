"""Keep the cyclic garbage collector's full collections from stalling a node for tens of ms.

Why: CPython's full (generation 2) collection walks every container object the process holds.
A node process holds some 50,000 of them before it serves a single request (the modules,
classes and functions of grpc, protobuf, the controller and the broker), and on the benchmark
machine one full collection of them took about 30 ms of CPU. The collector starts one whenever
enough objects have survived the young generations, which a busy broker reaches every half
minute or so; for those 30 ms the node's event loop answers nothing, so every produce and fetch
in flight waits (docs/benchmarks.md, "Produce path": the stalls set the end-to-end p99).
Objects that exist once the process has started nearly all live as long as the process, so
moving them out of the collector's sight (`gc.freeze`) cuts a full collection to well under a
millisecond and loses little. Collecting first keeps whatever startup left as cyclic garbage
out of the frozen set: frozen objects are still freed by reference counting, but a cycle among
them that later becomes garbage is never collected. That leak is bounded by the start-up set
and happens once; objects made after the freeze are collected as ever.

A broker that then creates or loads thousands of replicas grows the same way: each replica's
log, segments, indexes, leader state and metadata are objects that live until the replica is
deleted, and with 10,000 replicas a full collection walks millions of them (0.3-0.9 s of a
stalled loop each, measured by the stall monitor's "collecting garbage" share while 10,000
partitions were created). So the node freezes again after its replica set grew by
`FREEZE_AFTER_REPLICAS` (`replicas_changed`, called by the replica manager after each round of
changes): a young collection first (the round's temporary cycles), then `gc.freeze()`, which
costs nothing. Deleted replicas' cycles are what a frozen set can leak; once the replicas
deleted since the last thaw reach `THAW_FRACTION` of those live, the node thaws everything and
runs one full collection (one stall, logged, after mass deletions only), then freezes again.
That collection walks the whole heap, so it waits until no replica change is left to apply
(`more_waiting`): a mass deletion then pays one, over what is left, not one every time a
quarter of the shrinking rest has gone (deleting 60,000 replicas thawed a dozen times a
node, 0.3-14 s of a held loop each, and the active controller lost the quorum's leadership).
Waiting leaks nothing: what a frozen object frees by reference counting goes at once.

The metadata grows the same way without a replica being made: a restart replays the whole
metadata log into the controller's state and the broker's images before any replica exists,
and a CreateTopics of 100 topics adds 1,100 partition records to both. So the node also
freezes after every `FREEZE_AFTER_RECORDS` committed metadata records applied
(`committed_item_applied`, the Raft driver's last listener) and after loading a metadata
snapshot, the same young collection first. What neither count sees (a leader's fetch
sessions over thousands of partitions, say) is caught by the last rule: a full collection
that took `FREEZE_AFTER_COLLECTION_S` or more is followed at once by a freeze
(`on_collection`, a `gc.callbacks` entry), so its survivors, which it has just found
reachable, cost no later full collection; one slow collection per growth spurt, not one
every few seconds while the heap stays that size. Nothing thaws after these two: they rely on
what a metadata change drops (a deleted topic's entries, a replaced image) holding no
reference cycle, so that reference counting frees it though it was frozen
(tests/server/runtime/test_collector.py keeps to that).

Rules:
- `gc.freeze` is process-wide, so only process entry points (`replog node`) turn this on
  (`freeze_startup_objects`, `install_growth_freezer`), once their imports and set-up are
  done, never the library on an embedding application's behalf; an embedding application may
  call them itself. Without `install_growth_freezer`, `replicas_changed`, `logs_loaded` and
  `committed_item_applied` do nothing and no callback is registered.
- Nothing here but the start-up freeze asks `gc.get_freeze_count`: it walks every frozen
  object (about 250 ms at the 13.7 million of a node holding 100,000 replicas).
- The counts run on the event loop (metadata records, replica rounds) and, while a node
  starts, on the bulk thread that opens its logs (`logs_loaded`): they change under one lock,
  and what they decide (a freeze, a thaw) runs under it too, so two threads never both
  freeze for one count or lose each other's increments.
- The callback only counts and freezes (list moves in the collector, no allocation worth
  naming); it logs nothing, since it runs inside whatever allocation set off the collection,
  in any thread: the next count on the event loop logs what it did.
"""

from __future__ import annotations

import gc
import logging
import threading
from collections.abc import Callable

from replog.clock import monotonic_s
from replog.quorum.raft.ready import ApplyItem, CommittedBatch, LoadSnapshot

log = logging.getLogger("replog.server")


def freeze_startup_objects() -> int:
    """Collect start-up garbage, then exempt every surviving object from future collections;
    returns how many objects are frozen now."""
    gc.collect()
    gc.freeze()
    frozen = gc.get_freeze_count()
    log.info("garbage collector: %d start-up objects frozen", frozen)
    return frozen


FREEZE_AFTER_REPLICAS = 100
# Committed metadata records per freeze: a partition's registration in the controller and in
# the broker's image, and the loader's delta, are a handful of objects each, so 1,000 records
# leave tens of thousands of objects unfrozen at most, a few ms of a full collection.
FREEZE_AFTER_RECORDS = 1_000
THAW_FRACTION = 0.25
# A full collection this long (its survivors are what the counts above missed) is followed
# by a freeze; the start-up freeze leaves full collections well under it.
FREEZE_AFTER_COLLECTION_S = 0.01


class GrowthFreezer:
    """Freezes after the replica set grew, thaws and collects after it shrank a lot (module
    docstring); counts only, the caller says what changed."""

    def __init__(
        self,
        freeze_after: int = FREEZE_AFTER_REPLICAS,
        thaw_fraction: float = THAW_FRACTION,
        *,
        freeze_after_records: int = FREEZE_AFTER_RECORDS,
        freeze_after_collection_s: float = FREEZE_AFTER_COLLECTION_S,
        clock: Callable[[], float] = monotonic_s,
    ) -> None:
        self._freeze_after = freeze_after
        self._thaw_fraction = thaw_fraction
        self._freeze_after_records = freeze_after_records
        self._freeze_after_collection_s = freeze_after_collection_s
        self._clock = clock
        self._grown = 0  # replicas added since the last freeze
        self._deleted = 0  # replicas deleted since the last thaw
        self._records = 0  # committed metadata records applied since the last freeze
        self._full_started: float | None = None  # when the running full collection started
        self._thawing = False  # in the thaw's own full collection, which freezes after it
        # Slow full collections followed by a freeze, not logged yet: their seconds.
        self._unlogged: list[float] = []
        self._counting = threading.Lock()  # the counts' threads (module Rules)
        self.freezes = 0
        self.thaws = 0
        self.freezes_after_collection = 0

    def records_applied(self, count: int) -> None:
        """`count` committed metadata records were applied (module docstring)."""
        with self._counting:
            self._records += count
            if self._records >= self._freeze_after_records:
                self._freeze_young()
        self._log_collections()

    def snapshot_loaded(self) -> None:
        """A metadata snapshot replaced the whole metadata (module docstring)."""
        with self._counting:
            self._freeze_young()
        self._log_collections()

    def on_collection(self, phase: str, info: dict[str, int]) -> None:
        """A `gc.callbacks` entry: freeze after a slow full collection (module Rules)."""
        if info.get("generation") != 2 or self._thawing:
            return
        if phase == "start":
            self._full_started = self._clock()
            return
        if self._full_started is None:
            return
        took = self._clock() - self._full_started
        self._full_started = None
        if took >= self._freeze_after_collection_s:
            gc.freeze()
            self.freezes_after_collection += 1
            self._unlogged.append(took)

    def _freeze_young(self) -> None:
        """Collect the young generations' garbage, then freeze everything (module docstring)."""
        gc.collect(1)
        gc.freeze()
        self.freezes += 1
        self._grown = self._records = 0

    def _log_collections(self) -> None:
        """Log the slow collections noted since the last call: the list is taken whole, so
        a thread that logs never sees it emptied by another midway (`on_collection` may
        append to the one taken, from any thread: that note is then not logged)."""
        if not self._unlogged:
            return
        with self._counting:
            unlogged, self._unlogged = self._unlogged, []
        if not unlogged:
            return
        log.info(
            "garbage collector: %d full collections of %.0f ms or more (the slowest %.0f ms) "
            "were each followed by a freeze",
            len(unlogged),
            self._freeze_after_collection_s * 1000,
            max(unlogged) * 1000,
        )

    def replicas_changed(
        self, created: int, deleted: int, live: int, *, more_waiting: bool = False
    ) -> None:
        with self._counting:
            self._grown += created
            self._deleted += deleted
            thaw_due = self._deleted >= max(self._freeze_after, live * self._thaw_fraction)
            # A thaw's full collection waits for the end of the changes (module docstring).
            if thaw_due and not more_waiting:
                started = monotonic_s()
                self._thawing = True
                try:
                    gc.unfreeze()
                    collected = gc.collect()
                    gc.freeze()
                finally:
                    self._thawing = False
                self.thaws += 1
                self._deleted = self._grown = self._records = 0
                log.info(
                    "garbage collector: %d objects collected in %.0f ms after replicas were "
                    "deleted",
                    collected,
                    (monotonic_s() - started) * 1000,
                )
            elif self._grown >= self._freeze_after:
                self._freeze_young()
        self._log_collections()


_installed: GrowthFreezer | None = None


def install_growth_freezer() -> GrowthFreezer:
    """Turn on freezing as the replica set grows, for this process (module Rules)."""
    global _installed
    if _installed is not None:
        gc.callbacks.remove(_installed.on_collection)
    _installed = GrowthFreezer()
    gc.callbacks.append(_installed.on_collection)
    return _installed


def replicas_changed(created: int, deleted: int, live: int, *, more_waiting: bool = False) -> None:
    """The replica manager's report after a round: `created` and `deleted` replicas, `live`
    after it, and whether replica changes still wait (`more_waiting`: a thaw waits for their
    end). Does nothing unless the process installed the growth freezer."""
    if _installed is not None:
        _installed.replicas_changed(created, deleted, live, more_waiting=more_waiting)


def logs_loaded(count: int) -> None:
    """The log manager's report while a starting node opens its logs (`on_logs_loaded`):
    `count` more logs, which live as long as their replicas, counted as new replicas are (one
    freeze per `FREEZE_AFTER_REPLICAS`). Without it, opening 10,000 logs spent a fifth of its
    CPU in full collections walking the logs already open."""
    replicas_changed(created=count, deleted=0, live=0)


def committed_item_applied(item: ApplyItem) -> None:
    """The Raft driver's last listener (`replog node`): every listener before it has applied
    `item`. A committed batch counts its records, a loaded snapshot freezes at once (it
    replaced the whole metadata); does nothing unless the process installed the freezer."""
    if _installed is None:
        return
    if isinstance(item, CommittedBatch):
        if not item.is_control:
            _installed.records_applied(item.last_offset - item.base_offset + 1)
    elif isinstance(item, LoadSnapshot):
        _installed.snapshot_loaded()
