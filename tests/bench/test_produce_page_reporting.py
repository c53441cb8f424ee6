"""bench/produce.py waits before a paced trial until the VM stops handing freed memory back
to its host (`wait_for_page_reporting_idle`): a burst of that stops the whole VM, and the
previous trial's deleted topic sets one off (docs/benchmarks-history.md)."""

from __future__ import annotations

from pathlib import Path

from bench_script import load_bench_script

produce = load_bench_script("produce.py", "produce_bench_page_reporting")


class FakeTime:
    """A clock that `sleep` moves, and a counter file that moves on a schedule."""

    def __init__(self, counter: Path, counts: dict[float, int]) -> None:
        self.now = 0.0
        self.counter = counter
        self.counts = sorted(counts.items())
        self.write()

    def write(self) -> None:
        value = max((v for at, v in self.counts if at <= self.now + 1e-9), default=0)
        self.counter.write_text(f"{value}\n")

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds
        self.write()


def wait(fake: FakeTime, **limits: float) -> float | None:
    return produce.wait_for_page_reporting_idle(
        str(fake.counter), clock=fake.clock, sleep=fake.sleep, **limits
    )


def test_waits_until_the_count_has_been_still_for_the_quiet_time(tmp_path: Path) -> None:
    # Reports at 1.0, 2.5 and 4.0 s; quiet from 4.0 s on: done 3 s later.
    fake = FakeTime(tmp_path / "reported_kib", {0: 100, 1.0: 200, 2.5: 300, 4.0: 400})
    waited = wait(fake, quiet_s=3.0)
    assert waited is not None and abs(waited - 7.0) < 0.11


def test_a_still_count_costs_only_the_quiet_time(tmp_path: Path) -> None:
    fake = FakeTime(tmp_path / "reported_kib", {0: 100})
    waited = wait(fake, quiet_s=3.0)
    assert waited is not None and abs(waited - 3.0) < 0.11


def test_gives_up_at_the_limit(tmp_path: Path) -> None:
    fake = FakeTime(tmp_path / "reported_kib", {i / 2: i for i in range(100)})
    waited = wait(fake, quiet_s=3.0, limit_s=10.0)
    assert waited is not None and abs(waited - 10.0) < 0.11


def test_no_counter_no_wait(tmp_path: Path) -> None:
    assert produce.wait_for_page_reporting_idle(str(tmp_path / "absent")) is None


def test_a_paced_trial_says_how_long_it_waited() -> None:
    trial = produce.Trial("nats", "e2e", 0, 1, 0, 0, 10.0, target_records_s=100.0)
    trial.page_reporting_wait_s = 17.44
    assert "(target 100 rec/s; page reporting idle after 17 s)" in trial.line()
    assert trial.summary()["page_reporting_wait_s"] == 17.4
