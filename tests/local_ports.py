"""Loopback ports for tests that start listeners of their own."""

from __future__ import annotations

import socket

from replog.testing import free_base_port

__all__ = ["free_base_port", "free_port"]


def free_port() -> int:
    """A port nobody listens on (bound, then closed): connecting to it is refused, and a
    listener started next can usually take it."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port
