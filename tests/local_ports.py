"""Loopback ports for tests that start listeners of their own."""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping

from replog.cli.local_cluster import DERIVED_KAFKA_PORT_OFFSET
from replog.testing import METRICS_PORT_OFFSET
from replog.testing import free_base_port as free_ports_from

__all__ = [
    "KAFKA_CONTROLLER_PORT_OFFSET",
    "KAFKA_PORT_OFFSET",
    "free_base_port",
    "free_port",
    "free_ports_in",
]

# Tests start local clusters with Kafka listeners here, never on the default 9092, which
# concurrent test runs would share: base + 200, where `cluster start --base-port` alone puts
# them (`local_cluster.kafka_base_port_for`); their controllers' Kafka listeners are 100 above
# those (`local_cluster.KAFKA_CONTROLLER_PORT_OFFSET`).
KAFKA_PORT_OFFSET = DERIVED_KAFKA_PORT_OFFSET
KAFKA_CONTROLLER_PORT_OFFSET = KAFKA_PORT_OFFSET + 100


def free_port() -> int:
    """A port nobody listens on (bound, then closed): connecting to it is refused, and a
    listener started next can usually take it."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def free_ports_in(ports: range, count: int) -> list[int]:
    """The first `count` ports of `ports` nobody listens on now (a test's own range)."""
    found = []
    for port in ports:
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
        found.append(port)
        if len(found) == count:
            return found
    raise AssertionError(f"no {count} free ports in {ports}")


# Where local clusters' ports lie: below the kernel's ephemeral range (`free_base_port`).
CLUSTER_PORTS = (10_000, 32_768)


def free_base_port(count: int) -> int:
    """A base port p for a local cluster of `count` nodes: p..p+count-1, its metrics ports
    p+100.. and the Kafka ports tests give it, p+200.. (controllers' p+300..), all free now,
    below the kernel's ephemeral range and inside this xdist worker's stripe (`worker_stripe`)."""
    return free_ports_from(
        count,
        offsets=(METRICS_PORT_OFFSET, KAFKA_PORT_OFFSET, KAFKA_CONTROLLER_PORT_OFFSET),
        within=worker_stripe(os.environ),
    )


def worker_stripe(environ: Mapping[str, str]) -> tuple[int, int]:
    """This pytest-xdist worker's share of CLUSTER_PORTS (all of it outside xdist): workers
    that picked ports from one range each checked them free before either bound them, and
    once started a cluster on the other's metrics ports."""
    low, high = CLUSTER_PORTS
    worker, workers = environ.get("PYTEST_XDIST_WORKER"), environ.get("PYTEST_XDIST_WORKER_COUNT")
    if not worker or not workers:
        return low, high
    index, size = int(worker.removeprefix("gw")), (high - low) // int(workers)
    return low + index * size, low + (index + 1) * size
