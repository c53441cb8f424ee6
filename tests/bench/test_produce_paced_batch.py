"""bench/produce.py's paced trials use the batch a producer lingering 5 ms would fill.

At half the peak rate a 1 MiB batch takes about 16 ms to fill, so the end-to-end goal is
measured with the configured size nearest to what `linger.ms` = 5 collects at the paced rate.
"""

from __future__ import annotations

import pytest
from bench_script import load_bench_script

produce = load_bench_script("produce.py", "produce_bench")


@pytest.mark.parametrize(
    ("records_s", "sizes", "expected"),
    [
        (65_000, [64, 256, 1024], 256),  # 5 ms bring 325 records
        (50_000, [64, 256, 1024], 256),  # 250: 256 KiB takes 5.1 ms, still the nearest
        (20_000, [64, 256, 1024], 64),  # 100 records
        (140_000, [64, 256, 1024], 1024),  # 700 records
        (65_000, [64, 1024], 64),  # --quick's sizes: 261 records off beats 698
        (65_000, [1024], 1024),  # only one size given: that one
    ],
)
def test_paced_batch_is_the_size_nearest_to_what_linger_collects(
    records_s: float, sizes: list[int], expected: int
) -> None:
    assert produce.paced_batch_kib(records_s, sizes) == expected
