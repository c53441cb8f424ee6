"""bench/produce.py's paced trials use the batch a producer lingering 5 ms would fill.

A producer with `linger.ms` = 5 sends what 5 ms brought, so the paced linger window holds the
records that arrive in 5 ms at the paced rate, within the benchmark's sizes (64 to 1,023
records of 1 KiB); `--latency-batch-kib` picks one of the throughput trials' batch sizes
instead. (How windows become batches when answers are slow: test_produce_paced_producer.py.)
"""

from __future__ import annotations

import argparse

import pytest
from bench_script import load_bench_script

produce = load_bench_script("produce.py", "produce_bench")


@pytest.mark.parametrize(
    ("records_s", "expected"),
    [
        (65_000, 325),  # 5 ms bring 325 records
        (100_000, 500),
        (129_999, 650),
        (5_000, 64),  # 25 records: the smallest batch (64 KiB)
        (400_000, 1023),  # 2,000 records: the largest (1 MiB) holds 1,023
    ],
)
def test_the_paced_batch_holds_what_linger_collects(records_s: float, expected: int) -> None:
    assert produce.paced_batch_records(records_s) == expected


def test_the_paced_window_holds_what_linger_collects_unless_a_batch_size_is_given() -> None:
    assert produce.paced_window_records(100_000, argparse.Namespace(latency_batch_kib=None)) == 500
    assert produce.paced_window_records(100_000, argparse.Namespace(latency_batch_kib=256)) == 256
