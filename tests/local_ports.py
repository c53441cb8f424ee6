"""Loopback ports for tests that start listeners of their own."""

from __future__ import annotations

import contextlib
import random
import socket

from replog.cli.local_cluster import METRICS_PORT_OFFSET

# Tests start local clusters with Kafka listeners here (`--kafka-base-port base + 200`), never
# on the default 9092, which concurrent test runs would share.
KAFKA_PORT_OFFSET = 200


def free_port() -> int:
    """A port nobody listens on (bound, then closed): connecting to it is refused, and a
    listener started next can usually take it."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def free_base_port(count: int) -> int:
    """A port p such that p..p+count-1 are all free now, and so are a local cluster's metrics
    ports p+100..p+100+count-1 (`local_cluster`) and the Kafka ports tests give them,
    p+200..p+200+count-1, all below the kernel's ephemeral range: inside
    it, the first nodes' outgoing connections may take a later node's port before that node
    binds it (seen once in CI: EADDRINUSE on node 3's metrics port)."""
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        ephemeral_low = int(f.read().split()[0])
    for _ in range(200):
        base = random.randrange(10_000, ephemeral_low - KAFKA_PORT_OFFSET - count)
        metrics, kafka = base + METRICS_PORT_OFFSET, base + KAFKA_PORT_OFFSET
        ports = [*range(base, base + count), *range(metrics, metrics + count)]
        with contextlib.ExitStack() as held:
            try:
                for port in [*ports, *range(kafka, kafka + count)]:
                    probe = held.enter_context(socket.socket())
                    probe.bind(("127.0.0.1", port))
            except OSError:
                continue
        return base
    raise RuntimeError(f"no {count} free ports (and their metrics ports) below {ephemeral_low}")
