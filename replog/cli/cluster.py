"""What `replog cluster` does (`cluster_command` builds its parser and help): start the nodes of a
local cluster as background processes, wait until they are up, report their status, stop or
kill them; `replog demo` and `replog bench` start their clusters with it too.

Rules: the nodes' files are `local_cluster`'s; every refusal (a port in use, a cluster already
running, an unknown node id) is a `ReplogError` of one line.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import json
import os
import shutil
import signal
import socket
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from replog.admin.controller_client import ControllerClient
from replog.admin.quorum import (
    NodeUnreachable,
    QuorumDescription,
    ask_describe_quorum,
    ask_each,
    describe_quorum,
)
from replog.cli.local_cluster import (
    DEFAULT_BASE_PORT,
    DEFAULT_KAFKA_BASE_PORT,
    DEFAULT_NODE_COUNT,
    LOOPBACK,
    LocalCluster,
    LocalNode,
)
from replog.cli.table import print_table
from replog.config import parse_properties
from replog.errors import ReplogError
from replog.net_address import format_host_port, parse_host_port
from replog.server.broker_runtime import data_plane_config_from_node
from replog.server.known_properties import unknown_properties
from replog.server.node_config import NodeConfig

POLL_INTERVAL_S = 0.05
# How long a stop runs before `stop_nodes` says what it waits for.
STOP_SILENT_S = 5.0
PROBE_TIMEOUT_S = 0.5  # a node that does not answer DescribeQuorum within this "does not answer"
LOG_TAIL_LINES = 15


# --- the node processes -----------------------------------------------------------------------


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
    threads, whatever their nice, held both (docs/benchmarks.md, "Autogroup experiment"). In
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


def check_ports_free(nodes: Iterable[LocalNode]) -> None:
    for node in nodes:
        addresses = list(node.listeners.values())
        if node.metrics_address is not None:
            addresses.append(node.metrics_address)
        for address in addresses:
            host, port = parse_host_port(address, f"node {node.node_id}", error=ReplogError)
            # The family of the host: an AF_INET socket cannot bind ::1.
            family = socket.AF_INET6 if ":" in host else socket.AF_INET
            with socket.socket(family) as probe:
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                try:
                    probe.bind((host, port))
                except OSError as exc:
                    reason = "in use" if exc.errno == errno.EADDRINUSE else exc.strerror
                    raise ReplogError(
                        f"node {node.node_id} cannot listen on {address}: port {port} is "
                        f"{reason} (choose another --base-port)"
                    ) from None


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


def wait_until_up(
    cluster: LocalCluster,
    pids: dict[int, int],
    timeout_s: float,
    registered_after: Mapping[int, int] | None = None,
) -> QuorumDescription:
    """Wait until the cluster is up: a leader answers DescribeQuorum with a high watermark (its
    epoch committed), every other node answers too, and the active controller's DescribeCluster
    shows every broker registered and unfenced. Returns the leader's answer.

    `registered_after` (broker id -> the broker epoch it had before it was restarted): such a
    broker counts only once registered with a later epoch. Until its session expires, the
    controller still lists a killed broker's last registration as active, so without this a
    restarted node would count as up before it had even registered.

    A quorum has a leader once a majority runs; the rest may still be importing or opening
    their logs. "Started" means every node listens, so a command run right after `start`
    reaches any node it names, and every broker takes part: a topic created right after
    `start` with a replication factor of the cluster's size succeeds (before, it could be
    refused with "0 active brokers"). Raises `ReplogError` if a node exits or this does not
    happen in time.
    """
    addresses = cluster.controller_addresses()
    broker_ids = broker_node_ids(cluster)
    # One client for every poll: it connects at its first DescribeCluster, once every node
    # answers, and then goes straight to the active controller it learned.
    with ControllerClient(list(addresses.values()), node_addresses=addresses) as controllers:
        return _wait_until_up(
            pids, addresses, broker_ids, controllers, timeout_s, registered_after or {}
        )


def _wait_until_up(
    pids: dict[int, int],
    addresses: dict[int, str],
    broker_ids: Sequence[int],
    controllers: ControllerClient,
    timeout_s: float,
    registered_after: Mapping[int, int],
) -> QuorumDescription:
    deadline = time.monotonic() + timeout_s
    last_error = "no node asked yet"
    while time.monotonic() < deadline:
        for node_id, pid in pids.items():
            code = exit_status(pid)
            if code is not None:
                raise ReplogError(f"node {node_id} (pid {pid}) exited with code {code}")
        try:
            description = describe_quorum(list(addresses.values()), addresses, PROBE_TIMEOUT_S)
        except ReplogError as exc:
            last_error = str(exc)
        else:
            if description.high_watermark is None:
                last_error = f"node {description.leader_id} leads but has not committed yet"
            else:
                answers = ask_each(addresses.values(), PROBE_TIMEOUT_S)
                silent = [
                    f"node {node_id} ({answers[address]})"
                    for node_id, address in addresses.items()
                    if isinstance(answers[address], NodeUnreachable)
                ]
                if silent:
                    last_error = f"node {description.leader_id} leads; no answer yet from " + (
                        ", ".join(silent)
                    )
                else:
                    waiting = brokers_not_active(broker_ids, controllers, registered_after)
                    if not waiting:
                        return description
                    last_error = waiting
        time.sleep(POLL_INTERVAL_S * 2)
    raise ReplogError(f"the cluster was not up within {timeout_s:g} s ({last_error})")


def brokers_not_active(
    broker_ids: Sequence[int],
    controllers: ControllerClient,
    registered_after: Mapping[int, int] | None = None,
) -> str:
    """Which of `broker_ids` the active controller does not count as active yet (unregistered,
    fenced, shutting down, or still in the registration it had before a restart: an epoch not
    above its `registered_after` entry), as a sentence; "" when all are active."""
    if not broker_ids:
        return ""
    try:
        brokers = controllers.describe_cluster(timeout_s=PROBE_TIMEOUT_S * 4).brokers
    except ReplogError as exc:
        return f"DescribeCluster: {exc}"
    before = registered_after or {}
    active = {
        b.broker_id
        for b in brokers
        if not b.fenced
        and not b.in_controlled_shutdown
        and b.broker_epoch > before.get(b.broker_id, -1)
    }
    waiting = [b for b in broker_ids if b not in active]
    if not waiting:
        return ""
    sentence = (
        f"broker{'s' if len(waiting) > 1 else ''} {', '.join(map(str, waiting))} not active yet"
    )
    stale = [
        b.broker_id
        for b in brokers
        if b.broker_id in before and b.broker_epoch <= before[b.broker_id]
    ]
    if stale:
        sentence += f" (not registered again since the restart: {', '.join(map(str, stale))})"
    return sentence


def broker_node_ids(cluster: LocalCluster) -> list[int]:
    """The nodes that run a broker, from their server.properties as written (an override may
    have made a combined node a bare Raft log without one)."""
    ids = []
    for node in cluster.nodes:
        if "broker" not in node.roles:
            continue
        with open(node.config_path, encoding="utf-8") as f:
            properties = parse_properties(f.read(), source=node.config_path)
        if NodeConfig.from_properties(properties).runs_broker:
            ids.append(node.node_id)
    return ids


# --- the commands -----------------------------------------------------------------------------


def run_start(args: argparse.Namespace) -> int:
    cluster = _cluster_to_start(args)
    pids = {node.node_id: spawn(node, verbose=args.verbose) for node in cluster.nodes}
    try:
        leader = wait_until_up(cluster, pids, args.timeout)
    except ReplogError as exc:
        started = [(node, pids[node.node_id]) for node in cluster.nodes]
        stop_nodes(started, timeout_s=5)
        raise ReplogError(f"{exc}; the nodes were stopped\n{log_tails(cluster.nodes)}") from None
    print(
        f"started {_count(len(cluster.nodes), 'node')} in {cluster.directory}; leader: node "
        f"{leader.leader_id} (quorum epoch {leader.leader_epoch})"
    )
    for node in cluster.nodes:
        roles = ",".join(node.roles)
        metrics = "" if node.metrics_url is None else f"  metrics {node.metrics_url}"
        listeners = node.listener_summary
        print(f"  node {node.node_id}  {roles}  {listeners}  pid {pids[node.node_id]}{metrics}")
    print(f"bootstrap servers: {','.join(cluster.controller_addresses().values())}")
    kafka = [node.kafka_address for node in cluster.nodes if node.kafka_address is not None]
    if kafka:
        print(f"Kafka bootstrap servers: {','.join(kafka)}")
    return 0


def _cluster_to_start(args: argparse.Namespace) -> LocalCluster:
    """The cluster `start` runs: the stopped one in the directory, or a new one (written)."""
    directory = os.path.realpath(args.data_dir)
    overrides = _parse_overrides(args.override)
    kafka_base_port: int | None = getattr(args, "kafka_base_port", None)
    if LocalCluster.exists(directory):
        existing = LocalCluster.load(directory)
        running = running_node_ids(existing)
        if running:
            raise ReplogError(
                f"a cluster is already running in {directory} (nodes "
                f"{', '.join(map(str, running))} alive); stop it first with "
                "`replog cluster stop`"
            )
        if not args.fresh:
            planned = LocalCluster.plan(
                directory,
                args.nodes or len(existing.nodes),
                args.base_port or _base_port(existing),
            )
            kafka_moved = kafka_base_port is not None and any(
                node.kafka_address != format_host_port(LOOPBACK, kafka_base_port + node.node_id - 1)
                for node in existing.nodes
            )
            if planned.voters() != existing.voters() or overrides or kafka_moved:
                raise ReplogError(
                    f"{directory} holds a stopped {len(existing.nodes)}-node cluster "
                    f"({existing.voters()}); start it without --nodes/--base-port/"
                    "--kafka-base-port/--override, or pass --fresh to delete it and start a new one"
                )
            check_ports_free(existing.nodes)
            return existing
        for node in existing.nodes:
            shutil.rmtree(node.directory, ignore_errors=True)
        os.remove(LocalCluster.file_path(directory))
    cluster = LocalCluster.plan(
        directory,
        args.nodes or DEFAULT_NODE_COUNT,
        args.base_port or DEFAULT_BASE_PORT,
        roles=args.roles,
        kafka_base_port=(DEFAULT_KAFKA_BASE_PORT if kafka_base_port is None else kafka_base_port),
    )
    for node in cluster.nodes:
        if os.path.exists(node.directory):
            raise ReplogError(
                f"{node.directory} exists but {LocalCluster.file_path(directory)} does not; "
                "remove it or choose another --data-dir"
            )
        # A bad override fails here, before anything is written or started: the node's
        # settings, and a broker's data plane settings, which the node reads at start-up too.
        config = NodeConfig.from_properties(cluster.node_properties(node, overrides))
        if config.runs_broker:
            data_plane_config_from_node(config)
    # Each node warns too, but in its node.log, which nobody reads after a clean start.
    for message in unknown_properties(overrides):
        print(f"replog cluster: warning: --override {message}", file=sys.stderr, flush=True)
    check_ports_free(cluster.nodes)
    cluster.write(overrides)
    return cluster


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _base_port(cluster: LocalCluster) -> int:
    first = cluster.nodes[0]
    return parse_host_port(first.controller_address, f"node {first.node_id}", error=ReplogError)[1]


def _parse_overrides(items: Sequence[str]) -> dict[str, str]:
    overrides = {}
    for item in items:
        key, equals, value = item.partition("=")
        if not equals or not key.strip():
            raise ReplogError(f"--override {item!r}: expected KEY=VALUE")
        overrides[key.strip()] = value.strip()
    return overrides


def run_status(args: argparse.Namespace) -> int:
    cluster = LocalCluster.load(args.data_dir)
    pids = {node.node_id: read_pid(node) for node in cluster.nodes}
    alive = {node.node_id: is_running(node, pids[node.node_id]) for node in cluster.nodes}
    answers = ask_each(
        [n.controller_address for n in cluster.nodes if alive[n.node_id]], PROBE_TIMEOUT_S
    )
    rows: list[dict[str, Any]] = []
    for node in cluster.nodes:
        answer = answers.get(node.controller_address) if alive[node.node_id] else None
        response = None if isinstance(answer, NodeUnreachable) else answer
        leader_id = -1 if response is None else response.leader_id
        rows.append(
            {
                "node_id": node.node_id,
                "roles": list(node.roles),
                "pid": pids[node.node_id],
                "listener": node.controller_address,
                "kafka": node.kafka_address,
                "alive": alive[node.node_id],
                "answers": response is not None,
                "leader_id": None if leader_id == -1 else leader_id,
                "quorum_epoch": None if response is None else response.quorum_epoch,
                "is_leader": response is not None and response.error_code == 0,
                "metrics": node.metrics_url,
            }
        )
    if args.json:
        print(json.dumps({"data_dir": cluster.directory, "nodes": rows}, indent=2))
        return 0
    print(f"cluster in {cluster.directory}")
    table = [
        [
            "NODE",
            "ROLES",
            "PID",
            "LISTENER",
            "KAFKA",
            "ALIVE",
            "ANSWERS",
            "LEADER",
            "EPOCH",
            "METRICS",
        ]
    ]
    for row in rows:
        table.append(
            [
                str(row["node_id"]),
                ",".join(row["roles"]),
                _or_dash(row["pid"]),
                row["listener"],
                _or_dash(row["kafka"]),
                "yes" if row["alive"] else "no",
                "yes" if row["answers"] else "no",
                _or_dash(row["leader_id"]),
                _or_dash(row["quorum_epoch"]),
                _or_dash(row["metrics"]),
            ]
        )
    print_table(table)
    return 0


def _or_dash(value: object) -> str:
    return "-" if value is None else str(value)


def run_stop(args: argparse.Namespace) -> int:
    cluster = LocalCluster.load(args.data_dir)
    running = []
    for node in cluster.nodes:
        pid = running_pid(node)
        if pid is None:
            remove_pid_file(node)  # stale: the node died without `stop`
        else:
            running.append((node, pid))
    if not running:
        print(f"no node of the cluster in {cluster.directory} is running")
        return 0
    for line in stop_nodes(running, args.timeout, say=lambda line: print(line, file=sys.stderr)):
        print(line)
    return 0


def run_kill(args: argparse.Namespace) -> int:
    cluster = LocalCluster.load(args.data_dir)
    node = cluster.node(args.node_id)
    pid = running_pid(node)
    if pid is None:
        raise ReplogError(f"node {node.node_id} is not running")
    kill_and_wait(node, pid)
    remove_pid_file(node)
    print(f"killed node {node.node_id} (pid {pid})")
    return 0


def run_restart(args: argparse.Namespace) -> int:
    cluster = LocalCluster.load(args.data_dir)
    node = cluster.node(args.node_id)
    pid = running_pid(node)
    if pid is not None:
        raise ReplogError(
            f"node {node.node_id} is still running (pid {pid}); "
            f"`replog cluster kill {node.node_id}` or `replog cluster stop` it first"
        )
    check_ports_free([node])
    is_broker = node.node_id in broker_node_ids(cluster)
    addresses = cluster.controller_addresses()
    controllers = ControllerClient(list(addresses.values()), node_addresses=addresses)
    with contextlib.closing(controllers):
        # Only a running quorum can register the broker again: with a majority of the
        # controllers down (nodes restarted one by one after a whole-cluster stop), the node
        # counts as back once it answers, as the others it waits for are not started yet.
        quorum_runs = has_quorum_leader(addresses)
        epoch_before = broker_epoch(controllers, node.node_id) if is_broker and quorum_runs else -1
        pid = spawn(node, verbose=args.verbose)
        deadline = time.monotonic() + args.timeout
        wait_for_node_answer(node, pid, args.timeout)
        if is_broker and quorum_runs:
            wait_for_registration(node, pid, controllers, epoch_before, deadline)
    print(f"restarted node {node.node_id} (pid {pid}) on {node.controller_address}")
    if is_broker and not quorum_runs:
        print(
            f"(no quorum leader before the restart: broker {node.node_id} registers once a "
            "majority of the controllers runs)"
        )
    return 0


def has_quorum_leader(addresses: Mapping[int, str]) -> bool:
    """Whether a quorum leader answers DescribeQuorum with its epoch committed."""
    try:
        description = describe_quorum(list(addresses.values()), addresses, PROBE_TIMEOUT_S)
    except ReplogError:
        return False
    return description.high_watermark is not None


def broker_epoch(controllers: ControllerClient, broker_id: int) -> int:
    """The broker epoch the active controller lists for `broker_id`; -1 when it lists none or no
    controller answers (then any registration counts as the new one)."""
    try:
        brokers = controllers.describe_cluster(timeout_s=PROBE_TIMEOUT_S * 4).brokers
    except ReplogError:
        return -1
    return next((b.broker_epoch for b in brokers if b.broker_id == broker_id), -1)


def wait_for_registration(
    node: LocalNode, pid: int, controllers: ControllerClient, epoch_before: int, deadline: float
) -> None:
    """Until the active controller counts the restarted broker as active at an epoch after
    `epoch_before`: a topic created right after `restart` may then place a replica on it.
    Until its session expires the controller still lists a killed broker's old registration
    as active, so the epoch, not the flag, says the node is back."""
    waiting = ""
    while time.monotonic() < deadline:
        raise_if_exited(node, pid)
        waiting = brokers_not_active([node.node_id], controllers, {node.node_id: epoch_before})
        if not waiting:
            return
        time.sleep(POLL_INTERVAL_S * 2)
    raise ReplogError(
        f"node {node.node_id} runs and answers, but the active controller did not count it as "
        f"an active broker before the timeout ({waiting}); it keeps running, and "
        "`replog cluster status` shows when it is"
    )


def raise_if_exited(node: LocalNode, pid: int) -> None:
    """A ReplogError with the node's log tail if the spawned `pid` has exited; its pid file
    goes (else `status` shows a dead pid as this node's)."""
    code = exit_status(pid)
    if code is not None:
        remove_pid_file(node)
        raise ReplogError(
            f"node {node.node_id} (pid {pid}) exited with code {code}\n{log_tails([node])}"
        )


def wait_for_node_answer(node: LocalNode, pid: int, timeout_s: float) -> None:
    """Until the spawned node answers DescribeQuorum; a node that exits or stays silent past
    `timeout_s` raises (the silent one is killed)."""

    def answers() -> bool:
        raise_if_exited(node, pid)
        try:
            ask_describe_quorum(node.controller_address, PROBE_TIMEOUT_S)
        except NodeUnreachable:
            return False
        return True

    if not wait_until(answers, timeout_s):
        signal_node(pid, signal.SIGKILL)
        remove_pid_file(node)
        raise ReplogError(
            f"node {node.node_id} did not answer within {timeout_s:g} s and was killed\n"
            f"{log_tails([node])}"
        )


# --- argument parsing -------------------------------------------------------------------------
