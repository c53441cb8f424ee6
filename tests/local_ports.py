"""Loopback ports for tests that start listeners of their own."""

from __future__ import annotations

import socket

from replog.testing import METRICS_PORT_OFFSET
from replog.testing import free_base_port as free_ports_from

__all__ = ["KAFKA_PORT_OFFSET", "free_base_port", "free_port"]

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
    """A base port p for a local cluster of `count` nodes: p..p+count-1, its metrics ports
    p+100.. and the Kafka ports tests give it, p+200.., all free now and below the kernel's
    ephemeral range (`replog.testing.free_base_port`; seen once in CI: EADDRINUSE on node 3's
    metrics port when a base was inside it)."""
    return free_ports_from(count, offsets=(METRICS_PORT_OFFSET, KAFKA_PORT_OFFSET))
