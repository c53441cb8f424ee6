"""Deterministic simulation of the Raft core: many seeds, each a cluster under faults.

Goal: Raft's safety properties hold after every event of every run, and a quorum recovers once
faults stop (see sim_runner.py and sim_invariants.py). Method: one seed per test; by default
seeds 0..99 (what `replog sim` checks of Raft in its own 200 seeds is not repeated at length
here: these seeds are for what only this simulator has, docs/reliability.md).
``SIM_SEEDS=N`` runs seeds 0..N-1; ``SIM_SEED=S`` replays seed S alone (the command a failure
prints). The checker itself is tested by running broken variants of the node
and of the disk, which it must catch.
"""

from __future__ import annotations

import os

import pytest
from sim_runner import SimulationFailure, run_seed

from replog.quorum.raft import RaftNode
from replog.quorum.raft.election_state import ElectionState
from replog.quorum.raft.messages import VoteRequest

DEFAULT_SEEDS = 100


def _seeds() -> list[int]:
    if "SIM_SEED" in os.environ:
        return [int(os.environ["SIM_SEED"])]
    return list(range(int(os.environ.get("SIM_SEEDS", DEFAULT_SEEDS))))


@pytest.mark.parametrize("seed", _seeds())
def test_seed(seed: int) -> None:
    try:
        run_seed(seed)
    except SimulationFailure as failure:
        pytest.fail(str(failure), pytrace=False)


def test_a_seed_replays_identically() -> None:
    first, second = run_seed(11), run_seed(11)
    assert first == second
    assert first.events > 100


# --- the checker can fail -----------------------------------------------------------------------


def _first_failure(seeds: range, **options: object) -> str:
    for seed in seeds:
        try:
            run_seed(seed, **options)  # type: ignore[arg-type]
        except SimulationFailure as failure:
            return str(failure)
    raise AssertionError(f"no seed in {seeds} caught the fault")


class VotesTwice(RaftNode):
    """A voter that forgets its vote: it grants any up-to-date candidate in any epoch."""

    def _can_grant(self, request: VoteRequest) -> bool:
        return (
            self.node_id in self.config.voter_ids
            and request.candidate_id in self.config.voter_ids
            and self._log_is_up_to_date(request.last_offset_epoch, request.last_offset)
        )

    def _set_election(self, successor: ElectionState) -> None:
        # Skip the core's own assertion, so that the simulator's checker must notice.
        if successor != self._election:
            self._election = successor
            self._election_dirty = True


def test_the_checker_catches_a_node_that_votes_twice() -> None:
    message = _first_failure(range(40), node_factory=VotesTwice)
    assert "SIM_SEED=" in message
    assert "illegal election state" in message or "two leaders" in message, message


def test_the_checker_catches_a_disk_that_loses_flushed_data() -> None:
    # Every voter's disk acknowledges fsync and then loses everything in a crash: committed
    # entries vanish from a majority.
    message = _first_failure(
        range(40),
        lying_disk_nodes=(1, 2, 3),
        option_overrides={"crash_rate": 0.3, "voters": 3},
    )
    assert "SIM_SEED=" in message
    assert "committed" in message, message
