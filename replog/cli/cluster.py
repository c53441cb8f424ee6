"""What `replog cluster start` and `restart` do (`cluster_command` builds the parser and help):
start the nodes of a local cluster as background processes and wait until they are up;
`replog demo` and `replog bench` start their clusters with it too. `status` is
`cluster_status`'s, `stop` and `kill` are `cluster_stop`'s: they import no gRPC.

Rules: the nodes' files are `local_cluster`'s, their processes `node_processes`'; every refusal
(a port in use, a cluster already running, an unknown node id) is a `ReplogError` of one line,
and a refused `start` has deleted and written nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import os
import shutil
import signal
import socket
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence

from replog.admin.controller_client import ControllerClient
from replog.admin.quorum import (
    NodeUnreachable,
    ask_describe_quorum,
    ask_each,
    describe_quorum,
)
from replog.admin.quorum_description import QuorumDescription
from replog.cli.broker_states import brokers_not_running
from replog.cli.cluster_status import client_config_line
from replog.cli.local_cluster import (
    DEFAULT_BASE_PORT,
    DEFAULT_NODE_COUNT,
    KAFKA_CONTROLLER_LISTENER,
    KAFKA_LISTENERS,
    SECURITY_PLAINTEXT,
    SECURITY_SASL_SSL,
    LocalCluster,
    LocalNode,
    accepts_connections,
    kafka_base_port_for,
)
from replog.cli.node_processes import (
    POLL_INTERVAL_S,
    exit_status,
    log_tails,
    remove_pid_file,
    running_node_ids,
    running_pid,
    signal_node,
    spawn,
    stop_nodes,
    wait_until,
)
from replog.cli.start_progress import PHASES, StartProgress
from replog.config import parse_properties
from replog.errors import ReplogError
from replog.net_address import parse_host_port
from replog.server.config.data_plane_config import data_plane_config_from_node
from replog.server.config.node_config import NodeConfig
from replog.server.process.known_properties import unknown_properties

PROBE_TIMEOUT_S = 0.5  # a node that does not answer DescribeQuorum within this "does not answer"


def start_flag(port_kind: str) -> str:
    """The remedy `cluster start` offers for a port of `port_kind` ("kafka", "grpc",
    "metrics") in use: the flag that moves it, which a stopped cluster accepts too."""
    return f"choose another {port_flag(port_kind)}"


def port_flag(port_kind: str) -> str:
    """The `cluster start` flag that places ports of `port_kind` ("kafka", "grpc", "metrics")."""
    return "--kafka-base-port" if port_kind == "kafka" else "--base-port"


def _moved_by_a_whole_cluster_start(port_kind: str) -> str:
    """The remedy `cluster restart` offers: it starts a node on its own ports, which only a
    start of the whole stopped cluster moves."""
    flag = port_flag(port_kind)
    return f"`replog cluster stop`, then `replog cluster start {flag} PORT` moves the cluster"


def check_ports_free(nodes: Iterable[LocalNode], remedy: Callable[[str], str] = start_flag) -> None:
    """Raise a `ReplogError` naming the first of the nodes' ports that cannot be listened on,
    and `remedy(kind)` for it (kind: "kafka", "grpc" or "metrics")."""
    for node in nodes:
        addresses = [
            ("kafka" if name in (*KAFKA_LISTENERS, KAFKA_CONTROLLER_LISTENER) else "grpc", address)
            for name, address in node.listeners.items()
        ]
        if node.metrics_address is not None:
            addresses.append(("metrics", node.metrics_address))
        for kind, address in addresses:
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
                        f"{reason} ({remedy(kind)})"
                    ) from None


def wait_until_up(
    cluster: LocalCluster,
    pids: dict[int, int],
    timeout_s: float,
    registered_after: Mapping[int, int] | None = None,
    say: Callable[[str], None] | None = None,
) -> QuorumDescription:
    """Wait until the cluster is up: a leader answers DescribeQuorum with a high watermark (its
    epoch committed), every other node answers too, the active controller's DescribeCluster
    shows every broker registered and unfenced, and each broker node says its broker runs
    (`broker_states`: after a crash, the controller's view alone is stale until the killed
    process's session expires). Returns the leader's answer. With `say`, each of these phases
    is said as it passes, and what a phase waits for once it takes long (`StartProgress`).

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
    brokers = [cluster.node(node_id) for node_id in broker_node_ids(cluster)]
    progress = StartProgress(say or (lambda line: None), time.monotonic())
    # One client for every poll: it connects at its first DescribeCluster, once every node
    # answers, and then goes straight to the active controller it learned.
    with ControllerClient(list(addresses.values()), node_addresses=addresses) as controllers:
        return _wait_until_up(
            pids, addresses, brokers, controllers, timeout_s, registered_after or {}, progress
        )


def _wait_until_up(
    pids: dict[int, int],
    addresses: dict[int, str],
    broker_nodes: Sequence[LocalNode],
    controllers: ControllerClient,
    timeout_s: float,
    registered_after: Mapping[int, int],
    progress: StartProgress,
) -> QuorumDescription:
    deadline = time.monotonic() + timeout_s
    broker_ids = [node.node_id for node in broker_nodes]
    last_error = "no node asked yet"
    brokers = f"broker{'s' if len(broker_ids) > 1 else ''} {', '.join(map(str, broker_ids))}"
    while time.monotonic() < deadline:
        for node_id, pid in pids.items():
            code = exit_status(pid)
            if code is not None:
                raise ReplogError(f"node {node_id} (pid {pid}) exited with code {code}")
        passed, leader_line = 0, None
        # Asked over gRPC only once a node listens: while they import their runtime, a plain
        # connect says so for a fraction of a channel's CPU, which the starting nodes need.
        listening = any(accepts_connections(address) for address in addresses.values())
        try:
            if not listening:
                raise ReplogError("no node listens yet")
            description = describe_quorum(list(addresses.values()), addresses, PROBE_TIMEOUT_S)
        except ReplogError as exc:
            last_error = str(exc)
            waiting = f"a quorum leader ({last_error})"
            if not listening:
                waiting = (
                    f"the nodes to listen at {', '.join(addresses.values())} (each imports "
                    "its runtime and opens its logs first)"
                )
        else:
            if description.high_watermark is None:
                last_error = f"node {description.leader_id} leads but has not committed yet"
                waiting = f"node {description.leader_id}, elected, to commit its epoch"
            else:
                passed = 1
                leader_line = (
                    f"quorum: node {description.leader_id} elected leader "
                    f"(epoch {description.leader_epoch})"
                )
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
                    waiting = f"every node to answer (none yet from {', '.join(silent)})"
                else:
                    passed = 2
                    not_active = brokers_not_up(broker_nodes, controllers, registered_after)
                    waiting = f"every broker to register and be unfenced ({not_active})"
                    if not not_active:
                        passed = 3
                        waiting = ""
                    else:
                        last_error = not_active
        lines = [
            leader_line,
            f"all {len(addresses)} nodes answer",
            f"{brokers} registered and unfenced" if broker_ids else None,
        ]
        progress.at(passed, lines, waiting, time.monotonic())
        if passed == len(PHASES):
            return description
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


def brokers_not_up(
    nodes: Sequence[LocalNode], controllers: ControllerClient, registered_after: Mapping[int, int]
) -> str:
    """Which of the broker `nodes` are not up yet, as a sentence ("" when all are): not active
    in the controller's view (`brokers_not_active`), or not running by their own word
    (`broker_states`: after a crash the controller's view alone is stale)."""
    return brokers_not_active(
        [node.node_id for node in nodes], controllers, registered_after
    ) or brokers_not_running(nodes)


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
    with cluster.internal_tls():
        return _start(cluster, args)


def _start(cluster: LocalCluster, args: argparse.Namespace) -> int:

    def say(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    nodes = _count(len(cluster.nodes), "node")
    say(f"starting {nodes} in {cluster.directory} (logs: node-<id>/node.log)...")
    pids = {node.node_id: spawn(node, verbose=args.verbose) for node in cluster.nodes}
    try:
        leader = wait_until_up(cluster, pids, args.timeout, say=say)
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
    # Clients' addresses first, in Kafka's config names; the gRPC listeners are the nodes' own.
    bootstrap = cluster.bootstrap_servers()
    if bootstrap is not None:
        print(f"bootstrap.servers: {bootstrap}")
    client_config = cluster.client_config_path
    if client_config is not None:
        print(client_config_line(client_config))
    controllers = [n.kafka_controller_address for n in cluster.nodes if n.kafka_controller_address]
    if controllers:
        print(f"bootstrap.controllers: {','.join(controllers)}")
    internal = ",".join(cluster.controller_addresses().values())
    print(f"internal gRPC listeners (between the nodes, not for clients): {internal}")
    return 0


def _cluster_to_start(args: argparse.Namespace) -> LocalCluster:
    """The cluster `start` runs: the stopped one in the directory (on new ports if asked), or a
    new one (written). Everything is checked before anything is deleted or written: a refused
    `start --fresh` leaves the old cluster as it was."""
    directory = os.path.realpath(args.data_dir)
    security = getattr(args, "security", None)
    overrides = _parse_overrides(args.override)
    kafka_base_port: int | None = getattr(args, "kafka_base_port", None)
    existing = LocalCluster.load(directory) if LocalCluster.exists(directory) else None
    if existing is not None:
        running = running_node_ids(existing)
        if running:
            stopped = [node.node_id for node in existing.nodes if node.node_id not in running]
            alive = f"nodes {', '.join(map(str, running))} alive"
            remedy = "stop it first with `replog cluster stop`"
            if stopped:  # a node that died: restart it alone, the others keep serving
                alive += f", {', '.join(f'node {n}' for n in stopped)} not"
                remedy = (
                    " and ".join(f"`replog cluster restart {n}`" for n in stopped)
                    + f" start{'s' if len(stopped) == 1 else ''} what is not running; to start "
                    f"the cluster whole, {remedy}"
                )
            raise ReplogError(f"a cluster is already running in {directory} ({alive}); {remedy}")
        if not args.fresh:
            return _stopped_cluster_to_start(existing, args, overrides, kafka_base_port)
    kafka = kafka_base_port_for(args.base_port, kafka_base_port)
    try:
        cluster = LocalCluster.plan(
            directory,
            args.nodes or DEFAULT_NODE_COUNT,
            args.base_port or DEFAULT_BASE_PORT,
            roles=args.roles,
            kafka_base_port=kafka,
            security=security or SECURITY_PLAINTEXT,
        )
    except ReplogError as exc:
        derived = kafka_base_port is None and args.base_port is not None
        if derived and str(exc).startswith("--kafka-base-port"):
            raise ReplogError(
                f"{exc} (without --kafka-base-port, a new cluster's Kafka base port is "
                f"--base-port {args.base_port} + {kafka - args.base_port}: give "
                "--kafka-base-port)"
            ) from None
        raise
    admin_password, node_overrides = _sasl_admin(cluster, overrides)
    replaced = set() if existing is None else {node.directory for node in existing.nodes}
    for node in cluster.nodes:
        if os.path.exists(node.directory) and node.directory not in replaced:
            raise ReplogError(
                f"{node.directory} exists but {LocalCluster.file_path(directory)} does not "
                "list it; remove it or choose another --data-dir"
            )
        # A bad override fails here, before anything is written or started: the node's
        # settings, and a broker's data plane settings, which the node reads at start-up too.
        config = NodeConfig.from_properties(cluster.node_properties(node, node_overrides))
        if config.runs_broker:
            data_plane_config_from_node(config)
    check_ports_free(cluster.nodes)
    _check_writable(directory)
    # Each node warns too, but in its node.log, which nobody reads after a clean start.
    for message in unknown_properties(overrides):
        print(f"replog cluster: warning: --override {message}", file=sys.stderr, flush=True)
    if existing is not None:  # --fresh, and every check passed: only now is the old one deleted
        _delete(existing)
    cluster.write(node_overrides)
    write_security_files(cluster, admin_password)
    return cluster


def _sasl_admin(
    cluster: LocalCluster, overrides: Mapping[str, str]
) -> tuple[str | None, dict[str, str]]:
    """A new sasl_ssl cluster's administrator password (None for another cluster) and the
    nodes' settings: `overrides` after the bootstrap credential it needs (`cluster_sasl`)."""
    if cluster.security != SECURITY_SASL_SSL:
        return None, dict(overrides)
    from replog.cli.cluster_sasl import bootstrap_credential_properties, new_admin_password

    password = new_admin_password()
    return password, {**bootstrap_credential_properties(password), **overrides}


def write_security_files(cluster: LocalCluster, admin_password: str | None = None) -> None:
    """An ssl or sasl_ssl cluster's certificates (made once, then reused:
    `local_certificates`), a new sasl_ssl cluster's administrator password, and its
    client.properties (written at every start: they name the cluster's current ports)."""
    if cluster.security == SECURITY_PLAINTEXT:
        return
    if admin_password is not None:
        from replog.cli.cluster_sasl import write_admin_password

        write_admin_password(cluster.directory, admin_password)
    # Imported here: only a TLS cluster's start loads `cryptography`.
    from replog.cli.local_certificates import ensure_certificates

    hosts = {node.node_id: _certificate_hosts(node.listeners.values()) for node in cluster.nodes}
    ensure_certificates(cluster.tls_files, hosts.items())
    cluster.write_client_properties()


def _certificate_hosts(addresses: Iterable[str]) -> tuple[str, ...]:
    """The names a node's certificate lists: the hosts its listeners advertise (its Kafka
    listeners' and its internal one's), and localhost for a loopback one (Kafka's quick start
    dials localhost:9092)."""
    hosts: list[str] = []
    for address in addresses:
        host, _ = parse_host_port(address, "a listener", error=ReplogError)
        hosts += [host, "localhost"] if host in ("127.0.0.1", "::1") else [host]
    return tuple(dict.fromkeys(hosts))


def _delete(cluster: LocalCluster) -> None:
    """Delete a stopped cluster: its cluster.json first, so a deletion that fails partway
    leaves no cluster listing a half-deleted node (a leftover node directory is in the way of
    the next `start`, which names it), then its node directories. An `OSError` is a
    `ReplogError` naming the path and the cause."""
    cluster_file = LocalCluster.file_path(cluster.directory)
    try:
        os.remove(cluster_file)
    except OSError as exc:
        raise ReplogError(
            f"--fresh: cannot delete {cluster_file}: {exc.strerror or exc}; nothing was deleted"
        ) from None
    for node in cluster.nodes:
        try:
            if os.path.exists(node.directory):
                shutil.rmtree(node.directory)
        except OSError as exc:
            # rmtree names the entry it failed on relative to its directory, when it has one.
            cause = exc.strerror or str(exc)
            if exc.filename and exc.filename != node.directory:
                cause = f"{exc.filename}: {cause}"
            raise ReplogError(
                f"--fresh: cannot delete {node.directory} ({cause}); {cluster_file} is deleted "
                "already, so the next start refuses what is left of it: remove it, then start "
                "again"
            ) from None


def _stopped_cluster_to_start(
    existing: LocalCluster,
    args: argparse.Namespace,
    overrides: Mapping[str, str],
    kafka_base_port: int | None,
) -> LocalCluster:
    """The stopped cluster `existing` with its data, on the ports `--base-port` and
    `--kafka-base-port` name (its own where not given): its nodes' configs and cluster.json
    are rewritten once every new port is known to be free, as they are when a move failed
    partway (`LocalCluster.rewrite_pending`)."""
    security = getattr(args, "security", None)
    if security is not None and security != existing.security:
        raise ReplogError(
            f"{existing.directory} holds a stopped cluster started with --security "
            f"{existing.security}; it starts again so: leave --security out, or pass --fresh "
            f"to delete it and start a new one with --security {security}"
        )
    if (args.nodes and args.nodes != len(existing.nodes)) or overrides:
        raise ReplogError(
            f"{existing.directory} holds a stopped {len(existing.nodes)}-node cluster "
            f"({existing.voters()}); it starts again with its own nodes and settings: start it "
            "without --nodes/--override (--base-port and --kafka-base-port move it to other "
            "ports, keeping its data), or pass --fresh to delete it and start a new one"
        )
    moved = existing.on_ports(args.base_port, kafka_base_port)
    check_ports_free(moved.nodes)
    # A move that failed partway (`rewrite_pending`) is finished: its cluster.json names the
    # new ports, some nodes' files may still name the old.
    if moved != existing or existing.rewrite_pending:
        _check_writable(existing.directory)
        moved.rewrite_addresses()
    write_security_files(moved)
    return moved


def _check_writable(directory: str) -> None:
    """Refuse a cluster directory (or, while it does not exist, its nearest existing parent)
    that this user cannot write in."""
    where = directory
    while not os.path.exists(where) and os.path.dirname(where) != where:
        where = os.path.dirname(where)
    if not os.access(where, os.W_OK | os.X_OK):
        raise ReplogError(f"{where} is not writable: choose another --data-dir")


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _parse_overrides(items: Sequence[str]) -> dict[str, str]:
    overrides = {}
    for item in items:
        key, equals, value = item.partition("=")
        if not equals or not key.strip():
            raise ReplogError(f"--override {item!r}: expected KEY=VALUE")
        overrides[key.strip()] = value.strip()
    return overrides


def run_restart(args: argparse.Namespace) -> int:
    cluster = LocalCluster.load(args.data_dir)
    with cluster.internal_tls():
        return _restart(cluster, args)


def _restart(cluster: LocalCluster, args: argparse.Namespace) -> int:
    node = cluster.node(args.node_id)
    pid = running_pid(node)
    if pid is not None:
        raise ReplogError(
            f"node {node.node_id} is still running (pid {pid}); "
            f"`replog cluster kill {node.node_id}` or `replog cluster stop` it first"
        )
    check_ports_free([node], _moved_by_a_whole_cluster_start)
    is_broker = node.node_id in broker_node_ids(cluster)
    addresses = cluster.controller_addresses()
    controllers = ControllerClient(list(addresses.values()), node_addresses=addresses)
    with contextlib.closing(controllers):
        # Only a running quorum can register the broker again: with a majority of the
        # controllers down (nodes restarted one by one after a whole-cluster stop), the node
        # counts as back once it answers, as the others it waits for are not started yet. A
        # restart that makes a majority run again (the one node of a 1-node cluster, or the
        # second of three) waits for its broker too.
        quorum_runs = has_quorum_leader(addresses)
        epoch_before = broker_epoch(controllers, node.node_id) if is_broker and quorum_runs else -1
        pid = spawn(node, verbose=args.verbose)
        deadline = time.monotonic() + args.timeout
        wait_for_node_answer(node, pid, args.timeout)
        waits = is_broker and (quorum_runs or _controller_majority_runs(cluster))
        if waits:
            wait_for_registration(node, pid, controllers, epoch_before, deadline)
    print(f"restarted node {node.node_id} (pid {pid}) on {node.controller_address}")
    if is_broker and not waits:
        print(
            f"(no quorum leader before the restart: broker {node.node_id} registers once a "
            "majority of the controllers runs)"
        )
    return 0


def _controller_majority_runs(cluster: LocalCluster) -> bool:
    """Whether the processes of a majority of the cluster's controllers run (pid files)."""
    controllers = [n for n in cluster.nodes if n.is_controller]
    return 2 * sum(running_pid(n) is not None for n in controllers) > len(controllers)


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
    `epoch_before` and the node says its broker runs (`broker_states`): a topic created right
    after `restart` may then place a replica on it, and a client's request reaches it. Until
    its session expires the controller still lists a killed broker's old registration as
    active, so the epoch and the node's own state, not the flag, say the node is back. Past
    `SILENT_S` it says on stderr what it waits for."""
    progress = StartProgress(
        lambda line: print(line, file=sys.stderr, flush=True), time.monotonic()
    )
    waiting = ""
    while time.monotonic() < deadline:
        raise_if_exited(node, pid)
        waiting = brokers_not_up([node], controllers, {node.node_id: epoch_before})
        if not waiting:
            return
        progress.at(0, (), f"broker {node.node_id} to run ({waiting})", time.monotonic())
        time.sleep(POLL_INTERVAL_S * 2)
    raise ReplogError(
        f"node {node.node_id} runs and answers, but its broker was not active before the "
        f"timeout ({waiting}); it keeps running, and `replog cluster status` shows when it is"
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
