"""WriteTxnMarkers' two doors, one call: Kafka's API 27 on the Kafka listener
(`kafka_txn_marker_apis`) and the Broker gRPC service (`broker_service`, its codec
`txn_marker_codec`) both reach `BrokerCores.write_txn_markers` and answer per marker, topic and
partition with Kafka's codes."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from replog.errors import (
    InvalidProducerEpochError,
    NotLeaderOrFollowerError,
    RequestRefusedError,
    UnknownServerError,
)
from replog.kafka.connection import KafkaRequest
from replog.kafka.messages.request_header import RequestHeader
from replog.kafka.messages.write_txn_markers_request import (
    WritableTxnMarker,
    WritableTxnMarkerTopic,
    WriteTxnMarkersRequest,
)
from replog.replication import messages as m
from replog.server.data_plane.broker_cores import BrokerCores
from replog.server.data_plane.broker_service import BrokerService
from replog.server.kafka.kafka_txn_marker_apis import KafkaTxnMarkerApis
from replog.testing import ManualClock
from replog.wire import txn_marker_codec as codec
from tests.server.data_plane.test_partition_txn_markers import txn
from tests.server.data_plane.test_replica_manager import (
    DONE_S,
    produce,
    replicate,
    settle,
    two_nodes,
)


def kafka_request(body: WriteTxnMarkersRequest, version: int) -> KafkaRequest:
    header = RequestHeader(request_api_key=27, request_api_version=version, correlation_id=1)
    return KafkaRequest(0, header, body, 0)


def wire_marker(
    producer_id: int, epoch: int, topics: dict[str, list[int]], version: int = 0
) -> WritableTxnMarker:
    return WritableTxnMarker(
        producer_id=producer_id,
        producer_epoch=epoch,
        transaction_result=True,
        topics=[WritableTxnMarkerTopic(name=n, partition_indexes=p) for n, p in topics.items()],
        coordinator_epoch=0,
        transaction_version=version,
    )


@pytest.mark.asyncio
async def test_the_kafka_listener_writes_markers_through_the_broker_core(tmp_path: Path) -> None:
    leader, follower, _ = two_nodes(tmp_path, ManualClock())
    await produce(leader, txn(7, 0, epoch=1))
    await produce(leader, txn(8, 0, epoch=1))
    apis = KafkaTxnMarkerApis(1, BrokerCores(1, replica_manager=leader.rm))
    body = WriteTxnMarkersRequest(
        markers=[
            wire_marker(7, 1, {"t": [0], "gone": [3]}),
            wire_marker(8, 1, {"t": [0]}, version=2),  # version 2 needs a bumped epoch
        ]
    )
    task = asyncio.ensure_future(apis.handle(kafka_request(body, 2), "PLAINTEXT"))
    await settle()
    await replicate(follower, leader)
    await replicate(follower, leader)
    answer = await asyncio.wait_for(task, DONE_S)
    codes = [
        (marker.producer_id, topic.name, p.partition_index, p.error_code)
        for marker in answer.markers
        for topic in marker.topics
        for p in topic.partitions
    ]
    assert codes == [(7, "t", 0, 0), (7, "gone", 3, 3), (8, "t", 0, 47)]
    assert KafkaTxnMarkerApis.served == {27: (1, 2)}
    with pytest.raises(RequestRefusedError, match="not serving data requests"):
        await KafkaTxnMarkerApis(1, BrokerCores(1)).handle(kafka_request(body, 1), "PLAINTEXT")


class Context:
    """A grpc.aio servicer context with `remaining_s` left of its deadline."""

    def __init__(self, remaining_s: float | None) -> None:
        self.remaining_s = remaining_s

    def time_remaining(self) -> float | None:
        return self.remaining_s


@pytest.mark.asyncio
async def test_the_broker_service_answers_the_same_call_within_the_callers_deadline(
    tmp_path: Path,
) -> None:
    clock = ManualClock()
    leader, follower, _ = two_nodes(tmp_path, clock)
    await produce(leader, txn(7, 0))
    service = BrokerService(2, BrokerCores(2, replica_manager=follower.rm))
    request = m.WriteTxnMarkersRequest((m.TxnMarker(7, 0, False, 0, (("t", 0),)),), 0)
    answer: Any = await service.WriteTxnMarkers(codec.request_to_proto(request), Context(5.0))
    ((result,),) = [r.partitions for r in codec.response_from_proto(answer).markers]
    assert isinstance(result.error, NotLeaderOrFollowerError)  # broker 2 follows
    # The leader waits for its follower, but no longer than the caller's deadline leaves.
    service = BrokerService(1, BrokerCores(1, replica_manager=leader.rm))
    task = asyncio.ensure_future(
        service.WriteTxnMarkers(codec.request_to_proto(request), Context(0.5))
    )
    await settle()
    assert leader.rm.next_tick_ms() == clock() + 480  # 0.5 s less the 20 ms margin
    leader.rm.tick(clock.advance(480))
    answer = await asyncio.wait_for(task, DONE_S)
    ((result,),) = [r.partitions for r in codec.response_from_proto(answer).markers]
    assert result.error is not None and result.error.code == 7  # REQUEST_TIMED_OUT


def test_the_codec_keeps_every_field_and_the_wire_order() -> None:
    request = m.WriteTxnMarkersRequest(
        (
            m.TxnMarker(7, 3, True, 12, (("a", 1), ("b", 0), ("a", 2)), 2),
            m.TxnMarker(8, 0, False, 12, (("a", 0),)),
        ),
        1500,
    )
    decoded = codec.request_from_proto(codec.request_to_proto(request))
    # Grouped by topic on the wire, in the order topics first appear.
    assert decoded.markers[0].partitions == (("a", 1), ("a", 2), ("b", 0))
    assert decoded.markers[1] == request.markers[1] and decoded.timeout_ms == 1500
    assert codec.request_from_proto(codec.request_to_proto(m.WriteTxnMarkersRequest(()))) == (
        m.WriteTxnMarkersRequest((), codec.DEFAULT_TIMEOUT_MS)
    )
    stale = InvalidProducerEpochError("t-0: stale")
    response = m.WriteTxnMarkersResponse(
        (
            m.TxnMarkerResult(
                7,
                (m.TxnMarkerPartitionResult("a", 1), m.TxnMarkerPartitionResult("a", 2, stale)),
            ),
        )
    )
    back = codec.response_from_proto(codec.response_to_proto(response), "WriteTxnMarkers")
    (first, second) = back.markers[0].partitions
    assert first == m.TxnMarkerPartitionResult("a", 1)
    assert type(second.error) is InvalidProducerEpochError and "stale" in str(second.error)
    wire = codec.response_to_proto(response)
    wire.markers[0].topics[0].partitions[0].error.code = 9999
    odd = codec.response_from_proto(wire, "WriteTxnMarkers from broker 3")
    error = odd.markers[0].partitions[0].error
    assert type(error) is UnknownServerError and "broker 3" in str(error)
