"""bench/kafka_listener_produce.py's figures: a trial's MB/s and brokers' CPU per MB come from
the two snapshots around its window, and each Kafka path's CPU per MB is set against the gRPC
path's of the same run (never another run's)."""

from __future__ import annotations

import pytest
from bench_script import load_bench_script

bench = load_bench_script("kafka_listener_produce.py", "kafka_listener_produce_bench")
MB_RECORDS = 1024  # 1 KiB records: 1024 make 1 MB


def trial(path: str, run: int, records: int, cpu_s: float, idle_cores: float = 0.0):
    start = bench.Snapshot(at=100.0, acked=5, brokers_cpu_s=(1.0, 2.0, 3.0), client_cpu_s=7.0)
    end = bench.Snapshot(
        at=110.0,
        acked=5 + records,
        brokers_cpu_s=(1.0 + cpu_s / 2, 2.0 + cpu_s / 4, 3.0 + cpu_s / 4),
        client_cpu_s=12.0,
    )
    return bench.Trial.between(path, run, start, end, idle_cores, failed=0)


def test_a_trial_counts_only_its_window() -> None:
    t = trial("confluent", 0, records=100 * MB_RECORDS, cpu_s=2.0, idle_cores=0.05)
    assert t.mb_s == pytest.approx(10.0)
    assert t.brokers_cpu_s_per_mb == pytest.approx(0.02)
    assert t.brokers_cpu_s_per_mb_above_idle == pytest.approx((2.0 - 0.5) / 100)
    assert t.per_broker_cores == (0.1, 0.05, 0.05)
    assert t.client_cores == pytest.approx(0.5)


def test_ratios_pair_each_run_with_its_own_grpc_trial() -> None:
    trials = [
        trial("replog", 0, 100 * MB_RECORDS, cpu_s=2.0),
        trial("confluent", 0, 100 * MB_RECORDS, cpu_s=2.2),
        trial("replog", 1, 100 * MB_RECORDS, cpu_s=4.0),
        trial("confluent", 1, 100 * MB_RECORDS, cpu_s=4.0),
    ]
    figure = lambda t: t.brokers_cpu_s_per_mb  # noqa: E731
    assert bench.ratios(trials, "confluent", figure) == pytest.approx([1.1, 1.0])
    lines = bench.report(trials, ["confluent", "replog"])
    assert any("confluent / gRPC" in line and "goal <= 1.10x: met" in line for line in lines)
