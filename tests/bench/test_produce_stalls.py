"""bench/produce.py places a paced trial's slowest 1% of sends in time (`slow_episodes`).

A p99 over ~2,000 sends is the 20th slowest, so one stall can decide it; the trial line says
whether it did. The sends of a paced trial's warm-up are not counted.
"""

from __future__ import annotations

import time

from bench_script import load_bench_script

produce = load_bench_script("produce.py", "produce_bench_stalls")


def _trial(stalled: dict[int, float]) -> tuple[list[float], list[float]]:
    """1,000 sends 10 ms apart from t=100 s, each 5 ms, except the indexes in `stalled`."""
    latencies = [stalled.get(i, 0.005) for i in range(1000)]
    ended_at = [100.0 + i * 0.01 + latency for i, latency in enumerate(latencies)]
    return latencies, ended_at


def test_one_stall_makes_the_whole_slowest_percent() -> None:
    # 10 sends from 3.0 s on take 80-89 ms: the slowest 1% of 1,000 is that one stall.
    latencies, ended_at = _trial({300 + i: 0.080 + i / 1000 for i in range(10)})
    [stall] = produce.slow_episodes(latencies, ended_at)
    assert stall.count == 10
    assert abs(stall.start_s - 3.08) < 1e-6  # from the first send, at its end
    assert abs(stall.end_s - 3.179) < 1e-6
    assert stall.worst_s == 0.089


def test_slow_sends_apart_are_separate_stalls() -> None:
    # Three groups of four slow sends; the slowest ten are the last two groups and the two
    # slowest of the first.
    stalled = {
        first + i: latency + i / 1000
        for first, latency in ((100, 0.050), (500, 0.070), (900, 0.090))
        for i in range(4)
    }
    stalls = produce.slow_episodes(*_trial(stalled))
    assert [(s.count, round(s.worst_s, 3)) for s in stalls] == [(2, 0.053), (4, 0.073), (4, 0.093)]
    assert [round(s.start_s, 3) for s in stalls] == [1.072, 5.07, 9.09]


def test_no_sends_no_stalls() -> None:
    assert produce.slow_episodes([], []) == []


def test_a_paced_trial_line_names_its_longest_stall() -> None:
    trial = produce.Trial("replog", "e2e", 256, 1, 1000, 1000 * 1024, 10.0, target_records_s=100.0)
    latencies, ended_at = _trial({300 + i: 0.080 for i in range(10)})
    for latency, at in zip(latencies, ended_at, strict=True):
        trial.add_e2e(latency, at)
    assert (
        "slowest 1%: 1 stall(s), the longest 3.1-3.2 s into the trial (10 sends, worst 80 ms)"
        in trial.line()
    )
    assert trial.summary()["slowest_1pct_stalls"] == [
        {"start_s": 3.08, "end_s": 3.17, "count": 10, "worst_ms": 80.0}
    ]


def test_sends_due_in_the_warm_up_are_not_counted() -> None:
    trial = produce.Trial("replog", "e2e", 500, 1, 0, 0, 0.0, target_records_s=100.0)
    trial.start_counting_after(2.0)
    start = trial.counted_from_s
    # Sent 0.5 s before the counted window (slow: a cold start) and just inside it.
    trial.add_e2e(0.300, start - 0.5 + 0.300)
    trial.add_e2e(0.004, start + 0.001 + 0.004)
    assert trial.e2e_s == [0.004]
    trial.add_latency(time.perf_counter() - (start - 2.0))  # sent at the warm-up's start
    assert trial.latencies_s == []
    assert "first 2 s not counted" in trial.line()
    assert trial.summary()["warm_up_s"] == 2.0
