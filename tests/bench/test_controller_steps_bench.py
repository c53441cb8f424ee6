"""bench/controller_steps.py: every event runs to its end, stepped or whole, on a small cluster."""

from __future__ import annotations

import pytest
from bench_script import load_bench_script

steps = load_bench_script("controller_steps.py", "bench_controller_steps")


@pytest.mark.parametrize("step", [7, 10_000])
def test_every_event_is_timed_and_ends_with_every_partition_led(step: int) -> None:
    results = steps.run_events(100, step)  # raises unless broker 3 leads all 100 at the end
    assert list(results) == list(steps.EVENTS)
    assert all(active >= 0 and standby >= 0 for active, standby in results.values())
