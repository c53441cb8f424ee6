"""The local cluster `replog demo` runs on: started, one node killed and restarted, stopped.

A thin shell over `replog cluster`'s functions (`replog/cli/cluster.py`, `node_processes.py`,
`local_cluster.py`), called in this process: the same files, node processes and pid files as
`replog cluster start`, so `replog cluster status --data-dir DIR` works on the demo's cluster
while it runs (and after `replog demo --keep`).

Rules:
- The directory is wiped at the start, but only if it is a stopped cluster's directory (it
  holds `cluster.json` and no node of it runs) or empty: the demo never deletes a directory
  it did not make, nor a running cluster.
- Brokers are fenced 3 s after their last heartbeat (Kafka: 9 s), so the killed leader leaves
  the ISRs and its partitions get a new leader within seconds.
- Every broker has a Kafka listener at base port + 200 + i - 1 (its controller's at 100
  above), as `replog cluster start --base-port` places them (`kafka_base_port_for`): the
  demo's clients and Spark bootstrap from those (`bootstrap`), as every client does; the base
  port's own listeners are the cluster's internal ones.
- `stop` stops every node that runs, whatever state the demo is in; it is safe to call twice.
"""

from __future__ import annotations

import os
import shutil

from replog.cli.cluster import check_ports_free, wait_until_up
from replog.cli.demo_command import NODE_COUNT
from replog.cli.local_cluster import KAFKA_LISTENER, LocalCluster, kafka_base_port_for
from replog.cli.node_processes import (
    exit_status,
    kill_and_wait,
    log_tails,
    remove_pid_file,
    running_node_ids,
    running_pid,
    spawn,
    stop_nodes,
)
from replog.errors import ReplogError

SERVER_PROPERTIES = {
    "broker.session.timeout.ms": "3000",
    "broker.heartbeat.interval.ms": "500",
}
STOP_TIMEOUT_S = 10.0


class DemoCluster:
    def __init__(self, directory: str, base_port: int) -> None:
        self.directory = os.path.realpath(directory)
        self.base_port = base_port
        self.layout: LocalCluster | None = None
        self.pids: dict[int, int] = {}

    @property
    def bootstrap(self) -> str:
        """The brokers' Kafka listeners, what the demo's clients connect to."""
        assert self.layout is not None
        return ",".join(node.listeners[KAFKA_LISTENER] for node in self.layout.nodes)

    def prepare(self) -> None:
        """Wipe the directory (module rules) and write the new cluster's files."""
        _wipe(self.directory)
        layout = LocalCluster.plan(
            self.directory,
            NODE_COUNT,
            self.base_port,
            kafka_base_port=kafka_base_port_for(self.base_port, None),
        )
        check_ports_free(layout.nodes)
        layout.write(SERVER_PROPERTIES)
        self.layout = layout

    def start(self, timeout_s: float = 60) -> str:
        """Start every node; wait for a quorum leader and every broker unfenced."""
        assert self.layout is not None
        for node in self.layout.nodes:
            self.pids[node.node_id] = spawn(node)
        try:
            leader = wait_until_up(self.layout, self.pids, timeout_s)  # brokers unfenced too
        except ReplogError as exc:
            raise ReplogError(f"{exc}\n{log_tails(self.layout.nodes)}") from None
        return f"quorum leader: node {leader.leader_id} (epoch {leader.leader_epoch})"

    def check_alive(self) -> None:
        """Raise if a node the demo did not kill has exited."""
        assert self.layout is not None
        for node_id, pid in self.pids.items():
            code = exit_status(pid)
            if code is not None:
                node = self.layout.node(node_id)
                raise ReplogError(
                    f"node {node_id} (pid {pid}) exited with code {code}\n{log_tails([node])}"
                )

    def kill(self, node_id: int) -> int:
        """SIGKILL one node and wait until it is gone; its pid."""
        assert self.layout is not None
        node = self.layout.node(node_id)
        pid = self.pids.pop(node_id)
        kill_and_wait(node, pid)
        remove_pid_file(node)
        return pid

    def restart(self, node_id: int) -> int:
        """Start a killed node again with its data; its new pid (it recovers in the
        background: the demo watches the ISRs to see it back)."""
        assert self.layout is not None
        node = self.layout.node(node_id)
        check_ports_free([node])
        pid = self.pids[node_id] = spawn(node)
        return pid

    def stop(self) -> list[str]:
        """Stop every running node (SIGTERM, then SIGKILL); one line per node."""
        if self.layout is None:
            return []
        running = []
        for node in self.layout.nodes:
            pid = running_pid(node)
            if pid is not None:
                running.append((node, pid))
        self.pids.clear()
        return stop_nodes(running, STOP_TIMEOUT_S)


def _wipe(directory: str) -> None:
    if not os.path.exists(directory):
        return
    if LocalCluster.exists(directory):
        existing = LocalCluster.load(directory)
        alive = running_node_ids(existing)
        if alive:
            raise ReplogError(
                f"a cluster is running in {directory} (nodes {', '.join(map(str, alive))}); "
                f"stop it first with `replog cluster stop --data-dir {directory}`"
            )
    elif os.listdir(directory):
        raise ReplogError(
            f"{directory} is not empty and holds no cluster.json: the demo wipes its data "
            "directory, so it only takes an empty one or one of its own (choose another "
            "--data-dir)"
        )
    shutil.rmtree(directory)
