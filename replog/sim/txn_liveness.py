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
  the transaction out delays the abort by that lead, so the bound grows by the largest lead of
  a transaction open at any look, read at every look from the coordinators' loaded state
  (`txn_timeouts`); a lead once seen stays, as the markers and the consumers' reads follow
  the abort. A lead past `CLOCK_SKEW_MAX_S` is not waited for: the partitions that
  transaction wrote are not held to their high watermarks (`TxnChecker.lso_unheld`), from the
  look that saw it on.
- While a `__transaction_state` partition is loaded by no up broker, the most any stamping
  clock may lead a timing one (`clock_skew_ms`) stands for its leads; past the cap no LSO is
  held to its high watermark until it is loaded again (`TxnChecker.lso_held`).
"""

from __future__ import annotations

import asyncio

from replog.sim.cluster import SimCluster
from replog.sim.invariants import InvariantViolation
from replog.sim.txn_invariants import TxnChecker
from replog.sim.txn_timeouts import clock_skew_ms, timeout_leads

__all__ = ["TXN_FINISHED_BOUND_S", "transactions_finished"]

POLL_S = 0.1
# A producer's transaction timeout (3 s), the coordinator's abort pass (0.5 s), a state
# partition's load at a new coordinator and the markers' retries after it.
TXN_FINISHED_BOUND_S = 15.0
CLOCK_SKEW_MAX_S = 60.0


async def transactions_finished(cluster: SimCluster, checker: TxnChecker, bound_s: float) -> None:
    """Module docstring; raises once `bound_s` virtual seconds, grown by the open transactions'
    leads, pass first."""
    loop = cluster.loop
    began_s, began_ms, cap_ms = loop.time(), loop.now_ms(), int(CLOCK_SKEW_MAX_S * 1000)
    lead_ms = 0
    past_cap: set[str] = set()
    while True:
        leads = timeout_leads(cluster, checker.state_partitions, began_ms, cap_ms)
        lead_ms = max(lead_ms, leads.lead_ms)
        checker.lso_held = True
        if leads.unknown:
            skew_ms = clock_skew_ms(cluster)
            checker.lso_held = skew_ms <= cap_ms
            lead_ms = max(lead_ms, skew_ms) if checker.lso_held else lead_ms
        checker.lso_unheld |= leads.unheld
        past_cap.update(leads.past_cap)
        checker.counts["transactions whose abort lay past the end's cap"] = len(past_cap)
        problems = checker.unfinished()
        if not problems:
            return
        if loop.time() > began_s + bound_s + lead_ms / 1000:
            unknown = "".join(f", __transaction_state-{i} not loaded" for i in leads.unknown)
            raise InvariantViolation(
                f"transactions not finished within {bound_s:.0f} s of the partitions being "
                f"led (grown by {lead_ms / 1000:.1f} s, the latest abort of an open "
                f"transaction past its timeout by its coordinator's clock{unknown}): "
                f"{problems[:4]}"
            )
        await asyncio.sleep(POLL_S)
