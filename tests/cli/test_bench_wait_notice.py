"""replog/cli/bench/wait_notice.py: a wait of the harness is silent for its first seconds,
then says what it waits for and where it stands, then again at intervals."""

from __future__ import annotations

from replog.cli.bench.wait_notice import WaitNotice


def test_a_wait_is_silent_at_first_then_says_what_it_waits_for_at_intervals() -> None:
    clock = [100.0]
    said: list[str] = []
    notice = WaitNotice(
        "kafka: waiting for leaders", after_s=5, every_s=30, clock=lambda: clock[0], say=said.append
    )
    for at, progress in ((1, "10 left"), (4.9, "9 left"), (5.2, "8 left"), (20, "7 left")):
        clock[0] = 100 + at
        notice.update(progress)
    assert said == ["kafka: waiting for leaders (8 left, 5 s so far)"]
    clock[0] = 100 + 35.3
    notice.update("2 left")
    assert said[1:] == ["kafka: waiting for leaders (2 left, 35 s so far)"]
