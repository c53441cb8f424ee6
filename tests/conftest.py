"""The test session runs gRPC as replog's own processes do (replog/wire/grpc_engine.py): on its
polling engine, without fork handlers (with them, pyspark's launch of its JVM gateway, a fork
then exec while gRPC calls run, at times killed the child before its exec).

gRPC reads both switches when grpc is first imported, which for this process is while pytest
collects the first test module; this conftest is loaded before any of them.

The suite runs on three pytest-xdist workers (`-n 3 --dist loadgroup` in pyproject.toml), and the
tests that start clusters run on one of them, one after the other: they measure failovers and
timeouts in seconds, and two clusters sharing the machine's two cores at the same priority would
make them slower and their timing looser. Another worker takes the tests that start a single node,
also one after the other, so that no more than one cluster and one node share the cores at that
priority. The in-process tests, and the modules the process-test rules would group that start no
node and time nothing (short-lived tools at most), go to whichever worker is free, at a lower CPU
priority (tests/background_priority.py): they fill what the two lanes leave idle while those wait on
their nodes. Spark's tests (a cluster and a JVM of their own) form a group, and each cluster module
that times no failover one of its own, handed out last, once every in-process test is, to whichever
workers are free, at that lower priority beside the clusters' lane. Which tests go where:
tests/process_tests.py (`pytest_xdist_make_scheduler` groups them); `-n 0` runs everything in this
process.
"""

from __future__ import annotations

import compileall
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from replog.wire.grpc_engine import choose_grpc_engine
from tests.assert_rewrite_cache import rewrite_test_modules
from tests.grouped_scheduling import grouped_scheduler
from tests.leftovers import close_leftovers
from tests.open_descriptors import files_left_under, files_open_under
from tests.process_tests import LAST_GROUPS, worker_group

choose_grpc_engine()

# A worker that dies says why, and a test whose memory runs away is stopped by name; with
# REPLOG_TEST_TIMES set, where the run's time went is recorded (bench/ci_lanes.py reads it); the
# in-process tests run at a lower priority than the process tests' lanes.
pytest_plugins = ("tests.worker_watch", "tests.run_times", "tests.background_priority")


def pytest_sessionstart(session: object) -> None:
    """Compile the project's modules to bytecode once, before any test starts a process.

    Many tests start nodes and CLI commands as processes, each importing most of replog. Where
    PYTHONDONTWRITEBYTECODE is set (this CI machine sets it) no import writes a `.pyc`, so each
    of those processes compiled every module again, ~0.8 s of CPU apiece; with the files
    compiled here (compileall writes them whatever that variable says) every process loads
    them instead. What runs is the same code: a `.pyc` is used only while it matches its
    source file.
    """
    root = Path(__file__).resolve().parent.parent
    for package in ("replog", "quorum", "timeline", "checkpoints"):
        compileall.compile_dir(root / package, quiet=1)
    if not hasattr(session, "config") or hasattr(session.config, "workerinput"):
        return  # the controller's alone: once per run
    # For the same reason, the compiled dataclass methods (replog/cli/dataclass_methods.py),
    # written whatever that variable says, by a process that imports every command and the
    # node's runtime.
    subprocess.run([sys.executable, "-c", KEEP_DATACLASS_METHODS], cwd=root, check=True)
    if session.config.getoption("numprocesses", None):
        # Before the workers start (xdist starts them in a later sessionstart hook): each
        # would otherwise rewrite every test module's asserts itself.
        started_in = session.config.invocation_params.dir
        named = [started_in / arg.split("::", 1)[0] for arg in session.config.args]
        rewrite_test_modules(root, named)


KEEP_DATACLASS_METHODS = """
import importlib
from replog.cli import dataclass_methods
import replog.cli.main
from replog.cli.commands import COMMANDS
for command in COMMANDS:
    importlib.import_module(command.module_name)
import replog.server.process.node
dataclass_methods.save(force=True)
"""


@pytest.fixture(autouse=True)
def _close_leftovers(request: pytest.FixtureRequest) -> Iterator[None]:
    """Close what the test's helpers opened and it left open (`tests/leftovers.py`); then
    fail a test that still holds a descriptor of a file in its `tmp_path`."""
    yield
    close_leftovers()
    tmp_path = request.node.funcargs.get("tmp_path")
    if tmp_path is not None:
        left = files_open_under(tmp_path, collect=False) and files_left_under(tmp_path)
        if left:
            pytest.fail(f"{len(left)} descriptors left open under tmp_path: {sorted(left)[:5]}")


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    """`--dist loadgroup` (pyproject.toml) with the process tests' groups: xdist's own
    loadgroup reads `xdist_group` marks through item node ids, which pytest 9 no longer lets a
    plugin rename, so the grouping is done here, where xdist schedules by node id (and a dead
    worker no longer hangs the run: tests/grouped_scheduling.py)."""
    if config.getvalue("dist") != "loadgroup":
        return None
    root = config.rootpath
    return grouped_scheduler(
        config, log, lambda nodeid: worker_group(root / nodeid.split("::", 1)[0]), LAST_GROUPS
    )
