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

Rules: `gc.freeze` is process-wide, so only process entry points (`replog node`) call this, once
their imports and set-up are done, never the library on an embedding application's behalf; an
embedding application may call it itself after its own start-up.
"""

from __future__ import annotations

import gc
import logging

log = logging.getLogger("replog.server")


def freeze_startup_objects() -> int:
    """Collect start-up garbage, then exempt every surviving object from future collections;
    returns how many objects are frozen now."""
    gc.collect()
    gc.freeze()
    frozen = gc.get_freeze_count()
    log.info("garbage collector: %d start-up objects frozen", frozen)
    return frozen
