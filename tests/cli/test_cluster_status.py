"""`replog cluster status`, `stop` and `kill` import neither gRPC nor the node's runtime (each
cost 1.3-12 s of start-up), and status still tells the truth: a node's leader and epoch are the
Raft gauges it serves on its metrics endpoint, and it answers only if its gRPC listener accepts
too. Checked against stand-in nodes (a process named by the node's config that serves the
gauges), in a fresh interpreter whose loaded modules are listed; what makes a node "not
answering" (a gauge that is no whole number, a `ReplogError` while asking it) in-process."""

from __future__ import annotations

import dataclasses
import http.server
import json
import os
import socket
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from replog.cli import cluster_status
from replog.cli.cluster_status import (
    BROKER_STATE_GAUGE,
    BROKER_STATES,
    EPOCH_GAUGE,
    LEADER_GAUGE,
    QuorumView,
    quorum_view,
)
from replog.cli.local_cluster import LocalCluster, LocalNode
from replog.errors import ReplogError
from replog.net_address import parse_host_port
from tests.cli.test_cli_startup import RPC, SERVER_SIDE, SPARK, under
from tests.cli.test_cli_startup import run_in_a_fresh_interpreter as run_cli
from tests.local_ports import free_base_port

# Stands in for a node: its config path on its command line (as `is_running` checks), the
# Raft gauges on its metrics port, and (unless its port is 0) a listener on its gRPC port.
FAKE_NODE = """
import http.server, socket, sys
config, metrics_port, grpc_port, leader, epoch = sys.argv[1:6]
if int(grpc_port):
    listener = socket.create_server(("127.0.0.1", int(grpc_port)))
class Gauges(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = (
            "# HELP replog_raft_current_leader x\\n# TYPE replog_raft_current_leader gauge\\n"
            f"replog_raft_current_leader {float(leader)}\\n"
            f"replog_raft_current_epoch {float(epoch)}\\nreplog_raft_high_watermark 7.0\\n"
        ).encode()
        self.send_response(200)
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
server = http.server.HTTPServer(("127.0.0.1", int(metrics_port)), Gauges)
open(config + ".ready", "w").close()
server.serve_forever()
"""

# Stands in for a node without a metrics endpoint (`metrics.port=0`): DescribeQuorum on gRPC.
FAKE_GRPC_NODE = """
import sys
from concurrent import futures
import grpc
from replog.pb import raft_pb2, raft_pb2_grpc
config, grpc_port, leader, epoch = sys.argv[1:5]
class Quorum(raft_pb2_grpc.RaftQuorumServicer):
    def DescribeQuorum(self, request, context):
        return raft_pb2.DescribeQuorumResponse(leader_id=int(leader), quorum_epoch=int(epoch))
server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
raft_pb2_grpc.add_RaftQuorumServicer_to_server(Quorum(), server)
server.add_insecure_port(f"127.0.0.1:{grpc_port}")
server.start()
open(config + ".ready", "w").close()
server.wait_for_termination()
"""


@pytest.fixture
def layout(tmp_path: Path) -> LocalCluster:
    cluster = LocalCluster.plan(str(tmp_path / "cluster"), 3, free_base_port(3))
    cluster.write()
    return cluster


@pytest.fixture
def fake_nodes() -> Iterator[list[int]]:
    pids: list[int] = []
    yield pids
    for pid in pids:
        os.kill(pid, 9)
        os.waitpid(pid, 0)


def start_fake(node: LocalNode, pids: list[int], leader: int, epoch: int, grpc: bool) -> None:
    metrics_port = parse_host_port(node.metrics_address or "", "metrics")[1]
    grpc_port = parse_host_port(node.controller_address, "grpc")[1] if grpc else 0
    argv = [sys.executable, "-c", FAKE_NODE, node.config_path, str(metrics_port)]
    spawn_fake(node, pids, [*argv, str(grpc_port), str(leader), str(epoch)])


def spawn_fake(node: LocalNode, pids: list[int], argv: list[str]) -> None:
    """Run `argv` as `node` (its pid file names it) until it says it is ready."""
    pid = os.posix_spawn(sys.executable, argv, os.environ)
    pids.append(pid)
    Path(node.pid_path).write_text(f"{pid}\n")
    deadline = time.monotonic() + 20
    while not Path(node.config_path + ".ready").exists():
        assert time.monotonic() < deadline, "the stand-in node never started"
        time.sleep(0.02)


def test_status_reads_each_nodes_gauges_and_loads_neither_grpc_nor_the_server(
    layout: LocalCluster, fake_nodes: list[int]
) -> None:
    node_1, node_2, node_3 = layout.nodes
    start_fake(node_1, fake_nodes, leader=2, epoch=5, grpc=True)
    start_fake(node_2, fake_nodes, leader=2, epoch=5, grpc=True)
    # Serves its gauges, but its gRPC server is not up yet: it does not answer.
    start_fake(node_3, fake_nodes, leader=-1, epoch=4, grpc=False)
    code, output, loaded = run_cli("cluster", "status", "--json", "--data-dir", layout.directory)
    assert code == 0
    nodes = {n["node_id"]: n for n in json.loads(output)["nodes"]}
    seen = {
        i: (n["alive"], n["answers"], n["leader_id"], n["quorum_epoch"], n["is_leader"])
        for i, n in nodes.items()
    }
    assert seen == {
        1: (True, True, 2, 5, False),
        2: (True, True, 2, 5, True),
        3: (True, False, None, None, False),
    }
    assert under(loaded, (*RPC, *SERVER_SIDE, *SPARK, "replog.admin")) == []


