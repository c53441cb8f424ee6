"""The `jetstream` system of `replog bench`: a 3-node NATS JetStream cluster on loopback,
driven by a compiled Go driver (bench/jetstream/main.go, `jsbench`), so that the servers and
not a Python client are the limit.

`bench/jetstream/build.sh` builds `jsbench` (github.com/nats-io/nats.go) and nats-server
(github.com/nats-io/nats-server/v2, pinned there) from the Go module proxy into
~/.cache/replog-bench/jetstream, once; `start` runs it, writes each node's config (JetStream
on, file storage in the work directory, a route to every other node), starts the three
servers and waits until each one's /healthz answers ok (JetStream's meta group has a leader).

Matched settings: a Kafka partition is a JetStream stream (the unit JetStream replicates and
elects a leader for: `runner.stream_name`), with 3 replicas and file storage; a publish is
acknowledged once a quorum of the stream's replicas has it (JetStream's only mode, like
acks=all with min.insync.replicas=2 on 3 replicas); no fsync per message (JetStream's default
syncs every 2 minutes). Producers publish asynchronously with at most `runner.PUBLISH_WINDOW`
records awaiting their acknowledgement; consumers are ordered consumers reading from the start.
A metadata run's admin processes are `jsbench` too (its admin role): a request of T topics of P
partitions is T x P stream creates in flight together, answered when every stream's new leader
has answered its create (JetStream has no batch create, and answers a clustered create once the
meta group committed the stream and the stream's group elected a leader).

Rules: as every system (`systems`): a failure to build or start is a `BenchSystemError` naming
the step and the logs; `stop` stops every server started, SIGKILL after `STOP_TIMEOUT_S`. The
streams of a topic this system did not create (a metadata run's, made by its admin processes
with a partition count only they knew) are found by name when the topic is deleted.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path

from replog.cli.bench.drivers import REPLICATION_FACTOR
from replog.cli.bench.pinning import taskset
from replog.cli.bench.processes import run_role
from replog.cli.bench.runner import PUBLISH_WINDOW, stream_name
from replog.errors import BenchSystemError

NODES = 3
BUILD_TIMEOUT_S = 900.0  # the first build compiles nats-server
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0
ADMIN_TIMEOUT_S = 90.0
CLUSTER_PORT_OFFSET = 100
MONITOR_PORT_OFFSET = 200


def build_script() -> str:
    """bench/jetstream/build.sh of the checkout replog runs from."""
    return str(Path(__file__).resolve().parents[3] / "bench" / "jetstream" / "build.sh")


def node_config(node: int, directory: str, base_port: int) -> str:
    """nats-server's config for node `node` (1-based) of the cluster at `base_port`."""
    routes = ", ".join(
        f"nats-route://127.0.0.1:{base_port + CLUSTER_PORT_OFFSET + i}" for i in range(NODES)
    )
    store = os.path.join(directory, f"n{node}")
    return (
        f"server_name: n{node}\n"
        f"listen: 127.0.0.1:{base_port + node - 1}\n"
        f"http: 127.0.0.1:{base_port + MONITOR_PORT_OFFSET + node - 1}\n"
        f'jetstream {{\n  store_dir: "{store}"\n}}\n'
        f"cluster {{\n  name: replog-bench\n"
        f"  listen: 127.0.0.1:{base_port + CLUSTER_PORT_OFFSET + node - 1}\n"
        f"  routes: [{routes}]\n}}\n"
    )


