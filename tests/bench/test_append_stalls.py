"""bench/append_stalls.py: a run appends to every file at the paced rate, records each append
and the roll's fdatasync, and leaves no file behind."""

from __future__ import annotations

from pathlib import Path

import pytest
from bench_script import load_bench_script

stalls = load_bench_script("append_stalls.py", "bench_append_stalls")


@pytest.mark.parametrize("mode", ["plain", "hinted"])
def test_a_run_times_every_append_and_the_roll_flush(tmp_path: Path, mode: str) -> None:
    run = stalls.one_run(str(tmp_path), mode, rate_mb=4.0, seconds=0.5)
    appends_per_file = len(run.latencies_s) // stalls.FILES
    assert len(run.latencies_s) == stalls.FILES * appends_per_file
    # 4 MB/s for 0.5 s in 256 KiB appends: 8 per file (a late machine does no more).
    assert 6 <= appends_per_file <= 9
    assert 0 <= run.fdatasync_s < 5
    assert run.quantile(0.5) <= max(run.latencies_s)
    assert list(tmp_path.iterdir()) == []
