"""A test worker that dies says why: which test it was running, how much memory it held, how
it ended; and a test whose memory runs away is stopped by name before the kernel's OOM killer
picks a process (the biggest: that worker, or a node or the Spark JVM of another test).

Rules:
- Every test process (each xdist worker, or the one `-n 0` process) samples its resident size
  every `SAMPLE_S` and writes it, with the test it is running, to its status file
  (`WorkerStatus`); the controller, when a worker goes down, prints that file's last lines and
  the worker's exit status (a SIGKILL there with a large size is the OOM killer), and adds them
  to the crashed test's report (`pytest_testnodedown`, `pytest_handlecrashitem`).
- Past `worker_rss_limit_mb` (pyproject.toml) the process prints the test's name, its size and
  every thread's stack to its real stderr and exits, as pytest-timeout's thread method does: the
  test fails by name (tests/grouped_scheduling.py) and the run goes on. No test needs a
  tenth of the limit; a runaway reaches it in seconds.
- SIGTERM prints every thread's stack before the process ends (faulthandler, chained to the
  default action); a fault or abort prints them already (pytest's faulthandler).
"""

from __future__ import annotations

import contextlib
import faulthandler
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import pytest

SAMPLE_S = 0.5
DEFAULT_LIMIT_MB = 4096
STATUS_DIR_KEY = "replog_worker_status_dir"
_PAGE = os.sysconf("SC_PAGE_SIZE")


def rss_mb() -> float:
    """This process's resident size now (MiB)."""
    with open("/proc/self/statm", encoding="ascii") as f:
        return int(f.read().split()[1]) * _PAGE / 2**20


class WorkerStatus:
    """The status file of one test process, and the thread that keeps it and the limit."""

    def __init__(self, path: Path, name: str, limit_mb: float, stderr_fd: int) -> None:
        self.path = path
        self.name = name
        self.limit_mb = limit_mb
        self.stderr_fd = stderr_fd
        self.test = "(between tests)"
        self.peak_mb = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="worker-watch", daemon=True)

    def start(self) -> None:
        self.sample()
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)

    def running(self, test: str) -> None:
        """From the test's thread: `test` starts or ends (then "(between tests)"); the next
        sample writes it (a write per test would cost more than the test, for most)."""
        self.test = test

    def sample(self) -> float:
        size = rss_mb()
        self.peak_mb = max(self.peak_mb, size)
        line = f"{self.name}: {size:.0f} MiB (peak {self.peak_mb:.0f}) running {self.test}"
        self._write(line + "\n")
        return size

    def _run(self) -> None:
        while not self._stop.wait(SAMPLE_S):
            size = self.sample()
            if size > self.limit_mb:
                self._exit_over_limit(size)

    def _write(self, text: str) -> None:
        # Replaced whole, so a reader never sees half a line.
        temporary = self.path.with_suffix(".tmp")
        temporary.write_text(text, encoding="utf-8")
        os.replace(temporary, self.path)

    def _exit_over_limit(self, size: float) -> None:
        message = (
            f"\n{self.name}: resident size {size:.0f} MiB is over worker_rss_limit_mb "
            f"({self.limit_mb:g}) while running {self.test}; every thread's stack follows, "
            "then the worker exits\n"
        )
        with contextlib.suppress(OSError):
            self._write(message.lstrip())
            os.write(self.stderr_fd, message.encode())
            faulthandler.dump_traceback(self.stderr_fd, all_threads=True)
        os._exit(1)


_status: WorkerStatus | None = None
_status_dir = pytest.StashKey[str]()  # the controller's: where its workers write
_ends = pytest.StashKey[dict[str, str]]()  # the controller's: worker id -> how it ended


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(
        "worker_rss_limit_mb",
        "a test process whose resident size passes this (MiB) is stopped, naming its test",
        default=str(DEFAULT_LIMIT_MB),
    )


def _limit_mb(config: pytest.Config) -> float:
    raw = config.getini("worker_rss_limit_mb")
    try:
        limit = float(raw)
    except ValueError:
        limit = -1.0
    if not limit > 0:
        raise pytest.UsageError(f"worker_rss_limit_mb: expected a number of MiB > 0, got {raw!r}")
    return limit


def pytest_configure(config: pytest.Config) -> None:
    global _status
    limit = _limit_mb(config)
    workerinput: dict[str, Any] | None = getattr(config, "workerinput", None)
    if workerinput is None:
        if config.getoption("dist", "no") != "no":
            # The xdist controller: its workers write here, it reads on their death.
            config.stash[_status_dir] = tempfile.mkdtemp(prefix="replog-worker-status-")
            return
        directory, name = tempfile.mkdtemp(prefix="replog-worker-status-"), "pytest"
    else:
        directory, name = workerinput[STATUS_DIR_KEY], workerinput["workerid"]
    if not os.path.exists("/proc/self/statm"):
        return  # no resident size to watch (not Linux)
    # The real stderr: pytest's capture replaces fd 2 while tests run.
    stderr_fd = os.dup(sys.__stderr__.fileno() if sys.__stderr__ else 2)
    faulthandler.register(signal.SIGTERM, file=stderr_fd, all_threads=True, chain=True)
    _status = WorkerStatus(Path(directory) / f"{name}.status", name, limit, stderr_fd)
    _status.start()


def pytest_unconfigure(config: pytest.Config) -> None:
    global _status
    if _status is not None:
        _status.stop()
        faulthandler.unregister(signal.SIGTERM)
        os.close(_status.stderr_fd)
        if getattr(config, "workerinput", None) is None:
            shutil.rmtree(_status.path.parent, ignore_errors=True)
        _status = None
    if _status_dir in config.stash:
        shutil.rmtree(config.stash[_status_dir], ignore_errors=True)


def pytest_runtest_logstart(nodeid: str) -> None:
    if _status is not None:
        _status.running(nodeid)


def pytest_runtest_logfinish() -> None:
    if _status is not None:
        _status.running("(between tests)")


# --- the controller ---------------------------------------------------------------------------


def worker_end(config: pytest.Config, node: Any) -> str:
    """How a dead worker ended: its exit status and its status file's last line."""
    name = node.gateway.id
    popen = getattr(getattr(node.gateway, "_io", None), "popen", None)
    status = "unknown"
    if popen is not None:
        deadline = time.monotonic() + 2
        while popen.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        code = popen.returncode
        if code is not None and code < 0:
            status = f"killed by {signal.Signals(-code).name}"
        elif code is not None:
            status = f"exit code {code}"
    last = "(no status)"
    if _status_dir in config.stash:
        with contextlib.suppress(OSError):
            last = (Path(config.stash[_status_dir]) / f"{name}.status").read_text().strip()
    return f"worker {name} ended ({status}); last seen: {last}"


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    node.workerinput[STATUS_DIR_KEY] = node.config.stash[_status_dir]


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object | None) -> None:
    if error is None:
        return
    line = worker_end(node.config, node)
    node.config.stash[_ends] = {**node.config.stash.get(_ends, {}), node.gateway.id: line}
    reporter = node.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(line)


@pytest.hookimpl(optionalhook=True)
def pytest_handlecrashitem(crashitem: str, report: pytest.TestReport, sched: Any) -> None:
    line = sched.config.stash.get(_ends, {}).get(report.node.gateway.id)
    if line is not None:
        report.longrepr = f"{report.longrepr}\n{line}"
