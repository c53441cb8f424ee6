"""`replog cluster stop` and `replog cluster kill`: signal a local cluster's nodes.

Rules: they import neither gRPC nor the node's runtime (`node_processes`), so they start in the
time of a bare interpreter; a refusal is a `ReplogError` of one line.
"""

from __future__ import annotations

import argparse
import sys

from replog.cli.local_cluster import LocalCluster
from replog.cli.node_processes import kill_and_wait, remove_pid_file, running_pid, stop_nodes
from replog.errors import ReplogError


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
