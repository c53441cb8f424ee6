"""GrpcMarkerChannel: a transaction coordinator's WriteTxnMarkers to the partition leaders, and
a leader's AddPartitionsToTxn to the transaction coordinator (KIP-890), over the Broker gRPC
service (`broker.proto`, `data_plane.broker_service`) of the other broker.

Rules:
- A leader is reached at its first registered endpoint in this broker's metadata image, the
  address the replica fetchers use (`addresses`); one `RedialingChannel` per broker, dialled
  on first use, replaced when the broker registers another address.
- The request carries `request_timeout_ms` (Kafka writes its markers with
  `request.timeout.ms`); the call's deadline adds a margin, so a slow ISR comes back as a
  partition's REQUEST_TIMED_OUT in the answer, not as a failed call.
- Each partition's error crosses as its Kafka error (`txn_marker_codec`,
  `txn_partitions_codec`); the markers' answer is one mapping per marker sent, in order
  (`MarkerChannel`), AddPartitionsToTxn's one mapping of the partitions asked.
- A call that fails as a whole raises a typed error naming the broker: no address
  (NetworkError), the call's gRPC status (UNAVAILABLE and CANCELLED NetworkError,
  DEADLINE_EXCEEDED RequestTimedOutError, other statuses UnknownServerError), or an answer
  without one result per marker or partition (MalformedResponseError); `TxnMarkerSender`
  retries every partition the call carried, a leader's produce answers it.
- The calls themselves go through `BrokerCalls`: gRPC channels (`GrpcBrokerCalls`) unless
  given another transport (the simulator's network, `replog.sim.txn_link`), which raises the
  same typed errors.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol

import grpc

from replog.common.topic_partition import TopicPartitionKey
from replog.coordinator.transaction_markers import TxnMarker
from replog.errors import (
    KafkaError,
    MalformedResponseError,
    NetworkError,
    RequestTimedOutError,
    UnknownServerError,
)
from replog.pb import broker_pb2 as pb
from replog.pb import broker_pb2_grpc
from replog.replication import messages as m
from replog.wire import txn_marker_codec as codec
from replog.wire import txn_partitions_codec
from replog.wire.redialing_channel import RedialingChannel

RPC = "WriteTxnMarkers"
ADD_PARTITIONS_RPC = "AddPartitionsToTxn"
DEADLINE_MARGIN_MS = 5_000  # beyond the request's own timeout, so the leader answers it first

_STATUS_ERRORS: dict[grpc.StatusCode, type[KafkaError]] = {
    grpc.StatusCode.UNAVAILABLE: NetworkError,
    grpc.StatusCode.CANCELLED: NetworkError,
    grpc.StatusCode.DEADLINE_EXCEEDED: RequestTimedOutError,
}


def status_error(code: grpc.StatusCode) -> type[KafkaError]:
    """The typed error of a call that failed with gRPC status `code` (module Rules)."""
    return _STATUS_ERRORS.get(code, UnknownServerError)


class BrokerCalls(Protocol):
    """One unary call of the Broker service to a broker: its answer, or a typed error naming
    the broker (module Rules)."""

    def where(self, broker_id: int) -> str: ...

    def call(self, broker_id: int, rpc: str, request: Any, timeout_s: float) -> Awaitable[Any]: ...

    async def close(self) -> None: ...


class GrpcMarkerChannel:
    """Sends WriteTxnMarkers and AddPartitionsToTxn to a broker's Broker service (module
    Rules); over gRPC to the registered `addresses` unless `calls` is given."""

    def __init__(
        self,
        broker_id: int,
        addresses: Callable[[int], str | None],
        *,
        request_timeout_ms: int,
        calls: BrokerCalls | None = None,
    ) -> None:
        self.broker_id = broker_id
        self._request_timeout_ms = request_timeout_ms
        self._calls = calls or GrpcBrokerCalls(broker_id, addresses)

    async def send(
        self, broker_id: int, markers: Sequence[TxnMarker]
    ) -> list[Mapping[TopicPartitionKey, KafkaError | None]]:
        where = self._calls.where(broker_id)
        request = codec.request_to_proto(
            m.WriteTxnMarkersRequest(
                tuple(
                    m.TxnMarker(
                        producer_id=marker.producer_id,
                        producer_epoch=marker.producer_epoch,
                        committed=marker.commit,
                        coordinator_epoch=marker.coordinator_epoch,
                        partitions=marker.partitions,
                        transaction_version=marker.transaction_version,
                    )
                    for marker in markers
                ),
                timeout_ms=self._request_timeout_ms,
            )
        )
        answer: pb.WriteTxnMarkersResponse = await self._call(broker_id, RPC, request)
        results = codec.response_from_proto(answer, f"{RPC} from {where}").markers
        if len(results) != len(markers):
            raise MalformedResponseError(
                f"{where} answered {RPC} with {len(results)} marker results for "
                f"{len(markers)} markers"
            )
        return [{(p.topic, p.partition): p.error for p in result.partitions} for result in results]

    async def add_partitions(
        self, broker_id: int, request: m.TxnPartitionsRequest
    ) -> dict[TopicPartitionKey, KafkaError | None]:
        """Ask the transaction coordinator at `broker_id` to add (or verify) `request`'s
        partitions: each partition's error, None where it is in the transaction."""
        where = self._calls.where(broker_id)
        answer: pb.AddPartitionsToTxnResponse = await self._call(
            broker_id, ADD_PARTITIONS_RPC, txn_partitions_codec.request_to_proto(request)
        )
        results = txn_partitions_codec.response_from_proto(
            answer, f"{ADD_PARTITIONS_RPC} from {where}"
        ).partitions
        found = {(r.topic, r.partition): r.error for r in results}
        if set(found) != set(request.partitions):
            raise MalformedResponseError(
                f"{where} answered {ADD_PARTITIONS_RPC} for {sorted(found)}, asked for "
                f"{sorted(request.partitions)}"
            )
        return found

    def _call(self, broker_id: int, rpc: str, request: Any) -> Awaitable[Any]:
        timeout_s = (self._request_timeout_ms + DEADLINE_MARGIN_MS) / 1000
        return self._calls.call(broker_id, rpc, request, timeout_s)

    async def close(self) -> None:
        """Close every channel (calls in flight end)."""
        await self._calls.close()