@pytest.mark.parametrize("action", [("status",), ("kill", "2"), ("stop",)])
def test_status_stop_and_kill_load_neither_grpc_nor_the_server(
    layout: LocalCluster, action: tuple[str, ...]
) -> None:
    code, _, loaded = run_cli("cluster", *action, "--data-dir", layout.directory)
    assert code == (1 if action[0] == "kill" else 0)  # kill: "node 2 is not running"
    assert under(loaded, (*RPC, *SERVER_SIDE, *SPARK, "replog.admin")) == []


def test_a_node_without_a_metrics_endpoint_is_asked_over_grpc(
    layout: LocalCluster, fake_nodes: list[int]
) -> None:
    """Its metrics port refuses while its gRPC listener accepts (`metrics.port=0`): status asks
    it DescribeQuorum, and only then loads gRPC."""
    node = layout.node(1)
    grpc_port = parse_host_port(node.controller_address, "grpc")[1]
    argv = [sys.executable, "-c", FAKE_GRPC_NODE, node.config_path, str(grpc_port), "3", "7"]
    spawn_fake(node, fake_nodes, argv)
    code, output, loaded = run_cli("cluster", "status", "--json", "--data-dir", layout.directory)
    assert code == 0
    first = json.loads(output)["nodes"][0]
    assert (first["alive"], first["answers"], first["leader_id"], first["quorum_epoch"]) == (
        True,
        True,
        3,
        7,
    )
    assert "grpc" in loaded


@contextmanager
def serving_gauges(node: LocalNode, leader: str, epoch: str, more: str = "") -> Iterator[None]:
    """`node`'s metrics endpoint serving the two Raft gauges as given (and the lines `more`),
    and its gRPC listener accepting, in this process."""

    class Gauges(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = f"{LEADER_GAUGE} {leader}\n{EPOCH_GAUGE} {epoch}\n{more}".encode()
            self.send_response(200)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    metrics = parse_host_port(node.metrics_address or "", "metrics")
    grpc = parse_host_port(node.controller_address, "grpc")
    with (
        socket.create_server(grpc),
        http.server.HTTPServer(metrics, Gauges) as server,
    ):
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield
        finally:
            server.shutdown()
            thread.join()


@pytest.mark.parametrize("leader", ["NaN", "+Inf", "-Inf", "1e999", "2.5", "two"])
def test_a_gauge_that_is_no_whole_number_is_no_answer(layout: LocalCluster, leader: str) -> None:
    """Not a traceback from `int()`: the node shows as not answering."""
    node = layout.node(1)
    with serving_gauges(node, leader, "5.0"):
        assert quorum_view(node) is None
    with serving_gauges(node, "2.0", "5.0"):
        assert quorum_view(node) == QuorumView(2, 5)


def test_a_replog_error_asking_a_node_shows_it_as_not_answering(
    layout: LocalCluster, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def view(node: LocalNode, timeout_s: float = 1.0) -> QuorumView:
        if node.node_id == 2:
            raise ReplogError("a metrics address '127.0.0.1:x': bad port")
        return QuorumView(1, 3)

    monkeypatch.setattr(cluster_status, "quorum_view", view)
    assert cluster_status.quorum_views(list(layout.nodes)) == {
        1: QuorumView(1, 3),
        2: None,
        3: QuorumView(1, 3),
    }
    err = capsys.readouterr().err
    assert "Exception in thread" not in err
    assert "replog cluster status: node 2: a metrics address '127.0.0.1:x': bad port" in err


def test_a_broker_nodes_own_state_is_shown_and_its_absence_is_no_error(
    layout: LocalCluster,
) -> None:
    """After a crash a restarted node answers while its broker still waits to register: only
    its own `replog_broker_state` says so."""
    node = layout.node(1)
    with serving_gauges(node, "2.0", "5.0", f"{BROKER_STATE_GAUGE} 1.0\n"):
        assert quorum_view(node) == QuorumView(2, 5, "starting")
    with serving_gauges(node, "2.0", "5.0", f"{BROKER_STATE_GAUGE} 3.0\n"):
        assert quorum_view(node) == QuorumView(2, 5, "running")
    with serving_gauges(node, "2.0", "5.0"):  # not yet served: the node answers all the same
        assert quorum_view(node) == QuorumView(2, 5, None)
    controller_only = dataclasses.replace(node, roles=("controller",))
    with serving_gauges(node, "2.0", "5.0", f"{BROKER_STATE_GAUGE} 3.0\n"):
        assert quorum_view(controller_only) == QuorumView(2, 5, None)


def test_the_broker_state_names_are_the_nodes_metric_values() -> None:
    from replog.quorum.metadata.broker_lifecycle import BROKER_STATE_METRIC

    named = {value: state.value for state, value in BROKER_STATE_METRIC.items()}
    assert {0: "not_running", **named} == BROKER_STATES
