"""`replog.sim.run`: seeded runs of the cluster's real metadata-quorum shells under faults are
clean, a seed replays byte for byte, and the checks catch planted bugs (each planted here by
patching one rule of the real code, never by a switch in it)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from quorum.raft import node as raft_node_module
from quorum.raft.node import RaftNode
from replog.server.raft_storage import RaftStorage
from replog.sim.run import SimulationFailure, simulate

SEEDS_PER_CHUNK = 50
CHUNKS = 4  # 200 seeds in CI, in chunks the test workers share
PLANTED_BUG_SEEDS = 60  # a planted bug must be caught within this many seeds


@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_seeds_are_clean(chunk: int) -> None:
    for seed in range(chunk * SEEDS_PER_CHUNK, (chunk + 1) * SEEDS_PER_CHUNK):
        simulate(seed)  # raises SimulationFailure naming the seed and its replay command


def test_a_seed_replays_byte_for_byte() -> None:
    first, again = simulate(3), simulate(3)
    assert first.events == again.events and first.events
    assert first.summary() == again.summary()
    assert simulate(4).events != first.events


def _caught(plant: Callable[[pytest.MonkeyPatch], None], monkeypatch: pytest.MonkeyPatch) -> str:
    plant(monkeypatch)
    for seed in range(PLANTED_BUG_SEEDS):
        try:
            simulate(seed)
        except SimulationFailure as failure:
            assert f"replay: replog sim --seed {seed}" in str(failure)
            return str(failure)
    raise AssertionError(f"the planted bug survived {PLANTED_BUG_SEEDS} seeds")


def _no_fsync(monkeypatch: pytest.MonkeyPatch) -> None:
    """Raft reports its appends as flushed without syncing them."""
    apply = RaftStorage.apply

    def unsynced_apply(self: RaftStorage, ready: object, *, flush: bool = True) -> int:
        apply(self, ready, flush=False)  # type: ignore[arg-type]
        return self.log.log_end_offset

    monkeypatch.setattr(RaftStorage, "apply", unsynced_apply)
    monkeypatch.setattr(RaftStorage, "flush", lambda self: self.log.log_end_offset)


def _any_log_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    """A voter grants its vote to a candidate whatever its log (Raft's 5.4.1 skipped)."""
    monkeypatch.setattr(RaftNode, "_log_is_up_to_date", lambda self, epoch, offset: True)


def _votes_twice(monkeypatch: pytest.MonkeyPatch) -> None:
    """A voter grants its vote to every candidate of an epoch, not only the first."""
    monkeypatch.setattr(
        RaftNode, "_can_grant", lambda self, request: request.candidate_id in self._voter_ids
    )


def _no_truncation(monkeypatch: pytest.MonkeyPatch) -> None:
    """A follower told its log diverges keeps its diverging tail (KIP-595's truncation
    skipped): it truncates nothing, and the leader, checking each fetch's position, never
    lets it append again: the cluster stops making progress."""
    monkeypatch.setattr(
        raft_node_module, "truncation_offset", lambda diverging, summary, hw: summary.log_end_offset
    )


@pytest.mark.parametrize(
    ("plant", "expected"),
    [
        (_no_fsync, "committed batch was lost or replaced|acknowledged topic creations lost"),
        (_any_log_wins, "committed batch was lost or replaced|acknowledged topic creations lost"),
        (
            _votes_twice,
            "two leaders in quorum epoch|below the high watermark|committed batch was lost or "
            "replaced",
        ),
        (_no_truncation, "no progress"),
    ],
    ids=["fsync dropped", "stale log elected", "two votes in an epoch", "truncation skipped"],
)
def test_a_planted_bug_is_caught(
    plant: Callable[[pytest.MonkeyPatch], None], expected: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import re

    failure = _caught(plant, monkeypatch)
    assert re.search(expected, failure), failure
