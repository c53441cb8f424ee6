"""`transactions_finished`: the transactions' end-of-run liveness, once faults stopped and every
partition is led again (`replog.sim.run` calls it): within `TXN_FINISHED_BOUND_S`, every
acknowledged commit is visible in every partition it wrote, a commit whose answer was lost in
all of them or none, and the read_committed consumers have read to each partition's high
watermark with the LSO there: the coordinators (a new one where the old failed) finished
every transaction, aborting the ones their producers left open after their timeout
(`TxnChecker.unfinished`).

Rules:
- A coordinator times a transaction out by its own wall clock against the start its
  `__transaction_state` record holds, stamped by the wall clock of the coordinator that added
  its first partition, as Kafka's (`TransactionStateManager.timedOutTransactions`); a new
  coordinator keeps its predecessor's stamp. A stamping clock ahead of the clock that times
  the transaction out delays the abort by that lead, so the bound grows by the most one can
  be (`clock_skew_ms`), up to `CLOCK_SKEW_MAX_S`; past it the LSOs are not held to their high
  watermarks.
"""

from __future__ import annotations

import asyncio

from replog.sim.cluster import SimCluster
from replog.sim.invariants import InvariantViolation
from replog.sim.txn_invariants import TxnChecker

__all__ = ["TXN_FINISHED_BOUND_S", "clock_skew_ms", "transactions_finished"]

POLL_S = 0.1
# A producer's transaction timeout (3 s), the coordinator's abort pass (0.5 s), a state
# partition's load at a new coordinator and the markers' retries after it.
TXN_FINISHED_BOUND_S = 15.0
CLOCK_SKEW_MAX_S = 60.0


def clock_skew_ms(cluster: SimCluster) -> int:
    """The most a coordinator's stamp of a transaction's start may lead the wall clock that
    times it out (module Rules): the furthest ahead any node's clock has been in the run (it
    may have stamped then; every clock starts at the same time, so this is 0 or more) against
    the furthest behind one is now (it may coordinate now)."""
    nodes = cluster.nodes.values()
    return max(n.wall_offset_peak_ms for n in nodes) - min(n.wall_offset_ms for n in nodes)


async def transactions_finished(cluster: SimCluster, checker: TxnChecker, bound_s: float) -> None:
    """Module docstring; raises once `bound_s` virtual seconds, grown by `clock_skew_ms` up to
    `CLOCK_SKEW_MAX_S`, pass first."""
    skew_s = clock_skew_ms(cluster) / 1000
    checker.lso_held = skew_s <= CLOCK_SKEW_MAX_S
    deadline = cluster.loop.time() + bound_s + (skew_s if checker.lso_held else 0)
    while problems := checker.unfinished():
        if cluster.loop.time() > deadline:
            raise InvariantViolation(
                f"transactions not finished within {bound_s:.0f} s of the partitions being "
                f"led (a stamping wall clock ahead of a timing one by {skew_s:.0f} s at "
                f"most): {problems[:4]}"
            )
        await asyncio.sleep(POLL_S)
