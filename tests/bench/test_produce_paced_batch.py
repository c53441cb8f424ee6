"""bench/produce.py's paced trials use the batch a producer lingering 5 ms would fill.

A producer with `linger.ms` = 5 sends what 5 ms brought, so the paced batch holds the records
that arrive in 5 ms at the paced rate, within the benchmark's sizes (64 to 1,023 records of
1 KiB); `--latency-batch-kib` picks one of the throughput trials' batches instead.
"""

from __future__ import annotations

import argparse

import pytest
from bench_script import load_bench_script

from replog.record.batch import iter_batches

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


def test_the_paced_shape_is_a_valid_batch_of_that_many_stamped_records() -> None:
    args = argparse.Namespace(latency_batch_kib=None)
    shape = produce.paced_shape(100_000, args, {})
    assert (shape.records, shape.nominal_kib) == (500, 500)
    stamped = shape.stamped(123_456_789)
    [batch] = iter_batches(stamped)  # CRC and framing checked
    assert batch.header.records_count == 500
    assert produce.read_stamp(next(iter(batch.records())).value) == 123_456_789
    assert 500 * 1024 - 1024 < len(stamped) < 500 * 1024 + 1024


def test_latency_batch_kib_picks_a_throughput_batch_instead() -> None:
    shapes = {kib: produce.make_shape(kib) for kib in produce.BATCH_RECORDS}
    args = argparse.Namespace(latency_batch_kib=256)
    assert produce.paced_shape(100_000, args, shapes) is shapes[256]
