"""`transactions_finished`: the transactions' end-of-run liveness, once faults stopped and every
partition is led again (`replog.sim.run` calls it): within `TXN_FINISHED_BOUND_S`, every
acknowledged commit is visible in every partition it wrote, a commit whose answer was lost in
all of them or none, and the read_committed consumers have read to each partition's high
watermark with the LSO there: the coordinators (a new one where the old failed) finished
every transaction, aborting the ones their producers left open after their timeout
(`TxnChecker.unfinished`)."""

from __future__ import annotations

import asyncio

from replog.sim.cluster import SimCluster
from replog.sim.invariants import InvariantViolation
from replog.sim.txn_invariants import TxnChecker

__all__ = ["TXN_FINISHED_BOUND_S", "transactions_finished"]

POLL_S = 0.1
# A producer's transaction timeout (3 s), the coordinator's abort pass (0.5 s), a state
# partition's load at a new coordinator and the markers' retries after it.
TXN_FINISHED_BOUND_S = 15.0
CLOCK_LAG_MAX_S = 60.0


async def transactions_finished(cluster: SimCluster, checker: TxnChecker, bound_s: float) -> None:
    """Module docstring; raises once `bound_s` virtual seconds pass first. A coordinator times
    transactions out by its wall clock, as Kafka's: a node's clock set back delays its aborts
    as much, so the bound grows by the most a clock is behind, up to `CLOCK_LAG_MAX_S`; past
    it the LSOs are not held to their high watermarks."""
    lag_s = max(0, *(-node.wall_offset_ms for node in cluster.nodes.values())) / 1000
    lso = lag_s <= CLOCK_LAG_MAX_S
    deadline = cluster.loop.time() + bound_s + (lag_s if lso else 0)
    while problems := checker.unfinished(lso):
        if cluster.loop.time() > deadline:
            raise InvariantViolation(
                f"transactions not finished within {bound_s:.0f} s of the partitions being "
                f"led (wall clocks behind by {lag_s:.0f} s at most): {problems[:4]}"
            )
        await asyncio.sleep(POLL_S)
