"""bench/kafka_produce_cpu.py in a few requests: every request is appended (its answer checked
inside the script), and each round gives a positive CPU figure per request."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from bench_script import load_bench_script

produce_cpu = load_bench_script("kafka_produce_cpu.py", "kafka_produce_cpu_bench")


def test_each_round_times_its_requests_into_a_real_log(tmp_path: Path) -> None:
    args = argparse.Namespace(rounds=2, requests=5, warm_up=3, records=4, value_bytes=100)
    figures = asyncio.run(produce_cpu._rounds(args, str(tmp_path)))
    assert len(figures) == 2 and all(f > 0 for f in figures)
    segments = list((tmp_path / "t-0").glob("*.log"))
    assert sum(s.stat().st_size for s in segments) > 13 * 4 * 100  # all 13 requests' records
