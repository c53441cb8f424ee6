"""`FaultMix`: which kinds of fault a run's faults phase draws from, chosen per seed (swarm
testing: Groce et al., "Swarm Testing", ISSTA 2012; TigerBeetle's VOPR), and the draw of each
fault (`draw`).

Rules:
- `FAULT_WEIGHTS` gives each fault its share of the draws, in percent, with every kind
  enabled; `START_WEIGHT` is the rest, which starts a stopped node (or, with every node up,
  has the newest quorum leader resign). A kind left out of a seed's mix gives its share to
  the others in proportion, so the kinds a seed keeps strike more often.
- `from_seed`: a quarter of the seeds enable every kind (their draws are those of the full
  table, so such a seed runs as a run without swarm drawing would); each other seed enables
  each kind with probability 1/2, so some runs see no power loss, some no kill, some no
  partition, and the runs end in states a single mix reaches rarely (a mix in which every
  kind strikes leaves most data partitions offline by KIP-966, and a bug on the path that
  elects their leaders automatically is then seen in few seeds).
- The network's message faults (delays, drops, duplicates) are drawn per seed by the run.
"""

from __future__ import annotations

import itertools
import random

__all__ = ["ALL_FAULTS", "FAULT_KINDS", "FAULT_WEIGHTS", "START_WEIGHT", "FaultMix"]

# Each fault's share of the faults phase's draws with every kind enabled, in percent. The
# crash kinds keep their shares of the fault list: KIP-966 leaving partitions offline
# after them is checked, not avoided.
FAULT_WEIGHTS = (
    ("partition", 20),
    ("heal", 20),
    ("kill", 15),
    ("clean restart", 10),
    ("power loss", 10),
    ("whole power loss", 3),
    ("disk", 4),
    ("slow disk", 3),
    ("clock", 3),
)
START_WEIGHT = 100 - sum(weight for _, weight in FAULT_WEIGHTS)
# The kinds a seed enables or leaves out, each the faults of `FAULT_WEIGHTS` it draws.
FAULT_KINDS = {
    "partitions": ("partition", "heal"),
    "kills": ("kill",),
    "clean restarts": ("clean restart",),
    "power losses": ("power loss", "whole power loss"),
    "disk faults": ("disk", "slow disk"),
    "clock jumps": ("clock",),
}
ALL_KINDS_SHARE = 0.25  # of the seeds, those that enable every kind
KIND_SHARE = 0.5  # each kind's chance to be enabled in the other seeds


class FaultMix:
    """The fault kinds one run enables and the cumulative draw table they give."""

    def __init__(self, kinds: frozenset[str]) -> None:
        unknown = sorted(kinds - FAULT_KINDS.keys())
        if unknown:
            raise ValueError(f"unknown fault kinds {unknown}; the kinds are {list(FAULT_KINDS)}")
        self.kinds = kinds
        faults = {fault for kind in kinds for fault in FAULT_KINDS[kind]}
        weights = [(fault, weight) for fault, weight in FAULT_WEIGHTS if fault in faults]
        total = sum(weight for _, weight in weights) + START_WEIGHT
        cumulative = itertools.accumulate(weight for _, weight in weights)
        # Each fault with the upper bound of its draws in [0, 1); above the last, "start".
        self.table = tuple(
            (fault, below / total) for (fault, _), below in zip(weights, cumulative, strict=True)
        )

    @staticmethod
    def from_seed(rng: random.Random) -> FaultMix:
        """The mix of a seed whose own generator is `rng` (module Rules)."""
        if rng.random() < ALL_KINDS_SHARE:
            return ALL_FAULTS
        return FaultMix(frozenset(kind for kind in FAULT_KINDS if rng.random() < KIND_SHARE))

    def draw(self, roll: float) -> str:
        """The fault for `roll`, a uniform draw in [0, 1): one of `FAULT_WEIGHTS`' or "start"."""
        for fault, below in self.table:
            if roll < below:
                return fault
        return "start"

    def describe(self) -> str:
        if self.kinds == ALL_FAULTS.kinds:
            return "every fault kind"
        if not self.kinds:
            return "no fault kind but starts and resignations"
        return "faults: " + ", ".join(kind for kind in FAULT_KINDS if kind in self.kinds)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, FaultMix) and other.kinds == self.kinds

    def __hash__(self) -> int:
        return hash(self.kinds)

    def __repr__(self) -> str:
        return f"FaultMix({sorted(self.kinds)})"


ALL_FAULTS = FaultMix(frozenset(FAULT_KINDS))
