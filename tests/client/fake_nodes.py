"""What the consumer's and the producer's in-process fake clusters (`consumer_fakes`,
`producer_fakes`) share: node n at `node{n}:9092`, installing a cluster in place of the
client's `Connections`, lost-connection failures (a Kafka connection's, a coordinator call's),
and waking a waiter on its own loop."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import grpc
import pytest

from replog.client import cluster_metadata as cluster_metadata_module
from replog.errors import NetworkError


class FakeNodes:
    """Mixed into a fake cluster that has `nodes` and builds its `connections()`."""

    nodes: int

    def address(self, node: int) -> str:
        return f"node{node}:9092"

    def node_of(self, address: str) -> int:
        return int(address.split(":")[0].removeprefix("node"))

    @property
    def bootstrap(self) -> str:
        return ",".join(self.address(n) for n in range(self.nodes))

    def connections(self) -> Any:
        raise NotImplementedError

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Make every client built from now on talk to this cluster."""
        monkeypatch.setattr(cluster_metadata_module, "Connections", lambda **_: self.connections())


def unavailable(details: str) -> NetworkError:
    """What a client's Kafka connection to a broker that is gone raises."""
    return NetworkError(details)


def grpc_unavailable(details: str) -> grpc.aio.AioRpcError:
    """What a coordinator call (gRPC) to a broker that is gone raises."""
    return grpc.aio.AioRpcError(
        grpc.StatusCode.UNAVAILABLE, grpc.aio.Metadata(), grpc.aio.Metadata(), details=details
    )


def call_on(loop: asyncio.AbstractEventLoop, fn: Callable[[], None]) -> None:
    """Run `fn` on `loop`: now when called on it, else soon (safe from any thread); not at all
    once the loop is closed."""
    if loop.is_closed():
        return
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        fn()
    else:
        loop.call_soon_threadsafe(fn)
