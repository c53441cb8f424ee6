"""A replog node run as its own process from a server.properties file, for the tests that need
a real node: started in a session of its own (so a stop reaches every child) with its output
appended to a log file, stopped with SIGTERM and, past 30 s, SIGKILL; and replog commands run
against it."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path


def start_node(config: Path, log: Path) -> subprocess.Popen[bytes]:
    """`replog node --config config`, its stdout and stderr appended to `log`."""
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "replog.cli.main", "node", "--config", str(config)],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            start_new_session=True,
        )


def stop_node(process: subprocess.Popen[bytes]) -> None:
    """Stop a node `start_node` started and wait for it (module docstring)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)


def run_replog(*args: str) -> subprocess.CompletedProcess[str]:
    """A `replog` command run to its end (60 s at most), its output captured as text."""
    return subprocess.run(
        [sys.executable, "-m", "replog.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
