"""`replog cluster status`: each node's pid, listeners, liveness and view of the metadata quorum.

How each column is known, without gRPC (its import alone costs more than the whole command
may) or the node's runtime:
- alive: the node's pid file names a process that runs with its config (`node_processes`).
- leader and quorum epoch: the node's own Raft gauges (`replog_raft_current_leader`,
  `replog_raft_current_epoch`), read from its metrics endpoint over a plain HTTP/1.0 GET that
  names those families (the node then runs only its summary collector). They are the
  state its DescribeQuorum answer is made of; -1 ("unknown") is None.
- broker: a broker node's own state, its `replog_broker_state` gauge in the same GET (Kafka's
  BrokerState: starting, recovery, running, pending_controlled_shutdown, shutting_down):
  after a crash a restarted node answers while its broker is still refused registration until
  the killed process's session expires, and only this column says so. None (a dash) for a
  node without a broker, without the gauge yet, or not answering.
- answers: its metrics endpoint gave those gauges, each a whole number, and its gRPC listener
  accepts a connection (a node starts its metrics endpoint before its gRPC server). A node
  whose asking fails otherwise (a `ReplogError`) does not answer either; the error is said on
  stderr.
- A node without a metrics endpoint (a `cluster.json` written before metrics existed, or a
  `metrics.port=0` override: refused there while its gRPC listener accepts) is asked
  DescribeQuorum over gRPC, which is imported only then.
Nodes are asked in parallel, each bounded by `PROBE_TIMEOUT_S`.

What it shows clients first: one `bootstrap.servers` line, the brokers' Kafka listeners
(`--json`: `bootstrap_servers`, null when none serves one); for a cluster started with
`--security ssl` or `sasl_ssl`, the client.properties its clients pass as `--command-config`
(`--json`: `security`, and `client_config` and `java_client_config`, the file for Kafka's Java
tools, null for a plaintext cluster). The gRPC listener is the nodes'
own, shown as INTERNAL (gRPC) (`--json`: `listener`, as it always was).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any

from replog.cli.local_cluster import (
    JAVA_CLIENT_PROPERTIES,
    LocalCluster,
    LocalNode,
    accepts_connections,
)
from replog.cli.node_processes import is_running, read_pid
from replog.cli.table import print_table
from replog.errors import ReplogError
from replog.net_address import parse_host_port

PROBE_TIMEOUT_S = 1.0
LEADER_GAUGE = "replog_raft_current_leader"
EPOCH_GAUGE = "replog_raft_current_epoch"
BROKER_STATE_GAUGE = "replog_broker_state"
# Kafka's BrokerState metric values (the node's `broker_lifecycle.BROKER_STATE_METRIC`), named
# here so that status and the start command's wait import no part of the metadata quorum.
BROKER_STATES = {
    0: "not_running",
    1: "starting",
    2: "recovery",
    3: "running",
    6: "pending_controlled_shutdown",
    7: "shutting_down",
}
UNKNOWN = -1
NO_BOOTSTRAP = "- (no broker serves Kafka's protocol)"


@dataclass(frozen=True, slots=True)
class QuorumView:
    """What one node knows of the metadata quorum (None: unknown)."""

    leader_id: int | None
    epoch: int | None
    broker_state: str | None = None


class NoAnswer(Exception):
    """A node's endpoint that gave no usable answer; `refused`: nothing listens there."""

    def __init__(self, reason: str, *, refused: bool = False) -> None:
        super().__init__(reason)
        self.refused = refused


def scrape_gauges(
    address: str, names: tuple[str, ...], timeout_s: float, optional: tuple[str, ...] = ()
) -> dict[str, int]:
    """The values of the unlabelled whole-number gauges `names` at `http://address/metrics`,
    and of those of `optional` it serves; raises `NoAnswer` when the endpoint refuses, stays
    silent past `timeout_s` or answers otherwise than with `names`, each a whole number (`NaN`,
    `+Inf` or `2.5` is no leader id or epoch)."""
    host, port = parse_host_port(address, "a metrics address", error=ReplogError)
    query = "&".join(f"name%5B%5D={name}" for name in (*names, *optional))
    request = f"GET /metrics?{query} HTTP/1.0\r\nHost: {address}\r\n\r\n".encode("ascii")
    deadline = time.monotonic() + timeout_s
    chunks = []
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as connection:
            connection.sendall(request)
            while True:  # HTTP/1.0: the server closes the connection after its answer
                connection.settimeout(max(0.001, deadline - time.monotonic()))
                chunk = connection.recv(65536)
                if not chunk:
                    break
                chunks.append(chunk)
    except ConnectionRefusedError:
        raise NoAnswer("connection refused", refused=True) from None
    except TimeoutError:
        raise NoAnswer(f"no answer within {timeout_s:g} s") from None
    except OSError as exc:
        raise NoAnswer(exc.strerror or str(exc)) from None
    head, _, body = b"".join(chunks).partition(b"\r\n\r\n")
    status = head.split(b"\r\n", 1)[0].split()
    if len(status) < 2 or status[1] != b"200":
        raise NoAnswer(f"HTTP answer {b' '.join(status[1:]).decode(errors='replace')!r}")
    values = {}
    for line in body.decode("utf-8", errors="replace").splitlines():
        name, _, value = line.partition(" ")
        if name in names or name in optional:
            try:
                number = float(value)
            except ValueError:
                raise NoAnswer(f"{name}: not a number: {value!r}") from None
            if not number.is_integer():  # NaN and the infinities are not either
                raise NoAnswer(f"{name}: not a whole number: {value!r}")
            values[name] = int(number)
    missing = [name for name in names if name not in values]
    if missing:
        raise NoAnswer(f"no {', '.join(missing)} in its metrics")
    return values