class JetStreamSystem:
    name = "jetstream"
    driver = "jetstream"

    def __init__(self, directory: str, base_port: int, server_cpus: str | None = None) -> None:
        self.directory = directory
        self.base_port = base_port
        self.server_cpus = server_cpus
        self.bootstrap_servers = ""
        self.program: Sequence[str] = ()
        self._bin = ""
        self._servers: dict[int, subprocess.Popen[bytes]] = {}
        self._killed: int | None = None
        self._partitions: dict[str, int] = {}  # topic -> partitions (streams) it was made with

    def _build(self) -> str:
        script = build_script()
        if not os.path.exists(script):
            raise BenchSystemError(
                f"jetstream: {script} not found: run `replog bench` from a replog checkout"
            )
        try:
            done = subprocess.run(
                ["bash", script],
                capture_output=True,
                text=True,
                timeout=BUILD_TIMEOUT_S,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise BenchSystemError(f"jetstream: {script} took over {BUILD_TIMEOUT_S:g} s") from None
        if done.returncode != 0:
            raise BenchSystemError(
                f"jetstream: {script} failed (exit {done.returncode}): {done.stderr[-2000:]}"
            )
        return done.stdout.strip().splitlines()[-1]

    def _log(self, node: int) -> str:
        return os.path.join(self.directory, f"n{node}.log")

    def _spawn(self, node: int) -> None:
        config = os.path.join(self.directory, f"n{node}.conf")
        with open(self._log(node), "ab") as log:
            self._servers[node] = subprocess.Popen(
                [*taskset(self.server_cpus), os.path.join(self._bin, "nats-server"), "-c", config],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def _wait_healthy(self, nodes: Sequence[int]) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        for node in nodes:
            url = f"http://127.0.0.1:{self.base_port + MONITOR_PORT_OFFSET + node - 1}/healthz"
            while True:
                with contextlib.suppress(OSError), urllib.request.urlopen(url, timeout=2) as answer:
                    if answer.status == 200:
                        break
                if self._servers[node].poll() is not None or time.monotonic() > deadline:
                    raise BenchSystemError(
                        f"jetstream: node {node} did not become healthy ({url}); its log: "
                        f"{self._log(node)}"
                    )
                time.sleep(0.2)

    def start(self) -> None:
        self._bin = self._build()
        self.program = (os.path.join(self._bin, "jsbench"),)
        shutil.rmtree(self.directory, ignore_errors=True)
        os.makedirs(self.directory)
        for node in range(1, NODES + 1):
            with open(os.path.join(self.directory, f"n{node}.conf"), "w", encoding="utf-8") as f:
                f.write(node_config(node, self.directory, self.base_port))
            self._spawn(node)
        try:
            self._wait_healthy(range(1, NODES + 1))
        except BenchSystemError:
            self.stop()
            raise
        self.bootstrap_servers = ",".join(
            f"nats://127.0.0.1:{self.base_port + i}" for i in range(NODES)
        )

    def _admin(
        self, role: str, names: Sequence[str], topics: Sequence[str] = ()
    ) -> dict[str, object]:
        task = {
            "role": role,
            "servers": self.bootstrap_servers,
            "streams": list(names),
            "topics": list(topics),
            "replicas": REPLICATION_FACTOR,
        }
        return run_role(self.program, task, self.directory, ADMIN_TIMEOUT_S)

    def _streams(self, names: Sequence[str]) -> list[str]:
        return [stream_name(t, p) for t in names for p in range(self._partitions.get(t, 0))]

    def create_topics(self, names: Sequence[str], partitions: int) -> None:
        self._partitions.update(dict.fromkeys(names, partitions))
        self._admin("create", self._streams(names))

    def delete_topics(self, names: Sequence[str]) -> None:
        # The driver lists the streams of the topics whose partitions this system never knew.
        unknown = [name for name in names if name not in self._partitions]
        try:
            self._admin("delete", self._streams(names), topics=unknown)
        except BenchSystemError as exc:
            print(f"jetstream: deleting the run's streams failed: {exc}", flush=True)
        for name in names:
            self._partitions.pop(name, None)

    def kill_leader(self, topic: str) -> int:
        leader = str(self._admin("leader", [stream_name(topic, 0)])["leader"])
        node = int(leader.removeprefix("n"))
        server = self._servers[node]
        server.kill()
        server.wait(10)
        self._killed = node
        return node

    def restart_killed(self) -> None:
        node, self._killed = self._killed, None
        if node is not None:
            self._spawn(node)
            self._wait_healthy([node])

    def server_pids(self) -> list[int]:
        return [server.pid for server in self._servers.values() if server.poll() is None]

    def stop(self) -> None:
        servers, self._servers = self._servers, {}
        for server in servers.values():
            if server.poll() is None:
                server.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT_S
        for server in servers.values():
            try:
                server.wait(max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait(10)

    def describe(self) -> dict[str, str]:
        version = ""
        if self._bin:
            with contextlib.suppress(OSError, subprocess.SubprocessError):
                version = subprocess.run(
                    [os.path.join(self._bin, "nats-server"), "--version"],
                    capture_output=True,
                    text=True,
                    timeout=10,
                    check=False,
                ).stdout.strip()
        return {
            "system": self.name,
            "version": version or "nats-server",
            "nodes": f"{NODES} JetStream servers, loopback; a partition is an R3 stream",
            "client": f"jsbench (Go, nats.go), async publish window {PUBLISH_WINDOW}, "
            "ordered consumers; metadata: a request's stream creates in flight together",
            "server_cpus": self.server_cpus or "",
        }
