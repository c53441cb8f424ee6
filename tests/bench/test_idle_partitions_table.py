"""bench/idle_partitions.py's pure parts: its table is against the N = 0 baseline of the same
run (medians over runs), and it refuses a run without that baseline."""

from __future__ import annotations

import pytest
from bench_script import load_bench_script

idle_partitions = load_bench_script("idle_partitions.py", "idle_partitions_bench")
Trial = idle_partitions.Trial


def test_the_table_gives_medians_and_ratios_to_the_baseline() -> None:
    trials = [
        Trial(0, 5.0, 10.0, 5000.0, 0.3),
        Trial(0, 7.0, 30.0, 4990.0, 0.5),
        Trial(0, 6.0, 20.0, 4980.0, 0.4),
        Trial(600, 60.0, 200.0, 4900.0, 1.9),
        Trial(600, 120.0, 100.0, 4800.0, 1.7),
        Trial(600, 90.0, 300.0, 4700.0, 1.8),
    ]
    header, rule, base, many = idle_partitions.table(trials, [0, 600])
    assert header.startswith("| idle partitions | p50 ms | p99 ms | p50 vs baseline")
    assert rule.startswith("|---:")
    assert base == "| 0 (baseline) | 6.0 | 20.0 | 1.00x | 1.00x | 4,990 | 0.40 |"
    assert many == "| 600 | 90.0 | 200.0 | 15.00x | 10.00x | 4,800 | 1.80 |"


def test_a_run_without_the_baseline_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as raised:
        idle_partitions.parse_args(["--idle", "60", "600"])
    assert raised.value.code == 2
    assert "--idle must include 0: the baseline" in capsys.readouterr().err
    assert idle_partitions.parse_args([]).idle == [0, 60, 150, 600]