def quorum_view(node: LocalNode, timeout_s: float = PROBE_TIMEOUT_S) -> QuorumView | None:
    """What `node` says of the quorum (module docstring); None when it does not answer."""
    if node.metrics_address is not None:
        broker = (BROKER_STATE_GAUGE,) if "broker" in node.roles else ()
        try:
            gauges = scrape_gauges(
                node.metrics_address, (LEADER_GAUGE, EPOCH_GAUGE), timeout_s, optional=broker
            )
        except NoAnswer as exc:
            if not exc.refused or not accepts_connections(node.controller_address):
                return None
        else:
            if not accepts_connections(node.controller_address):
                return None
            leader, epoch = gauges[LEADER_GAUGE], gauges[EPOCH_GAUGE]
            state = gauges.get(BROKER_STATE_GAUGE)
            named = None if state is None else BROKER_STATES.get(state, f"state {state}")
            return QuorumView(None if leader == UNKNOWN else leader, epoch, named)
    return _asked_over_grpc(node, timeout_s)


def _asked_over_grpc(node: LocalNode, timeout_s: float) -> QuorumView | None:
    # Imported here: only a node without a metrics endpoint costs the gRPC import.
    from replog.admin.quorum import NodeUnreachable, ask_or_why

    answer = ask_or_why(node.controller_address, timeout_s)
    if isinstance(answer, NodeUnreachable):
        return None
    leader = None if answer.leader_id == UNKNOWN else answer.leader_id
    return QuorumView(leader, answer.quorum_epoch)


def quorum_views(nodes: list[LocalNode]) -> dict[int, QuorumView | None]:
    """`quorum_view` of every node in `nodes`, asked in parallel. A node whose asking raised a
    `ReplogError` does not answer, and the error goes to stderr (uncaught in its thread, it
    would be a traceback under "Exception in thread", and the node missing)."""
    views: dict[int, QuorumView | None] = {}

    def ask(node: LocalNode) -> None:
        try:
            views[node.node_id] = quorum_view(node)
        except ReplogError as exc:
            views[node.node_id] = None
            print(f"replog cluster status: node {node.node_id}: {exc}", file=sys.stderr)

    threads = [threading.Thread(target=ask, args=(node,), daemon=True) for node in nodes]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return views


def run_status(args: argparse.Namespace) -> int:
    cluster = LocalCluster.load(args.data_dir)
    with cluster.internal_tls():
        return _status(cluster, args)


def _status(cluster: LocalCluster, args: argparse.Namespace) -> int:
    pids = {node.node_id: read_pid(node) for node in cluster.nodes}
    alive = {node.node_id: is_running(node, pids[node.node_id]) for node in cluster.nodes}
    views = quorum_views([node for node in cluster.nodes if alive[node.node_id]])
    rows: list[dict[str, Any]] = []
    for node in cluster.nodes:
        view = views.get(node.node_id)
        rows.append(
            {
                "node_id": node.node_id,
                "roles": list(node.roles),
                "pid": pids[node.node_id],
                "listener": node.controller_address,
                "kafka": node.kafka_address,
                "kafka_controller": node.kafka_controller_address,
                "alive": alive[node.node_id],
                "answers": view is not None,
                "broker_state": None if view is None else view.broker_state,
                "leader_id": None if view is None else view.leader_id,
                "quorum_epoch": None if view is None else view.epoch,
                "is_leader": view is not None and view.leader_id == node.node_id,
                "metrics": node.metrics_url,
            }
        )
    bootstrap = cluster.bootstrap_servers()
    if args.json:
        document = {
            "data_dir": cluster.directory,
            "bootstrap_servers": bootstrap,
            "security": cluster.security,
            "client_config": cluster.client_config_path,
            "java_client_config": cluster.java_client_config_path,
            "nodes": rows,
        }
        print(json.dumps(document, indent=2))
        return 0
    print(f"cluster in {cluster.directory}")
    print(f"bootstrap.servers: {bootstrap or NO_BOOTSTRAP}")
    if cluster.client_config_path is not None:
        print(client_config_line(cluster.client_config_path))
    table = [
        [
            "NODE",
            "ROLES",
            "PID",
            "KAFKA",
            "KAFKA CONTROLLER",
            "INTERNAL (gRPC)",
            "ALIVE",
            "ANSWERS",
            "BROKER",
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
                _or_dash(row["kafka"]),
                _or_dash(row["kafka_controller"]),
                row["listener"],
                "yes" if row["alive"] else "no",
                "yes" if row["answers"] else "no",
                _or_dash(row["broker_state"]),
                _or_dash(row["leader_id"]),
                _or_dash(row["quorum_epoch"]),
                _or_dash(row["metrics"]),
            ]
        )
    print_table(table)
    return 0


def client_config_line(path: str) -> str:
    """What `start` and `status` say of an ssl or sasl_ssl cluster's client.properties."""
    java = os.path.join(os.path.dirname(path), JAVA_CLIENT_PROPERTIES)
    return (
        f"client config: {path}; pass --command-config {path} to replog commands "
        f"(confluent-kafka and kcat -F read it as it is; Kafka's Java tools: {java})"
    )


def _or_dash(value: object) -> str:
    return "-" if value is None else str(value)
