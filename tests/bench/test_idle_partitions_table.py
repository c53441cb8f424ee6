"""bench/idle_partitions.py's pure parts: its table is against the N = 0 baseline of the same
run (medians over runs), with the consumer's columns when one read along, and it refuses a
run without that baseline."""

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


def test_with_a_consumer_the_table_adds_its_latency_and_cores() -> None:
    trials = [
        Trial(0, 5.0, 10.0, 5000.0, 0.3, 6.0, 12.0, 0.08),
        Trial(0, 7.0, 30.0, 4990.0, 0.5, 8.0, 16.0, 0.10),
        Trial(600, 60.0, 200.0, 4900.0, 1.9, 21.0, 64.0, 0.30),
        Trial(600, 120.0, 100.0, 4800.0, 1.7, 35.0, 48.0, 0.50),
    ]
    header, rule, base, many = idle_partitions.table(trials, [0, 600])
    assert header.endswith("| consumer p50 / p99 ms | vs baseline | consumer cores |")
    assert rule.count("---:") == 10
    assert base.endswith("| 0.40 | 7.0 / 14.0 | 1.00x / 1.00x | 0.09 |")
    assert many.endswith("| 1.80 | 28.0 / 56.0 | 4.00x / 4.00x | 0.40 |")


def test_with_quiet_seconds_the_table_adds_the_quiet_cores() -> None:
    trials = [Trial(0, 5.0, 10.0, 5000.0, 0.3), Trial(600, 60.0, 200.0, 4900.0, 1.9)]
    trials[0].quiet_cores, trials[1].quiet_cores = 0.012, 0.25
    header, rule, base, many = idle_partitions.table(trials, [0, 600])
    assert header.endswith("| quiet node cores |") and rule.count("---:") == 8
    assert base.endswith("| 0.30 | 0.012 |") and many.endswith("| 1.90 | 0.250 |")


def test_percentile_takes_the_value_at_or_above_the_rank() -> None:
    values = [float(v) for v in range(1, 101)]  # 1..100
    assert idle_partitions.percentile(values, 0.5) == 51.0
    assert idle_partitions.percentile(values, 0.99) == 100.0
    assert idle_partitions.percentile([3.0], 0.99) == 3.0


def test_a_run_without_the_baseline_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as raised:
        idle_partitions.parse_args(["--idle", "60", "600"])
    assert raised.value.code == 2
    assert "--idle must include 0: the baseline" in capsys.readouterr().err
    assert idle_partitions.parse_args([]).idle == [0, 60, 150, 600]
