"""A broker on an ephemeral port (`listeners=PLAINTEXT://127.0.0.1:0`), as an application or a
test embeds one: real node processes, a real client.

- A combined node on a fixed port (the voter) and a broker-only node on port 0: the broker binds,
  then registers the port it bound (Kafka's `withEphemeralPortsCorrected`), so the Metadata a
  client gets from either node names it at that port, never at port 0, and the node's start-up
  line names the same port.
- A Producer and a Consumer bootstrapped from the fixed-port node round-trip records through a
  partition whose only replica is the port-0 broker: they reach it only by dialing the port the
  metadata gave.
Before: the broker registered port 0 and clients were told to dial it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from client_cluster import produce_and_read_back
from cluster_helpers import wait_for

from replog import Admin
from replog.admin.controller_results import NewTopic
from replog.pb import controller_pb2 as controller_pb
from replog.server.broker_client import BrokerClient

pytestmark = pytest.mark.slow

EPHEMERAL_BROKER = 2


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextlib.contextmanager
def two_nodes(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """Node 1 (controller and broker) on a fixed port, node 2 (broker) on port 0: node 1's
    `host:port`, and node 2's log file."""
    port = _free_port()
    voters = f"1@127.0.0.1:{port}"
    roles_and_listeners = {
        1: ("broker,controller", f"CONTROLLER://127.0.0.1:{port}"),
        EPHEMERAL_BROKER: ("broker", "PLAINTEXT://127.0.0.1:0"),
    }
    processes = []
    try:
        for node_id, (roles, listeners) in roles_and_listeners.items():
            directory = tmp_path / f"node-{node_id}"
            directory.mkdir()
            config = directory / "server.properties"
            config.write_text(
                "\n".join(
                    [
                        f"process.roles={roles}",
                        f"node.id={node_id}",
                        "cluster.id=ephemeral-port-test",
                        f"controller.quorum.voters={voters}",
                        f"listeners={listeners}",
                        "controller.listener.names=CONTROLLER",
                        f"log.dirs={directory / 'data'}",
                        "offsets.topic.replication.factor=1",
                        "",
                    ]
                )
            )
            with (directory / "node.log").open("w") as log:
                processes.append(
                    subprocess.Popen(
                        [sys.executable, "-m", "replog.cli.main", "node", "--config", str(config)],
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                    )
                )
        yield f"127.0.0.1:{port}", tmp_path / f"node-{EPHEMERAL_BROKER}" / "node.log"
    finally:
        for process in processes:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
        for process in processes:
            process.wait(timeout=10)


def _metadata(address: str) -> controller_pb.MetadataResponse | None:
    """A broker's Metadata answer (None: it does not answer yet)."""

    async def ask() -> controller_pb.MetadataResponse:
        async with BrokerClient(address, request_timeout_ms=2000) as client:
            return await client.metadata()

    try:
        return asyncio.run(ask())
    except Exception:  # not up yet: the test waits and asks again
        return None


def _registered(address: str, broker_id: int) -> controller_pb.BrokerEndpoint | None:
    answer = _metadata(address)
    if answer is None:
        return None
    return next((b for b in answer.brokers if b.broker_id == broker_id), None)


def test_a_broker_on_port_0_registers_its_bound_port_and_serves_clients_there(
    tmp_path: Path,
) -> None:
    with two_nodes(tmp_path) as (bootstrap, ephemeral_log):
        found: list[controller_pb.BrokerEndpoint] = []

        def registered_and_unfenced() -> bool:
            endpoint = _registered(bootstrap, EPHEMERAL_BROKER)
            if endpoint is not None:
                found.append(endpoint)
            return endpoint is not None

        wait_for(registered_and_unfenced, 60, f"broker {EPHEMERAL_BROKER} in node 1's Metadata")
        endpoint = found[-1]
        assert endpoint.host == "127.0.0.1"
        assert endpoint.port != 0, "the broker registered port 0: clients cannot dial it"
        address = f"127.0.0.1:{endpoint.port}"
        assert f"replog node {EPHEMERAL_BROKER} (broker) serving on {address}" in (
            ephemeral_log.read_text()
        )
        # The port-0 broker answers there, and describes itself with the same port once it
        # has replayed its own unfencing (it lists unfenced brokers only).
        itself: list[controller_pb.BrokerEndpoint] = []

        def answers_for_itself() -> bool:
            seen = _registered(address, EPHEMERAL_BROKER)
            if seen is not None:
                itself.append(seen)
            return seen is not None

        wait_for(answers_for_itself, 30, f"broker {EPHEMERAL_BROKER} in its own Metadata")
        assert itself[-1].port == endpoint.port

        topic = "on-the-ephemeral-broker"
        with Admin(bootstrap_servers=bootstrap, request_timeout_ms=30_000) as admin:
            admin.create_topics([NewTopic(topic, assignments={0: [EPHEMERAL_BROKER]})])
        produce_and_read_back(bootstrap, topic, [b"ephemeral-%d" % i for i in range(5)])
