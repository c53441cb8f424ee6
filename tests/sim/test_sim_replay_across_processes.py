"""A seed of `replog sim` replays byte for byte in another process too: with another hash
seed (set iteration order) the same events and the same fingerprint (committed metadata log,
network counts, virtual end time); and `simulate` in this process, whose objects lie at other
addresses than the command's (it imported other modules first), reports the same run."""

from __future__ import annotations

import os
import subprocess
import sys

from replog.sim.run import simulate


def replay(seed: int, hash_seed: str) -> list[str]:
    env = dict(os.environ, PYTHONHASHSEED=hash_seed)
    done = subprocess.run(
        [sys.executable, "-m", "replog.cli.main", "sim", "--seed", str(seed)],
        capture_output=True,
        text=True,
        env=env,
        check=True,
        timeout=600,
    )
    lines = done.stdout.splitlines()
    assert lines[-1].startswith("1 seed(s) clean"), done.stdout
    return lines[:-1]  # the last line is the wall time it took


def test_a_seed_replays_in_another_process_with_another_hash_seed() -> None:
    first = replay(5, "1")
    assert any(line.startswith("fingerprint ") for line in first)
    assert replay(5, "2") == first


def test_the_command_and_simulate_report_the_same_run() -> None:
    seed = 1
    printed = replay(seed, "0")
    report = simulate(seed)
    assert printed[0] == report.summary()
    assert f"fingerprint {report.fingerprint} (the same on every replay)" in printed
    events = [f"  {at_ms:>8} ms  {what}" for at_ms, what in report.events]
    assert printed[1 : 1 + len(events)] == events
