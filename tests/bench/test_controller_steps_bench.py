"""bench/controller_steps.py: every event runs to its end, stepped or whole, on a small cluster."""

from __future__ import annotations

import pytest
from bench_script import load_bench_script

from replog.quorum.controller.replication_control import CREATE_TOPICS_STEP_PARTITIONS

steps = load_bench_script("controller_steps.py", "bench_controller_steps")


@pytest.mark.parametrize("step", [7, 10_000])
def test_every_event_is_timed_and_ends_with_every_partition_led(step: int) -> None:
    results = steps.run_events(100, step)  # raises unless broker 3 leads all 100 at the end
    assert list(results) == list(steps.EVENTS)
    assert all(active >= 0 and standby >= 0 for active, standby in results.values())


def test_the_rig_creates_every_topic_when_creation_takes_several_steps() -> None:
    # More partitions than one CreateTopics step writes: the rig must run the later steps too.
    partitions = 2 * CREATE_TOPICS_STEP_PARTITIONS + 10
    results = steps.run_events(partitions, 10_000)  # raises unless broker 3 leads them all
    assert list(results) == list(steps.EVENTS)
