"""A broker on an ephemeral port (`listeners=PLAINTEXT://127.0.0.1:0`), as an application or a
test embeds one: real node processes, a real client.

- A combined node on a fixed port (the voter) and a broker-only node on port 0: the broker binds,
  then registers the port it bound (Kafka's `withEphemeralPortsCorrected`), so the Metadata a
  client gets from either node names it at that port, never at port 0, and its Kafka listener's
  start-up line names the same port.
- A Producer and a Consumer bootstrapped from the fixed-port node's Kafka listener round-trip
  records through a partition whose only replica is the port-0 broker, whose Kafka listener is
  on port 0 too: they reach it only by dialing the port the metadata gave.
Before: the broker registered port 0 and clients were told to dial it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from client_cluster import produce_and_read_back
from cluster_helpers import node_processes, wait_for

from replog import Admin
from replog.admin.controller_results import NewTopic
from replog.kafka.messages.metadata_response import MetadataResponse, MetadataResponseBroker
from tests.kafka_broker_clients import kafka_broker_client
from tests.local_ports import free_port

pytestmark = pytest.mark.slow

EPHEMERAL_BROKER = 2


@contextlib.contextmanager
def two_nodes(tmp_path: Path) -> Iterator[tuple[str, str, Path]]:
    """Node 1 (controller and broker) on fixed ports, node 2 (broker) on port 0 for both its
    gRPC listener and its Kafka one: node 1's gRPC `host:port`, node 1's Kafka listener (the
    clients' bootstrap), and node 2's log file."""
    port, kafka_port = free_port(), free_port()
    voters = f"1@127.0.0.1:{port}"
    roles_and_listeners = {
        1: (
            "broker,controller",
            f"CONTROLLER://127.0.0.1:{port},PLAINTEXT://127.0.0.1:{kafka_port}",
            "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        ),
        EPHEMERAL_BROKER: (
            "broker",
            "INTERNAL://127.0.0.1:0,PLAINTEXT://127.0.0.1:0",
            "INTERNAL:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        ),
    }
    properties = {
        node_id: {
            "process.roles": roles,
            "node.id": str(node_id),
            "cluster.id": "ephemeral-port-test",
            "controller.quorum.voters": voters,
            "listeners": listeners,
            "listener.security.protocol.map": protocol_map,
            "controller.listener.names": "CONTROLLER",
            "offsets.topic.replication.factor": "1",
        }
        for node_id, (roles, listeners, protocol_map) in roles_and_listeners.items()
    }
    with node_processes(tmp_path, properties) as directories:
        yield (
            f"127.0.0.1:{port}",
            f"127.0.0.1:{kafka_port}",
            directories[EPHEMERAL_BROKER] / "node.log",
        )


def _metadata(address: str) -> MetadataResponse | None:
    """A broker's Kafka Metadata answer (None: it does not answer yet)."""

    async def ask() -> MetadataResponse:
        async with kafka_broker_client(address, request_timeout_ms=2000) as client:
            return await client.metadata()

    try:
        return asyncio.run(ask())
    except Exception:  # not up yet: the test waits and asks again
        return None


def _registered(address: str, broker_id: int) -> MetadataResponseBroker | None:
    answer = _metadata(address)
    if answer is None:
        return None
    return next((b for b in answer.brokers if b.node_id == broker_id), None)


def _wait_registered(
    address: str, broker_id: int, timeout_s: float, what: str
) -> MetadataResponseBroker:
    """`broker_id`'s endpoint once the broker at `address` lists it (unfenced brokers only)."""
    found: list[MetadataResponseBroker] = []

    def listed() -> bool:
        endpoint = _registered(address, broker_id)
        if endpoint is not None:
            found.append(endpoint)
        return endpoint is not None

    wait_for(listed, timeout_s, what)
    return found[-1]


def test_a_broker_on_port_0_registers_its_bound_port_and_serves_clients_there(
    tmp_path: Path,
) -> None:
    with two_nodes(tmp_path) as (_, bootstrap, ephemeral_log):
        endpoint = _wait_registered(
            bootstrap, EPHEMERAL_BROKER, 60, f"broker {EPHEMERAL_BROKER} in node 1's Metadata"
        )
        assert endpoint.host == "127.0.0.1"
        assert endpoint.port != 0, "the broker registered port 0: clients cannot dial it"
        address = f"127.0.0.1:{endpoint.port}"
        # Node 1 lists the broker once the controller unfenced it; the broker opens its
        # listener (and logs it) once it has replayed that itself, a moment later.
        serving = f"Kafka listener PLAINTEXT serving on {address}"
        wait_for(lambda: serving in ephemeral_log.read_text(), 30, "the listener's log line")
        assert serving in ephemeral_log.read_text()
        # The port-0 broker answers there, and describes itself with the same port once it
        # has replayed its own unfencing (it lists unfenced brokers only).
        itself = _wait_registered(
            address, EPHEMERAL_BROKER, 30, f"broker {EPHEMERAL_BROKER} in its own Metadata"
        )
        assert itself.port == endpoint.port

        # The clients dial node 2's Kafka listener only at the port it registered in place of 0.
        topic = "on-the-ephemeral-broker"
        with Admin(bootstrap_servers=bootstrap, request_timeout_ms=30_000) as admin:
            admin.create_topics([NewTopic(topic, assignments={0: [EPHEMERAL_BROKER]})])
        produce_and_read_back(bootstrap, topic, [b"ephemeral-%d" % i for i in range(5)])
