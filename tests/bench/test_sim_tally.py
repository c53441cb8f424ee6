"""bench/sim_tally.py: results appended as JSON lines, seeds done at a commit skipped, the
report counting clean seeds per commit with each failure's replay command."""

from __future__ import annotations

from pathlib import Path

from bench_script import load_bench_script

tally = load_bench_script("sim_tally.py", "bench_sim_tally")
Result = tally.Result


def test_seeds_already_run_at_the_commit_are_skipped() -> None:
    assert list(tally.seeds_to_run({0, 2}, 0, 5)) == [1, 3, 4]
    endless = tally.seeds_to_run({10, 11}, 10, None)
    assert [next(endless) for _ in range(3)] == [12, 13, 14]


def test_the_report_counts_clean_seeds_per_commit_and_replays_failures() -> None:
    results = [
        Result(0, "abc1234", True, 16.0, 0.2),
        Result(1, "abc1234", False, 0.0, 0.1, "seed 1: two leaders in quorum epoch 3"),
        Result(2, "abc1234", True, 14.0, 0.2),
        Result(0, "def5678", True, 15.0, 0.3),
        Result(0, "def5678", True, 15.0, 0.3),  # run again: counted once
    ]
    text = tally.report(results)
    assert "abc1234: 2 clean (seeds 0-2), 1 failed, 75 simulated s per wall s" in text
    assert "replay at abc1234: replog sim --seed 1" in text
    assert "def5678: 1 clean (seeds 0-0), 0 failed" in text
    assert text.endswith("in all: 3 clean seed runs")


def test_a_run_appends_each_seed_and_a_second_run_resumes(tmp_path: Path) -> None:
    path = str(tmp_path / "tally.jsonl")
    assert tally.run(iter([0]), "test", path, 1, None) == 1
    [first] = tally.read_tally(path)
    assert first.seed == 0 and first.commit == "test" and first.clean
    assert first.virtual_s > 15 and first.wall_s > 0
    done = {r.seed for r in tally.read_tally(path) if r.commit == "test"}
    assert list(tally.seeds_to_run(done, 0, 2)) == [1]
