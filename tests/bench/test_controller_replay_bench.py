"""bench/controller_replay.py: both phases timed, and against a base commit in the same run."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from bench_script import BENCH, load_bench_script

ROOT = BENCH.parent


def test_both_phases_are_timed_per_run(monkeypatch: pytest.MonkeyPatch) -> None:
    # Last on the path: the script imports bench/base_commit.py, and first bench/ would
    # shadow the timeline package (bench/timeline.py).
    monkeypatch.setattr(sys, "path", [*sys.path, str(BENCH)])
    replay = load_bench_script("controller_replay.py", "bench_controller_replay")
    replayed, results = replay.measure(topics=20, runs=2)
    assert replayed.startswith("200 partitions in ")
    assert list(results) == list(replay.CASES)
    assert all(len(times) == 2 and min(times) > 0 for times in results.values())


def test_base_prints_both_sides_and_their_ratio() -> None:
    # The base's side needs its own tests/controller harness: HEAD's, from git archive.
    command = [sys.executable, str(BENCH / "controller_replay.py"), "--topics", "20"]
    command += ["--runs", "2", "--base", "HEAD"]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run(command, cwd=ROOT, env=env, check=True, capture_output=True, text=True)
    lines = done.stdout.splitlines()
    assert lines[0] == "thread CPU, min / median / max of 2 runs a side"
    assert [line.split(":")[0] for line in lines[1:]] == [
        "ms per 1,000 partitions created",
        "ms per 1,000 PartitionChangeRecords",
    ]
    assert all(
        "; base HEAD " in line and "working tree / base per run" in line for line in lines[1:]
    )
