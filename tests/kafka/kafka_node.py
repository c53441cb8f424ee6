"""One real node (`replog node`, broker and controller) with a gRPC listener and a Kafka
PLAINTEXT listener, for the tests that drive it with Kafka clients."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

from replog.admin.controller_client import ControllerClient
from replog.cli.cluster import brokers_not_active
from tests.eventually import wait_until
from tests.local_ports import free_port


class RunningNode:
    def __init__(self, process: subprocess.Popen[bytes], log: Path, grpc: int, kafka: int):
        self.process = process
        self.log = log
        self.grpc_port = grpc
        self.kafka_port = kafka

    @property
    def kafka_address(self) -> str:
        return f"127.0.0.1:{self.kafka_port}"

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")


@contextlib.contextmanager
def running_node(
    root: Path, cluster_id: str, properties: Sequence[str] = ()
) -> Iterator[RunningNode]:
    """A node over `root` with `properties` added to its server.properties, yielded once its
    broker is registered and unfenced (a topic created at once is not refused with "0 active
    brokers"), stopped (SIGTERM, then SIGKILL after 30 s) on exit."""
    grpc_port, kafka_port = free_port(), free_port()
    config = root / "server.properties"
    config.write_text(
        "\n".join(
            [
                "process.roles=broker,controller",
                "node.id=1",
                f"cluster.id={cluster_id}",
                f"controller.quorum.voters=1@127.0.0.1:{grpc_port}",
                f"listeners=CONTROLLER://127.0.0.1:{grpc_port},PLAINTEXT://127.0.0.1:{kafka_port}",
                f"log.dirs={root / 'logs'}",
                *properties,
                "",
            ]
        )
    )
    log = root / "node.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "replog.cli.main", "node", "--config", str(config)],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    try:
        with ControllerClient(f"127.0.0.1:{grpc_port}", default_timeout_s=60) as admin:

            def broker_active() -> bool:
                if process.poll() is not None:
                    raise AssertionError(f"the node exited with code {process.returncode}")
                return brokers_not_active([1], admin) == ""

            wait_until(broker_active, "the node's broker registered and unfenced", timeout_s=60)
        yield RunningNode(process, log, grpc_port, kafka_port)
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
