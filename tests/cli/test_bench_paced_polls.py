"""replog/cli/bench/paced_polls.py: the wait between two costly looks (Kafka's Metadata, its
log directories) in the benchmarks."""

from __future__ import annotations

import pytest

from replog.cli.bench.paced_polls import LONGEST_POLL_S, next_poll_s


def test_the_poll_waits_a_quarter_of_the_time_left_far_from_the_end() -> None:
    # No pace known yet, or nothing left: the poll's own interval.
    assert next_poll_s(0.5, 10.0, 0, 1000) == 0.5
    assert next_poll_s(0.5, 10.0, 1000, 0) == 0.5
    # 10,000 done in 100 s and 80,000 left: 800 s to go, a look every 5 s at most.
    assert next_poll_s(0.5, 100.0, 10_000, 80_000) == LONGEST_POLL_S
    # 1,000 in 10 s and 8,000 left: no more than a tenth of the 10 s waited.
    assert next_poll_s(0.5, 10.0, 1000, 8000) == 1.0
    # 1,000 in 10 s and 400 left: 4 s to go, the next look in 1 s.
    assert next_poll_s(0.5, 10.0, 1000, 400) == 1.0
    # A slow start (300 of 30,000 in 0.8 s) does not put the next look 5 s off: the pace
    # quickens, and the end must be seen within a tenth of the time waited.
    assert next_poll_s(0.05, 0.8, 300, 29_700) == pytest.approx(0.08)
    assert next_poll_s(0.05, 0.3, 300, 29_700) == 0.05
    # Near the end, every interval.
    assert next_poll_s(0.5, 10.0, 1000, 10) == 0.5
