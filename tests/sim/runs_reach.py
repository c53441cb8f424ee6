"""`assert_the_runs_reach(reports)`: what a chunk of CI's `replog sim` seeds must have done, so
that their clean runs prove something: transactions committed, aborted and their zombies fenced,
read_committed answers checked; metadata snapshots taken, checked and log starts moved up in
the seeds that snapshot (none in those that do not); broker-only nodes drawn. Each chunk of 25
seeds does all of it many times over (seeds 0-199 at `7edb14d9`, per 50 seeds: 116-219
commits, 55-88 aborts, 74-94 zombies fenced, 31-39 snapshotting seeds, 29-34 with broker-only
nodes), so the chunks check it on the runs CI makes anyway rather than on runs of their own."""

from __future__ import annotations

from collections.abc import Sequence

from replog.sim.run import SimReport


def assert_the_runs_reach(reports: Sequence[SimReport]) -> None:
    """AssertionError naming what none of `reports` did (module docstring)."""
    seeds = f"seeds {reports[0].seed}-{reports[-1].seed}"
    totals: dict[str, int] = {}
    for report in reports:
        for what, count in report.data.items():
            totals[what] = totals.get(what, 0) + count
    for what in (
        "transactions committed",
        "transactions aborted",
        "zombies fenced",
        "read_committed answers checked",
    ):
        assert totals[what] > 0, f"{seeds}: no {what}"
    snapshotting = [r for r in reports if r.snapshots.snapshots]
    assert snapshotting, f"{seeds}: no seed snapshots"
    unsnapped = [
        r.seed for r in reports if not r.snapshots.snapshots and r.data["snapshots checked"]
    ]
    assert not unsnapped, f"seeds {unsnapped} checked snapshots they never take"
    checked = sum(r.data["snapshots checked"] for r in snapshotting)
    assert checked > len(snapshotting), f"{seeds}: {checked} snapshots checked"
    assert any(r.data["moved log starts seen"] > 0 for r in snapshotting), (
        f"{seeds}: no log start moved"
    )
    assert any(r.observer_ids for r in reports), f"{seeds}: no broker-only node drawn"
