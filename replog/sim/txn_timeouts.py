"""`timeout_leads`: when, at the end of a run, the coordinators will time out the transactions
still open, read from their loaded state: how far past the bound's own timeout each abort lies
(`TimeoutLeads`), so the end's bound (`txn_liveness`) grows by exactly that.

Rules:
- A coordinator aborts an Ongoing transaction once its wall clock passes the start its loaded
  state holds plus the transaction's timeout (Kafka's `timedOutTransactions`); that start was
  stamped by the wall clock of whichever coordinator added the first partition, and a new
  coordinator keeps it. Clocks no longer jump at the end, so on the loop's scale the abort is
  due at (now + start + timeout - the coordinator's wall clock now); its lead is how much later
  that is than for a start its own clock stamped when the end began: start - (its wall clock
  now - the time since the end began). A lead of 0 or less is within the bound.
- Leads are read from every up broker's loaded `__transaction_state` partitions (a deposed
  coordinator that has not yet dropped its partition counts too: the larger lead is kept), and
  read again at every look, as a new coordinator (its own clock) may take a partition over.
- A lead past `cap_ms` is not waited for: the partitions of that transaction are `unheld`
  (their LSOs may stay below their high watermarks at the end, as in Kafka until it aborts).
- A `__transaction_state` partition no up broker has loaded (`unknown`) has leads the run
  cannot read: the most any stamping clock may lead a timing one (`clock_skew_ms`) stands for
  them.
"""

from __future__ import annotations

from dataclasses import dataclass

from replog.coordinator.transaction_metadata import TxnState
from replog.sim.cluster import SimCluster

__all__ = ["TimeoutLeads", "clock_skew_ms", "timeout_leads"]

Partition = tuple[str, int]


@dataclass(frozen=True)
class TimeoutLeads:
    """The leads of the open transactions at one look (module Rules)."""

    lead_ms: int  # the largest lead within the cap, 0 when none is positive
    unheld: frozenset[Partition]  # the partitions of transactions whose lead passes the cap
    unknown: tuple[int, ...]  # the state partitions no up broker has loaded
    past_cap: tuple[str, ...]  # the transactional ids whose lead passes the cap


def clock_skew_ms(cluster: SimCluster) -> int:
    """The most a coordinator's stamp of a transaction's start may lead the wall clock that
    times it out: the furthest ahead any node's clock has been in the run (it may have stamped
    then; every clock starts at the same time, so this is 0 or more) against the furthest
    behind one is now (it may coordinate now)."""
    nodes = cluster.nodes.values()
    return max(n.wall_offset_peak_ms for n in nodes) - min(n.wall_offset_ms for n in nodes)


def timeout_leads(
    cluster: SimCluster, state_partitions: int, since_ms: int, cap_ms: int
) -> TimeoutLeads:
    """The leads (module Rules) now, the end having begun at `since_ms` (the loop's ms)."""
    elapsed_ms = cluster.loop.now_ms() - since_ms
    leads: dict[tuple[str, frozenset[Partition]], int] = {}
    loaded: set[int] = set()
    for node in cluster.up_nodes():
        coordinator = None if node.broker is None else node.broker.transaction_coordinator
        if coordinator is None:
            continue
        began_ms = cluster.wall_clock(node.node_id)() - elapsed_ms
        for partition, metas in coordinator.loaded().items():
            loaded.add(partition)
            for meta in metas:
                if meta.state is TxnState.ONGOING:
                    key = (meta.transactional_id, meta.partitions)
                    leads[key] = max(leads.get(key, -(1 << 62)), meta.start_ms - began_ms)
    within = [lead for lead in leads.values() if lead <= cap_ms]
    past = sorted((key for key, lead in leads.items() if lead > cap_ms), key=lambda k: k[0])
    return TimeoutLeads(
        lead_ms=max([0, *within]),
        unheld=frozenset(p for _, partitions in past for p in partitions),
        unknown=tuple(i for i in range(state_partitions) if i not in loaded),
        past_cap=tuple(transactional_id for transactional_id, _ in past),
    )
