"""The benchmark's wait for the file system to settle after a deletion, and the order of its
deletions (replog/cli/bench/fs_settle.py)."""

from __future__ import annotations

import pytest

from replog.cli.bench.fs_settle import agree, plan_steps, stale_run_dirs, wait_settled


class FakeTime:
    def __init__(self) -> None:
        self.now = 0.0

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def readings(values: list[float], time: FakeTime, each_s: float = 1.0):
    it = iter(values)

    def measure() -> float:
        time.now += each_s  # a reading takes time too
        return next(it)

    return measure


def test_agree_is_relative_to_the_smaller_reading() -> None:
    assert agree(10.0, 11.0, 0.1)
    assert agree(11.0, 10.0, 0.1)
    assert not agree(10.0, 11.5, 0.1)
    assert not agree(30.0, 10.0, 0.2)  # a deletion's aftermath fading
    with pytest.raises(ValueError, match="tolerance"):
        agree(1.0, 1.0, -0.1)


def test_a_falling_floor_is_waited_for_until_two_readings_agree() -> None:
    time = FakeTime()
    said: list[str] = []
    # 2-3x after a large deletion, then falling, then flat.
    found = wait_settled(
        readings([39.0, 25.0, 12.0, 8.3, 8.1, 99.0], time),
        tolerance=0.1,
        interval_s=15,
        timeout_s=600,
        clock=time.clock,
        sleep=time.sleep,
        say=said.append,
    )
    assert found.settled
    assert found.readings == [39.0, 25.0, 12.0, 8.3, 8.1]
    assert found.floor_s == 8.1
    assert found.waited_s == 5 * 1 + 4 * 15
    assert len(said) == 3 and "25.00 s then 12.00 s" in said[1]


def test_a_settled_file_system_costs_two_readings() -> None:
    time = FakeTime()
    found = wait_settled(
        readings([8.0, 8.4, 99.0], time),
        tolerance=0.2,
        interval_s=15,
        timeout_s=600,
        clock=time.clock,
        sleep=time.sleep,
    )
    assert found.settled and found.readings == [8.0, 8.4]


def test_the_wait_is_bounded_and_says_it_did_not_settle() -> None:
    time = FakeTime()
    said: list[str] = []
    found = wait_settled(
        readings([40.0, 30.0, 20.0, 14.0, 10.0, 7.0, 5.0], time),
        tolerance=0.1,
        interval_s=15,
        timeout_s=50,
        clock=time.clock,
        sleep=time.sleep,
        say=said.append,
    )
    assert not found.settled
    assert found.readings == [40.0, 30.0, 20.0, 14.0]  # no sleep past the bound
    assert time.now <= 50 + 1  # the last reading may end just after it
    assert "not settled" in said[-1]


def test_no_wait_takes_one_reading() -> None:
    time = FakeTime()
    found = wait_settled(
        readings([40.0, 8.0], time),
        tolerance=0.1,
        interval_s=15,
        timeout_s=0,
        clock=time.clock,
        sleep=time.sleep,
    )
    assert found.readings == [40.0] and not found.settled


@pytest.mark.parametrize(("create", "restart"), [(True, False), (True, True), (False, True)])
def test_nothing_is_deleted_between_the_first_measurement_and_the_last(
    create: bool, restart: bool
) -> None:
    steps = [step for step, _ in plan_steps(3, create=create, restart=restart)]
    first = steps.index("settle")
    last = steps.index("final floor")
    deletions = [i for i, step in enumerate(steps) if step.startswith("delete")]
    assert deletions == [0, len(steps) - 1]
    assert deletions[0] < first < last < deletions[1]
    # every run is measured after its own settle
    for run in range(3):
        ran = [
            i
            for i, (step, r) in enumerate(plan_steps(3, create=create, restart=restart))
            if r == run
        ]
        assert steps[ran[0]] == "settle" and len(ran) == 1 + create + restart


def test_stale_run_dirs_are_only_the_runs_own() -> None:
    entries = ["create-1", "notes.txt", "restart-0-empty", "fs-floor-abc", "create-0", "out.json"]
    assert stale_run_dirs(entries) == ["create-0", "create-1", "fs-floor-abc", "restart-0-empty"]
