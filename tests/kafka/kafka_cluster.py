"""A real three-node cluster (`replog node` processes, each broker and controller) with a Kafka
PLAINTEXT listener on every node, for the tests that drive it with real Kafka clients.

Nodes are started from `server.properties` files, as an operator would; each runs in its own
process group, so `kill` is a kill -9 of the node and `stop` leaves nothing running.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from replog.admin.controller_client import ControllerClient
from replog.admin.controller_results import NewTopic
from replog.errors import ReplogError, TopicAlreadyExistsError
from tests.eventually import wait_until
from tests.local_ports import free_base_port

# Short enough that a killed leader is fenced and replaced within a few seconds.
BROKER_SESSION_TIMEOUT_MS = 3000


@dataclass
class KafkaNode:
    node_id: int
    grpc_port: int
    kafka_port: int
    directory: Path
    process: subprocess.Popen[bytes] | None = None

    @property
    def log(self) -> Path:
        return self.directory / "node.log"


class KafkaCluster:
    def __init__(self, root: Path, node_count: int = 3) -> None:
        base = free_base_port(2 * node_count)
        self.nodes = {
            i: KafkaNode(i, base + i - 1, base + node_count + i - 1, root / f"node-{i}")
            for i in range(1, node_count + 1)
        }
        voters = ",".join(f"{n.node_id}@127.0.0.1:{n.grpc_port}" for n in self.nodes.values())
        for node in self.nodes.values():
            node.directory.mkdir(parents=True)
            properties = {
                "process.roles": "broker,controller",
                "node.id": str(node.node_id),
                "cluster.id": "kafka-clients-test",
                "controller.quorum.voters": voters,
                "listeners": (
                    f"CONTROLLER://127.0.0.1:{node.grpc_port},"
                    f"PLAINTEXT://127.0.0.1:{node.kafka_port}"
                ),
                "log.dirs": str(node.directory / "data"),
                "broker.session.timeout.ms": str(BROKER_SESSION_TIMEOUT_MS),
                "broker.heartbeat.interval.ms": "500",
            }
            (node.directory / "server.properties").write_text(
                "".join(f"{k}={v}\n" for k, v in properties.items())
            )

    @property
    def bootstrap(self) -> str:
        """`bootstrap.servers` of every client, replog's own included: every node's Kafka
        listener (the gRPC ports are the nodes' internal listener and the admin's)."""
        return ",".join(f"127.0.0.1:{n.kafka_port}" for n in self.nodes.values())

    def alive(self) -> list[KafkaNode]:
        return [n for n in self.nodes.values() if n.process and n.process.poll() is None]

    def start(self, timeout_s: float = 60) -> None:
        for node in self.nodes.values():
            with node.log.open("ab") as out:
                node.process = subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "replog.cli.main",
                        "node",
                        "--config",
                        str(node.directory / "server.properties"),
                    ],
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    env={**os.environ, "PYTHONUNBUFFERED": "1"},
                    start_new_session=True,
                )

        def unfenced() -> bool:
            for node in self.nodes.values():
                assert node.process is not None and node.process.poll() is None, node.log.read_text(
                    errors="replace"
                )[-3000:]
            try:
                with self.admin() as admin:
                    brokers = admin.describe_cluster(timeout_s=2).brokers
            except ReplogError:
                return False
            return len([b for b in brokers if not b.fenced]) == len(self.nodes)

        wait_until(unfenced, f"{len(self.nodes)} unfenced brokers", timeout_s=timeout_s)

    def admin(self) -> ControllerClient:
        return ControllerClient(
            [f"127.0.0.1:{n.grpc_port}" for n in self.alive()], default_timeout_s=10
        )

    def create_topic(self, name: str, partitions: int = 1, replication_factor: int = 3) -> None:
        deadline = time.monotonic() + 30
        with self.admin() as admin:
            while True:
                (created,) = admin.create_topics([NewTopic(name, partitions, replication_factor)])
                if created.error is None or isinstance(created.error, TopicAlreadyExistsError):
                    break
                assert time.monotonic() < deadline, f"creating {name}: {created.error!r}"
                time.sleep(0.2)
        wait_until(
            lambda: all(leader is not None for leader in self.leaders(name, partitions).values()),
            f"a leader for every partition of {name}",
            timeout_s=30,
        )

    def leaders(self, topic: str, partitions: int) -> dict[int, int | None]:
        """Partition -> leader, as the controller sees it (None: none, or no answer)."""
        try:
            with self.admin() as admin:
                (found,) = admin.metadata([topic]).topics
        except (ReplogError, ValueError):
            return dict.fromkeys(range(partitions))
        leaders: dict[int, int | None] = dict.fromkeys(range(partitions))
        for p in found.partitions:
            leaders[p.partition] = p.leader
        return leaders

    def kill(self, node_id: int) -> None:
        """kill -9 of the node (its whole process group)."""
        process = self.nodes[node_id].process
        assert process is not None
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)

    def stop(self) -> None:
        for node in self.nodes.values():
            if node.process is not None and node.process.poll() is None:
                self.kill(node.node_id)
