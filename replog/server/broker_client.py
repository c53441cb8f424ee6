"""A small asyncio client of one broker's `Broker` service, in `replication.messages` types.

Used by tests, the benchmark and the replica fetcher; the client library of issue #7 builds on
it. One gRPC channel per client.

Rules:
- Calls fail fast while the channel is down (no wait-for-ready): a dead broker is an error at
  once (`grpc.aio.AioRpcError` UNAVAILABLE), not a wait of a whole timeout. After UNAVAILABLE
  the channel is replaced, so the next call dials afresh instead of failing fast through
  gRPC's reconnect backoff (as the Raft transport does).
- The deadline of a call is `timeout_ms` (default `request_timeout_ms`); a Fetch's adds its
  `max_wait_ms`, and a Produce's or DeleteRecords' the request's own `timeout_ms`, so a long
  poll or an acks=all wait is not cut short by the transport.
- Per-partition errors come back as `KafkaError` instances in the results; only a failed call
  raises (`grpc.aio.AioRpcError`: INVALID_ARGUMENT, RESOURCE_EXHAUSTED, UNAVAILABLE, ...).
  `init_producer_id` has no partitions: it raises the answer's `KafkaError` itself.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from replog.pb import broker_pb2_grpc
from replog.pb import controller_pb2 as controller_pb
from replog.replication import messages as m
from replog.server import broker_codec as codec
from replog.server.redialing_channel import RedialingChannel

REQUEST_TIMEOUT_MS_DEFAULT = 30_000
CHANNEL_OPTIONS = [
    ("grpc.max_send_message_length", 128 * 1024 * 1024),
    ("grpc.max_receive_message_length", 128 * 1024 * 1024),
    ("grpc.keepalive_time_ms", 10_000),
    # Kafka's reconnect.backoff.ms / reconnect.backoff.max.ms (see raft_transport).
    ("grpc.initial_reconnect_backoff_ms", 50),
    ("grpc.min_reconnect_backoff_ms", 50),
    ("grpc.max_reconnect_backoff_ms", 1000),
]

R = TypeVar("R")


class BrokerClient:
    def __init__(
        self,
        address: str,
        *,
        request_timeout_ms: int = REQUEST_TIMEOUT_MS_DEFAULT,
        metadata: Sequence[tuple[str, str]] = (),
    ) -> None:
        self.address = address
        self.request_timeout_ms = request_timeout_ms
        self._metadata = tuple(metadata)
        self._channel = RedialingChannel(
            address,
            broker_pb2_grpc.BrokerStub,
            CHANNEL_OPTIONS,
        )

    def reconnect(self) -> None:
        """Drop the channel: the next call dials again at once."""
        self._channel.reconnect()

    async def _call(
        self,
        method: Callable[[broker_pb2_grpc.BrokerStub], Callable[..., Awaitable[Any]]],
        message: Any,
        timeout_ms: int | None,
        extra_ms: int = 0,
    ) -> Any:
        deadline_ms = (self.request_timeout_ms if timeout_ms is None else timeout_ms) + extra_ms
        return await self._channel.call(method, message, deadline_ms / 1000, self._metadata)

    async def produce(
        self, request: m.ProduceRequest, *, timeout_ms: int | None = None
    ) -> m.ProduceResponse:
        answer = await self._call(
            lambda s: s.Produce,
            codec.produce_request_to_proto(request),
            timeout_ms,
            max(0, request.timeout_ms),
        )
        return codec.produce_response_from_proto(answer)

    async def fetch(
        self, request: m.FetchRequest, *, timeout_ms: int | None = None
    ) -> m.FetchResponse:
        answer = await self._call(
            lambda s: s.Fetch,
            codec.fetch_request_to_proto(request),
            timeout_ms,
            max(0, request.max_wait_ms),
        )
        return codec.fetch_response_from_proto(answer)

    async def list_offsets(
        self, request: m.ListOffsetsRequest, *, timeout_ms: int | None = None
    ) -> m.ListOffsetsResponse:
        answer = await self._call(
            lambda s: s.ListOffsets, codec.list_offsets_request_to_proto(request), timeout_ms
        )
        return codec.list_offsets_response_from_proto(answer)

    async def offsets_for_leader_epoch(
        self, request: m.OffsetsForLeaderEpochRequest, *, timeout_ms: int | None = None
    ) -> m.OffsetsForLeaderEpochResponse:
        answer = await self._call(
            lambda s: s.OffsetsForLeaderEpoch,
            codec.offsets_for_leader_epoch_request_to_proto(request),
            timeout_ms,
        )
        return codec.offsets_for_leader_epoch_response_from_proto(answer)

    async def delete_records(
        self, request: m.DeleteRecordsRequest, *, timeout_ms: int | None = None
    ) -> m.DeleteRecordsResponse:
        answer = await self._call(
            lambda s: s.DeleteRecords,
            codec.delete_records_request_to_proto(request),
            timeout_ms,
            max(0, request.timeout_ms),
        )
        return codec.delete_records_response_from_proto(answer)

    async def metadata(
        self, topics: Sequence[str] | None = None, *, timeout_ms: int | None = None
    ) -> controller_pb.MetadataResponse:
        """The broker's view of the cluster (the message the controller's Metadata answers)."""
        answer: controller_pb.MetadataResponse = await self._call(
            lambda s: s.Metadata,
            controller_pb.MetadataRequest(topics=list(topics or ())),
            timeout_ms,
        )
        return answer

    async def init_producer_id(self, *, timeout_ms: int | None = None) -> tuple[int, int]:
        """A new producer id and its epoch (0) for an idempotent producer.

        Raises the `replog.errors` class of the answer's error (COORDINATOR_LOAD_IN_PROGRESS,
        retriable, while the broker has no ids yet), or `grpc.aio.AioRpcError` for a failed call.
        """
        answer = await self._call(
            lambda s: s.InitProducerId,
            codec.init_producer_id_request_to_proto(m.InitProducerIdRequest()),
            timeout_ms,
        )
        response = codec.init_producer_id_response_from_proto(answer)
        if response.error is not None:
            raise response.error
        return response.producer_id, response.producer_epoch

    async def close(self) -> None:
        await self._channel.close()

    async def __aenter__(self) -> BrokerClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()
