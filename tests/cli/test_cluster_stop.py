"""`replog cluster stop` (`stop_nodes`): SIGTERM, a line saying what a slow stop waits for, and
SIGKILL only after a bound above the node's own (a killed node restarts through recovery)."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from replog.cli import cluster_command, node_processes
from replog.cli.local_cluster import LocalNode

# Stands in for a node: named by its config path on its command line, as `is_running` checks;
# it takes `delay` seconds to stop after SIGTERM (a broker's controlled shutdown and close).
SLOW_STOP = """
import signal, sys, time
signal.signal(signal.SIGTERM, lambda *_: (time.sleep(float(sys.argv[2])), sys.exit(0)))
open(sys.argv[1] + ".ready", "w").close()
while True:
    time.sleep(1)
"""


def slow_node(tmp_path: Path, node_id: int, delay: float) -> tuple[LocalNode, int]:
    node = LocalNode(node_id, ("broker",), {}, str(tmp_path / f"node-{node_id}"))
    Path(node.directory).mkdir()
    Path(node.config_path).write_text("", encoding="utf-8")
    # Spawned as `node_processes.spawn` does (its own process group: `signal_node` signals the
    # group), and reaped by `is_running` as a node started by this process would be.
    argv = [sys.executable, "-c", SLOW_STOP, node.config_path, str(delay)]
    pid = os.posix_spawn(sys.executable, argv, os.environ, setpgroup=0)
    deadline = time.monotonic() + 10
    while not Path(node.config_path + ".ready").exists():
        assert time.monotonic() < deadline, "the stand-in node never started"
        time.sleep(0.02)
    return node, pid


def test_a_slow_stop_says_what_it_waits_for_and_is_not_killed(tmp_path: Path) -> None:
    said: list[str] = []
    node = slow_node(tmp_path, 1, node_processes.STOP_SILENT_S + 1)
    report = node_processes.stop_nodes([node], 30, say=said.append)
    assert report == [f"stopped node 1 (pid {node[1]})"]
    (line,) = said
    assert line.startswith("waiting for node(s) 1 to stop") and "SIGKILL after 30 s" in line


def test_a_quick_stop_says_nothing_and_a_stuck_one_is_killed(tmp_path: Path) -> None:
    said: list[str] = []
    quick = slow_node(tmp_path, 1, 0)
    assert node_processes.stop_nodes([quick], 30, say=said.append) == [
        f"stopped node 1 (pid {quick[1]})"
    ]
    stuck = slow_node(tmp_path, 2, 60)
    assert node_processes.stop_nodes([stuck], 1, say=said.append) == [
        f"killed (SIGKILL after 1 s) node 2 (pid {stuck[1]})"
    ]
    assert said == []  # a 1 s bound ends before the line would be said


def test_the_default_bound_is_above_a_brokers_controlled_shutdown() -> None:
    """A broker gives up its controlled shutdown after 30 s and then closes its logs: a stop
    killed at 30 s left every log of a 100,000-partition cluster to recover."""
    from replog.server.broker.broker_runtime import CONTROLLED_SHUTDOWN_TIMEOUT_MS_DEFAULT

    assert cluster_command.STOP_TIMEOUT_S >= CONTROLLED_SHUTDOWN_TIMEOUT_MS_DEFAULT / 1000 + 30


def test_a_node_leads_its_own_process_group_in_the_session_that_started_it(
    tmp_path: Path,
) -> None:
    """Its own group: Ctrl-C at the terminal does not reach it, and a stop signals it whole.
    This session: the scheduler shares the cores out between sessions first, so nodes of a
    session each would each get a third of them, bulk threads included, whatever their nice
    (`node_processes.spawn`)."""
    node = LocalNode(1, ("broker",), {}, str(tmp_path / "node-1"))
    Path(node.directory).mkdir()
    Path(node.config_path).write_text("", encoding="utf-8")  # refused: the node exits soon
    pid = node_processes.spawn(node)
    try:
        assert os.getpgid(pid) == pid
        assert os.getsid(pid) == os.getsid(0)
    finally:
        os.waitpid(pid, 0)
