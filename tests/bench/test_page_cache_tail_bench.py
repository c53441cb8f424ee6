"""bench/page_cache_tail.py: a run appends the whole amount in 1 MiB appends on each side,
times every append, and leaves no file behind."""

from __future__ import annotations

from pathlib import Path

import pytest
from bench_script import load_bench_script

tail = load_bench_script("page_cache_tail.py", "bench_page_cache_tail")


@pytest.mark.parametrize("side", tail.SIDES)
def test_a_run_times_every_append_and_removes_its_file(tmp_path: Path, side: str) -> None:
    run = tail.one_run(str(tmp_path), side, 12 * tail.APPEND_BYTES)
    assert run.side == side
    assert len(run.latencies_s) == 12
    assert run.seconds >= sum(run.latencies_s) > 0
    assert run.mb_s > 0
    assert run.quantile(0.5) <= max(run.latencies_s)
    assert list(tmp_path.iterdir()) == []
