"""bench/ci_lanes.py and the record it reads (tests/run_times.py): one line per test from a
real pytest session, and a report of its lanes, the machine's busy CPU and the slowest modules."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from bench_script import load_bench_script

from tests.run_times import TIMES_ENV, busy_cpu_ticks

lanes = load_bench_script("ci_lanes.py", "bench_ci_lanes")
ROOT = Path(__file__).resolve().parents[2]


def test_a_session_records_one_line_per_test_with_its_worker_and_times(tmp_path: Path) -> None:
    (tmp_path / "test_two.py").write_text(
        "import subprocess, sys\n\n"
        "def test_quick():\n    pass\n\n"
        "def test_busy():\n    sum(range(3_000_000))\n\n"
        "def test_child():\n"
        "    subprocess.run([sys.executable, '-c', 'sum(range(3_000_000))'], check=True)\n"
    )
    times = tmp_path / "times.tsv"
    env = {**os.environ, TIMES_ENV: str(times), "PYTHONPATH": str(ROOT)}
    env.pop("PYTEST_XDIST_WORKER", None)
    env.pop("PYTEST_ADDOPTS", None)
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-n",
            "0",
            "-p",
            "tests.run_times",
            "-p",
            "no:cacheprovider",
            "test_two.py",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    recorded = lanes.read_times(str(times))
    assert [t.nodeid for t in recorded] == [
        "test_two.py::test_quick",
        "test_two.py::test_busy",
        "test_two.py::test_child",
    ]
    assert {t.worker for t in recorded} == {"main"}
    assert all(t.end >= t.start for t in recorded)
    quick, busy, child = recorded
    assert busy.cpu > quick.cpu
    assert quick.children_cpu == busy.children_cpu == 0
    assert child.children_cpu > 0


def test_the_report_gives_each_lane_the_machines_cpu_and_the_slowest_modules(
    tmp_path: Path,
) -> None:
    times = tmp_path / "times.tsv"
    times.write_text(
        "gw0\ttests/a/test_sim.py::test_1\t100.00\t160.00\t55.00\t0.00\n"
        "gw1\ttests/cluster/test_c.py::test_1\t100.00\t130.00\t2.00\t20.00\n"
        "gw1\ttests/cluster/test_c.py::test_2\t130.00\t150.00\t1.00\t15.00\n"
        "gw1\ttests/test_x.py::test_1\t150.00\t151.00\t1.00\t0.00\n"
    )
    ticks = lanes.CLOCK_TICKS
    (tmp_path / "times.tsv.cpu").write_text(
        f"100.00 {1000 * ticks} 0\n130.00 {1060 * ticks} 0\n160.00 {1110 * ticks} 0\n"
    )
    report = lanes.report(lanes.read_times(str(times)), lanes.BusyCpu(str(times) + ".cpu"), top=2)
    assert report[0] == "run: 60 s of tests from the first start to the last end"
    assert report[1] == "  lane gw0: 1 tests, 60 s of tests, 55 CPU-s its own, 0 its children's"
    assert report[2] == "  lane gw1: 3 tests, 51 s of tests, 4 CPU-s its own, 35 its children's"
    assert report[3].startswith("machine: 110 busy CPU-s of ")
    assert report[3].endswith("the workers' own 59, their reaped children's 35, the rest 16")
    assert report[5:] == [
        "     60.0    55.0     0.0  gw0  tests/a/test_sim.py",
        "     50.0     3.0    35.0  gw1  tests/cluster/test_c.py",
    ]


def test_busy_ticks_leave_out_idle_and_iowait() -> None:
    # user nice system idle iowait irq softirq steal guest guest_nice
    assert busy_cpu_ticks("cpu  10 1 5 100 7 2 3 4 0 0\ncpu0 ...") == (25, 107)


def test_an_unreadable_record_is_an_error_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = tmp_path / "times.tsv"
    broken.write_text("not a record\n")
    assert lanes.main([str(broken)]) == 2
    assert f"cannot read {broken}" in capsys.readouterr().err
