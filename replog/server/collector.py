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

Rules: `gc.freeze` is process-wide, so only process entry points (`replog node`) turn this on
(`freeze_startup_objects`, `install_growth_freezer`), once their imports and set-up are done,
never the library on an embedding application's behalf; an embedding application may call
them itself. Without `install_growth_freezer`, `replicas_changed` does nothing.
"""

from __future__ import annotations

import gc
import logging

from replog.clock import monotonic_s

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
THAW_FRACTION = 0.25


class GrowthFreezer:
    """Freezes after the replica set grew, thaws and collects after it shrank a lot (module
    docstring); counts only, the caller says what changed."""

    def __init__(
        self,
        freeze_after: int = FREEZE_AFTER_REPLICAS,
        thaw_fraction: float = THAW_FRACTION,
    ) -> None:
        self._freeze_after = freeze_after
        self._thaw_fraction = thaw_fraction
        self._grown = 0  # replicas added since the last freeze
        self._deleted = 0  # replicas deleted since the last thaw
        self.freezes = 0
        self.thaws = 0

    def replicas_changed(self, created: int, deleted: int, live: int) -> None:
        self._grown += created
        self._deleted += deleted
        if self._deleted >= max(self._freeze_after, live * self._thaw_fraction):
            started = monotonic_s()
            gc.unfreeze()
            collected = gc.collect()
            gc.freeze()
            self.thaws += 1
            self._deleted = self._grown = 0
            log.info(
                "garbage collector: %d objects collected in %.0f ms after replicas were "
                "deleted; %d frozen",
                collected,
                (monotonic_s() - started) * 1000,
                gc.get_freeze_count(),
            )
        elif self._grown >= self._freeze_after:
            gc.collect(1)
            gc.freeze()
            self.freezes += 1
            self._grown = 0


_installed: GrowthFreezer | None = None


def install_growth_freezer() -> GrowthFreezer:
    """Turn on freezing as the replica set grows, for this process (module Rules)."""
    global _installed
    _installed = GrowthFreezer()
    return _installed


def replicas_changed(created: int, deleted: int, live: int) -> None:
    """The replica manager's report after a round: `created` and `deleted` replicas, `live`
    after it. Does nothing unless the process installed the growth freezer."""
    if _installed is not None:
        _installed.replicas_changed(created, deleted, live)


def logs_loaded(count: int) -> None:
    """The log manager's report while a starting node opens its logs (`on_logs_loaded`):
    `count` more logs, which live as long as their replicas, counted as new replicas are (one
    freeze per `FREEZE_AFTER_REPLICAS`). Without it, opening 10,000 logs spent a fifth of its
    CPU in full collections walking the logs already open."""
    replicas_changed(created=count, deleted=0, live=0)