class GrpcBrokerCalls:
    """`BrokerCalls` over gRPC: one `RedialingChannel` per broker (module Rules)."""

    def __init__(self, broker_id: int, addresses: Callable[[int], str | None]) -> None:
        self.broker_id = broker_id
        self._addresses = addresses
        self._channels: dict[int, RedialingChannel[broker_pb2_grpc.BrokerStub]] = {}
        self._replaced: list[RedialingChannel[broker_pb2_grpc.BrokerStub]] = []

    def where(self, broker_id: int) -> str:
        return f"broker {broker_id} at {self._channel(broker_id).address}"

    async def call(self, broker_id: int, rpc: str, request: Any, timeout_s: float) -> Any:
        channel = self._channel(broker_id)
        where = f"broker {broker_id} at {channel.address}"
        try:
            return await channel.call_rpc(rpc, request, timeout_s)
        except grpc.aio.AioRpcError as exc:
            code = exc.code()
            error_type = status_error(code)
            raise error_type(f"{where}: {rpc} failed: {code.name}: {exc.details()}") from None

    def _channel(self, broker_id: int) -> RedialingChannel[broker_pb2_grpc.BrokerStub]:
        address = self._addresses(broker_id)
        if address is None:
            raise NetworkError(
                f"broker {self.broker_id}: broker {broker_id} has no registered address for {RPC}"
            )
        channel = self._channels.get(broker_id)
        if channel is not None and channel.address == address:
            return channel
        if channel is not None:
            self._replaced.append(channel)
        channel = self._channels[broker_id] = RedialingChannel(
            address,
            broker_pb2_grpc.BrokerStub,
            (),
            peer="broker",
            service=pb.DESCRIPTOR.services_by_name["Broker"],
        )
        return channel

    async def close(self) -> None:
        """Close every channel (calls in flight end)."""
        channels = [*self._channels.values(), *self._replaced]
        self._channels.clear()
        self._replaced.clear()
        for channel in channels:
            await channel.close()
