"""Opt-in record of where a test run's time went, for keeping CI under its budget
(bench/ci_lanes.py reads it).

With `REPLOG_TEST_TIMES=FILE` in the environment, every test process (each xdist worker, or the
one `-n 0` process) appends a line per test to FILE: its worker, node id, start and end (Unix
seconds), the CPU seconds the test process itself used, and those of its children reaped
during the test (nodes, JVMs and tools it started and waited for; not a process that outlived
its own parent, such as a node a CLI command left running); and
the controller samples the machine's busy CPU (/proc/stat) every `SAMPLE_S` into
`FILE.cpu`, so that what the tests' children (nodes, JVMs, tools) used shows beside the
workers' own CPU. Without the variable nothing is recorded. Lines are appended whole, so the
workers can share the file.
"""

from __future__ import annotations

import os
import resource
import threading
import time

import pytest

SAMPLE_S = 2.0
TIMES_ENV = "REPLOG_TEST_TIMES"

_started: dict[str, tuple[float, float, float]] = {}
_records_tests = False  # this process runs the tests (a worker, or the one `-n 0` process)


def _times_file() -> str | None:
    return os.environ.get(TIMES_ENV) or None


def pytest_configure(config: pytest.Config) -> None:
    global _records_tests
    distributing = not hasattr(config, "workerinput") and bool(config.getoption("numprocesses", 0))
    _records_tests = _times_file() is not None and not distributing


def pytest_runtest_logstart(nodeid: str, location: object) -> None:
    if _records_tests:
        _started[nodeid] = (time.time(), time.process_time(), _children_cpu())


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def pytest_runtest_logfinish(nodeid: str, location: object) -> None:
    path = _times_file()
    started = _started.pop(nodeid, None)
    if path is None or started is None:
        return
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    line = (
        f"{worker}\t{nodeid}\t{started[0]:.2f}\t{time.time():.2f}\t"
        f"{time.process_time() - started[1]:.2f}\t{_children_cpu() - started[2]:.2f}\n"
    )
    with open(path, "a", encoding="utf-8") as times:
        times.write(line)


def busy_cpu_ticks(stat: str) -> tuple[int, int]:
    """(busy, idle) clock ticks of the machine from /proc/stat's first line."""
    fields = [int(value) for value in stat.split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle, iowait
    return sum(fields[:8]) - idle, idle


def _sample_cpu(path: str, stop: threading.Event) -> None:
    while not stop.wait(SAMPLE_S):
        with open("/proc/stat", encoding="ascii") as stat:
            busy, idle = busy_cpu_ticks(stat.read())
        with open(path, "a", encoding="utf-8") as samples:
            samples.write(f"{time.time():.2f} {busy} {idle}\n")


_sampler: tuple[threading.Thread, threading.Event] | None = None


def pytest_sessionstart(session: pytest.Session) -> None:
    global _sampler
    path = _times_file()
    if path is None or hasattr(session.config, "workerinput") or not os.path.exists("/proc/stat"):
        return
    stop = threading.Event()
    thread = threading.Thread(
        target=_sample_cpu, args=(path + ".cpu", stop), name="test-times-cpu", daemon=True
    )
    thread.start()
    _sampler = (thread, stop)


def pytest_sessionfinish(session: pytest.Session) -> None:
    if _sampler is not None:
        _sampler[1].set()
        _sampler[0].join()
