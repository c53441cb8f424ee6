"""The node processes of a local cluster: start one in the background, find whether it runs,
signal, stop or kill it, and read its log's tail.

Rules: a node's pid file (`node-<id>/node.pid`) names its process only while that process runs
with the node's `server.properties` on its command line (a pid the kernel gave to another
program since is not it). Nothing here imports gRPC or the node's runtime: `cluster status`,
`stop` and `kill` start in the time of a bare interpreter.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from collections.abc import Callable, Iterable

from replog.cli.local_cluster import LocalCluster, LocalNode
from replog.errors import ReplogError

POLL_INTERVAL_S = 0.05
# How long a stop runs before `stop_nodes` says what it waits for.
STOP_SILENT_S = 5.0
LOG_TAIL_LINES = 15


def read_pid(node: LocalNode) -> int | None:
    try:
        with open(node.pid_path, encoding="ascii") as f:
            return int(f.read().strip())
    except (FileNotFoundError, ValueError):
        return None


def is_running(node: LocalNode, pid: int | None) -> bool:
    """Whether `pid` is `node`'s process and has not exited (a zombie has exited)."""
    return pid is not None and process_runs(pid, node.config_path)


def process_runs(pid: int, config_path: str) -> bool:
    """Whether `pid` has not exited (a zombie has) and has `config_path` on its command line
    (a server started with it: a pid the kernel gave to another program since is not it)."""
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)  # reap it if it is our child (started by this command)
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read().split(b"\0")
    except FileNotFoundError:
        return False
    except OSError:  # no /proc: trust the pid
        return _pid_exists(pid)
    return state not in ("Z", "X") and config_path.encode() in argv


def _pid_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def running_node_ids(cluster: LocalCluster) -> list[int]:
    """The ids of `cluster`'s nodes whose process runs."""
    return [n.node_id for n in cluster.nodes if running_pid(n) is not None]


def running_pid(node: LocalNode) -> int | None:
    pid = read_pid(node)
    return pid if is_running(node, pid) else None


def spawn(node: LocalNode, *, verbose: bool = False) -> int:
    """Start `node` in its own process group, output appended to its log; return its pid.

    posix_spawn rather than subprocess.Popen: the node outlives this command, and a Popen
    object collected while its child runs warns (ResourceWarning).

    Its own process group, so that signals to the terminal's foreground job (Ctrl-C) do not
    reach it, and `signal_node` reaches it whole; but this command's session, not one of its
    own: Linux's scheduler splits the cores between sessions first (autogroups), and with a
    session per node a node's event loop waited for a core while the other nodes' bulk
    threads, whatever their nice, held both (docs/benchmarks-history.md, "Autogroup experiment"). In
    one session the loops of all the nodes come before the bulk threads of any.
    """
    argv = [sys.executable, "-m", "replog.cli.main", *(["-v"] if verbose else [])]
    argv += ["node", "--config", node.config_path]
    with open(node.log_path, "a", encoding="utf-8") as log:
        log.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} {' '.join(argv)}\n")
    pid = os.posix_spawn(
        sys.executable,
        argv,
        os.environ,
        file_actions=[
            (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
            (os.POSIX_SPAWN_OPEN, 1, node.log_path, os.O_WRONLY | os.O_APPEND, 0),
            (os.POSIX_SPAWN_DUP2, 1, 2),
        ],
        setpgroup=0,
    )
    with open(node.pid_path + ".tmp", "w", encoding="ascii") as f:
        f.write(f"{pid}\n")
    os.replace(node.pid_path + ".tmp", node.pid_path)
    return pid


def exit_status(pid: int) -> int | None:
    """The exit code of our child `pid` if it has exited (negative: killed by that signal)."""
    try:
        done, status = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return None
    return os.waitstatus_to_exitcode(status) if done else None


def signal_node(pid: int, sig: signal.Signals) -> None:
    """Signal the node's whole process group (it leads its own)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, sig)


def wait_until(condition: Callable[[], bool], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() >= deadline:
            return False
        time.sleep(POLL_INTERVAL_S)
    return True


def stop_nodes(
    nodes: Iterable[tuple[LocalNode, int]],
    timeout_s: float,
    *,
    say: Callable[[str], None] | None = None,
) -> list[str]:
    """SIGTERM, then SIGKILL whatever still runs after `timeout_s`; one line per node. With
    `say`, a stop still waited for after `STOP_SILENT_S` is said once, with what it waits for."""
    nodes = list(nodes)
    for _, pid in nodes:
        signal_node(pid, signal.SIGTERM)

    def all_stopped() -> bool:
        return not any(is_running(n, pid) for n, pid in nodes)

    silent_s = min(STOP_SILENT_S, timeout_s)
    if not wait_until(all_stopped, silent_s) and say is not None and timeout_s > silent_s:
        waiting = [str(n.node_id) for n, pid in nodes if is_running(n, pid)]
        say(
            f"waiting for node(s) {', '.join(waiting)} to stop: each broker hands its "
            "leaderships over (its controlled shutdown, up to 30 s), then closes its logs "
            f"and writes its metadata snapshot; SIGKILL after {timeout_s:g} s"
        )
    wait_until(all_stopped, timeout_s - silent_s)
    report = []
    for node, pid in nodes:
        how = "stopped"
        if is_running(node, pid):
            kill_and_wait(node, pid)
            how = f"killed (SIGKILL after {timeout_s:g} s)"
        remove_pid_file(node)
        report.append(f"{how} node {node.node_id} (pid {pid})")
    return report


def kill_and_wait(node: LocalNode, pid: int, timeout_s: float = 5) -> None:
    signal_node(pid, signal.SIGKILL)
    if not wait_until(lambda: not is_running(node, pid), timeout_s):
        raise ReplogError(
            f"node {node.node_id} (pid {pid}) still runs {timeout_s:g} s after SIGKILL"
        )


def remove_pid_file(node: LocalNode) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.remove(node.pid_path)


def log_tails(nodes: Iterable[LocalNode], lines: int = LOG_TAIL_LINES) -> str:
    parts = []
    for node in nodes:
        try:
            with open(node.log_path, encoding="utf-8", errors="replace") as f:
                tail = f.read().splitlines()[-lines:]
        except FileNotFoundError:
            tail = ["(no log)"]
        parts.append("\n".join([f"--- {node.log_path} (last lines)", *tail]))
    return "\n".join(parts)
