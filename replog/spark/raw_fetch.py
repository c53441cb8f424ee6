"""Fetch calls whose answer is the serialized FetchResponse, not a parsed message.

Why: the Spark source reads each answer's records where they lie (`fetch_answer_wire`).
`BrokerClient.fetch` parses the answer with the generated classes, which copies the records
into the message, and reading them from it copies them again; here gRPC's identity
deserializer hands over the bytes it received, and nothing else copies them.

Rules (those of `BrokerClient`, which the consumer uses; only the answer's form differs):
- One `RedialingChannel` per broker address, with the broker clients' channel options: calls
  fail fast while a broker is down, and UNAVAILABLE replaces the channel.
- A call's deadline is `timeout_ms` plus the request's `max_wait_ms` (a long poll is not cut
  short by the transport); failed calls raise `grpc.aio.AioRpcError`.
- The client id goes in the `x-client-id` header as `Connections` sends it.
- After `close`, `fetch` raises `ClientClosedError`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import grpc

from replog.client.connections import client_id_metadata
from replog.errors import ClientClosedError
from replog.pb import broker_pb2 as pb
from replog.replication import messages as m
from replog.wire import broker_codec as codec
from replog.wire.broker_client import CHANNEL_OPTIONS
from replog.wire.redialing_channel import RedialingChannel

FETCH_METHOD = f"/{pb.DESCRIPTOR.services_by_name['Broker'].full_name}/Fetch"


class _RawFetchStub:
    """The `Broker` service's Fetch with an identity response deserializer."""

    def __init__(self, channel: grpc.aio.Channel) -> None:
        self.fetch: Callable[..., Awaitable[bytes]] = channel.unary_unary(
            FETCH_METHOD,
            request_serializer=pb.FetchRequest.SerializeToString,
            response_deserializer=None,  # the bytes as received
        )


def _fetch(stub: _RawFetchStub) -> Callable[..., Awaitable[Any]]:
    return stub.fetch


class RawFetchChannels:
    """One client's raw Fetch calls, one channel per broker address (module docstring). Lives
    on one event loop, as its channels do."""

    def __init__(self, *, request_timeout_ms: int, client_id: str) -> None:
        self.request_timeout_ms = request_timeout_ms
        self._metadata = client_id_metadata(client_id)
        self._channels: dict[str, RedialingChannel[_RawFetchStub]] = {}
        self._closed = False

    async def fetch(
        self, address: str, request: m.FetchRequest, *, timeout_ms: int | None = None
    ) -> bytes:
        """The serialized FetchResponse of the broker at `address`."""
        if self._closed:
            raise ClientClosedError("the Spark fetcher is closed: its connections are released")
        channel = self._channels.get(address)
        if channel is None:
            channel = self._channels[address] = RedialingChannel(
                address, _RawFetchStub, CHANNEL_OPTIONS
            )
        # The call's gRPC timeout (a duration): the request timeout plus the long poll's wait.
        call_timeout_ms = (self.request_timeout_ms if timeout_ms is None else timeout_ms) + max(
            0, request.max_wait_ms
        )
        answer: bytes = await channel.call(
            _fetch, codec.fetch_request_to_proto(request), call_timeout_ms / 1000, self._metadata
        )
        return answer

    async def close(self) -> None:
        self._closed = True
        channels, self._channels = self._channels, {}
        for channel in channels.values():
            await channel.close()
