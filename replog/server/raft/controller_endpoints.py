"""Where each voter serves Kafka's protocol as a controller: what DescribeCluster names as the
controllers (endpoint type 2) and DescribeQuorum v2 as the voters' listeners.

Each voter knows only its own controller listener (a `listeners` entry named in
`controller.listener.names`); this node asks the others over gRPC
(`RaftQuorum.KafkaControllerEndpoint`, at the address `controller.quorum.voters` gives), as a
Raft peer asks for the Fetch port.

Rules:
- Voters are asked in parallel, each once at most `timeout_s`; an answer is kept for
  `max_age_s` (by the injected monotonic clock), then asked again: a node restarted with an
  edited `listeners` keeps its gRPC address, so only asking again finds its new listener.
- A voter that does not answer is asked again next time and listed meanwhile at its last
  known listener (Kafka lists every controller it knows of, up or not); one never heard from
  is left out, as nothing tells where it serves Kafka's protocol.
- A voter that serves no controller listener answers port 0: it is left out, and that answer
  is not kept (it may restart with one).
- An empty or wildcard host is the host this node reached the voter's gRPC listener at.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable

import grpc

from replog.clock import monotonic_s
from replog.net_address import format_host_port, is_wildcard
from replog.pb import raft_pb2 as pb
from replog.pb import raft_pb2_grpc
from replog.quorum.metadata.records import Endpoint
from replog.quorum.raft.config import VoterAddress
from replog.wire.link_security import grpc_channel

ASK_TIMEOUT_S = 1.0
# How long an answer is believed: a restarted voter's new listener shows after at most this.
MAX_AGE_S = 30.0
# One voter's answer: its endpoint as configured (port 0: none).
Ask = Callable[[VoterAddress, float], Awaitable[pb.KafkaControllerEndpointResponse]]


def endpoint_answer(listener: Endpoint | None) -> pb.KafkaControllerEndpointResponse:
    """What a node answers about its own controller listener (the gRPC servicer's part)."""
    if listener is None:
        return pb.KafkaControllerEndpointResponse()
    host = "" if is_wildcard(listener.host) else listener.host
    return pb.KafkaControllerEndpointResponse(
        listener_name=listener.name, host=host, port=listener.port
    )


async def ask_voter(voter: VoterAddress, timeout_s: float) -> pb.KafkaControllerEndpointResponse:
    """`RaftQuorum.KafkaControllerEndpoint` of `voter`, on a channel of its own."""
    address = format_host_port(voter.host, voter.port)
    async with grpc_channel(address) as channel:
        stub = raft_pb2_grpc.RaftQuorumStub(channel)  # type: ignore[no-untyped-call]
        answer: pb.KafkaControllerEndpointResponse = await stub.KafkaControllerEndpoint(
            pb.KafkaControllerEndpointRequest(), timeout=timeout_s
        )
    return answer


class ControllerEndpoints:
    """The voters' Kafka controller listeners, asked for and remembered (module docstring)."""

    def __init__(
        self,
        voters: Iterable[VoterAddress],
        *,
        ask: Ask = ask_voter,
        timeout_s: float = ASK_TIMEOUT_S,
        max_age_s: float = MAX_AGE_S,
        clock: Callable[[], float] = monotonic_s,
    ) -> None:
        self._voters = sorted(voters, key=lambda v: v.node_id)
        self._ask = ask
        self._timeout_s = timeout_s
        self._max_age_s = max_age_s
        self._clock = clock
        # Voter id -> (its controller listener, when it said so); only listeners are kept.
        self._known: dict[int, tuple[Endpoint, float]] = {}

    async def lookup(self) -> dict[int, Endpoint]:
        """Voter id -> its controller listener, for the voters that serve one and answered
        (now, or last time for one that does not answer now)."""
        now = self._clock()
        due = [v for v in self._voters if not self._fresh(v.node_id, now)]
        if due:
            answers = await asyncio.gather(
                *(self._ask(v, self._timeout_s) for v in due), return_exceptions=True
            )
            for voter, answer in zip(due, answers, strict=True):
                if isinstance(answer, pb.KafkaControllerEndpointResponse):
                    endpoint = _endpoint(voter, answer)
                    if endpoint is None:
                        self._known.pop(voter.node_id, None)
                    else:
                        self._known[voter.node_id] = (endpoint, now)
                elif not isinstance(answer, grpc.RpcError | asyncio.TimeoutError | OSError):
                    raise answer
        return {i: e for i, (e, _) in sorted(self._known.items())}

    def _fresh(self, node_id: int, now: float) -> bool:
        known = self._known.get(node_id)
        return known is not None and now - known[1] < self._max_age_s


def _endpoint(voter: VoterAddress, answer: pb.KafkaControllerEndpointResponse) -> Endpoint | None:
    if not answer.port:
        return None
    return Endpoint(answer.listener_name, answer.host or voter.host, answer.port)
