"""`SimRaftLink`: a Raft driver's link to the other quorum nodes over the simulated network,
in place of `RaftTransport` (gRPC and framed TCP): the driver is the real one.

Rules:
- A message of the core goes to its destination's driver as that driver's transport would
  hand it over (`deliver`, the driver's own inbox); a request the network loses is reported
  to the sender's driver as `RequestFailed`, as `RaftTransport` reports a failed call (the
  network decides when, and whether: `network` Rules).
- A closed link sends nothing more and stops listening; a node that crashes closes it, a
  restarted node's new driver makes a new one.
"""

from __future__ import annotations

from collections.abc import Callable

from replog.quorum.raft.config import RaftConfig
from replog.quorum.raft.messages import Message
from replog.server.raft.raft_transport import RequestFailed
from replog.server.runtime.node_tasks import Spawner
from replog.sim.network import SimNetwork

__all__ = ["SimRaftLink", "sim_raft_links"]


class SimRaftLink:
    """One node's side of the Raft traffic over a `SimNetwork` (module docstring)."""

    def __init__(
        self,
        network: SimNetwork,
        node_id: int,
        config: RaftConfig,
        deliver: Callable[[Message], None],
        report_failure: Callable[[RequestFailed], None],
    ) -> None:
        self._network = network
        self.node_id = node_id
        self._timeout_ms = config.request_timeout_ms
        self._report_failure = report_failure
        self._closed = False
        network.up(node_id, self._arrived(deliver))

    def _arrived(self, deliver: Callable[[Message], None]) -> Callable[[object], None]:
        def arrived(message: object) -> None:
            if not self._closed:
                assert isinstance(message, Message)
                deliver(message)

        return arrived

    def send(self, message: Message) -> None:
        if self._closed:
            return
        on_lost = None
        if message.is_request:
            destination = message.destination_id
            correlation_id = message.body.correlation_id

            def on_lost(unreachable: bool) -> None:
                if not self._closed:
                    self._report_failure(RequestFailed(destination, correlation_id, unreachable))

        self._network.send(
            self.node_id,
            message.destination_id,
            message,
            on_lost=on_lost,
            timeout_ms=self._timeout_ms,
        )

    def shut(self) -> None:
        """Stop sending and listening at once (a crash: nothing is awaited)."""
        self._closed = True
        self._network.down(self.node_id)

    async def close(self) -> None:
        self.shut()


def sim_raft_links(network: SimNetwork) -> Callable[..., SimRaftLink]:
    """A `RaftDriver(transport=...)` factory whose links go over `network`."""

    def make(
        node_id: int,
        config: RaftConfig,
        deliver: Callable[[Message], None],
        report_failure: Callable[[RequestFailed], None],
        *,
        tasks: Spawner,
    ) -> SimRaftLink:
        return SimRaftLink(network, node_id, config, deliver, report_failure)

    return make
