"""WriteTxnMarkers (Kafka API 27, v1-2 as Kafka 4.x serves it) on the Kafka listener: a
transaction coordinator's COMMIT or ABORT markers for the partitions this broker leads.

Rules:
- Each marker's partitions go through `BrokerCores.write_txn_markers`, the call the Broker
  gRPC service makes too (`broker_service`): the replica manager checks the marker against the
  partition's producer state, appends one control batch and answers once the ISR has it; its
  error per partition is the answer's code (NOT_LEADER_OR_FOLLOWER, INVALID_PRODUCER_EPOCH,
  TRANSACTION_COORDINATOR_FENCED, UNKNOWN_TOPIC_OR_PARTITION, REQUEST_TIMED_OUT, ...).
- Kafka writes the markers with its `request.timeout.ms` (30 s): so does this handler.
- v1 carries no transaction version (0: before KIP-890 part 2); v2 does.
- A broker not serving data requests refuses the whole request (`Refused`): the connection
  closes, as for the other data requests.
"""

from __future__ import annotations

from replog.errors import RequestRefusedError
from replog.kafka.connection import KafkaRequest, Served
from replog.kafka.messages import write_txn_markers_response as wtr
from replog.kafka.messages.write_txn_markers_request import WriteTxnMarkersRequest
from replog.replication import messages as m
from replog.server.data_plane.broker_cores import BrokerCores
from replog.server.kafka.kafka_apis import error_code, per_topic
from replog.server.runtime.tolerant_service import Refused
from replog.wire.txn_marker_codec import DEFAULT_TIMEOUT_MS

__all__ = ["WRITE_TXN_MARKERS", "KafkaTxnMarkerApis"]

WRITE_TXN_MARKERS = 27


class KafkaTxnMarkerApis:
    """The WriteTxnMarkers handler (an extension of `kafka_apis.KafkaApis`)."""

    served: Served = {WRITE_TXN_MARKERS: (1, 2)}

    def __init__(self, broker_id: int, broker_service: BrokerCores) -> None:
        self.broker_id = broker_id
        self._service = broker_service

    async def handle(
        self, request: KafkaRequest, listener_name: str
    ) -> wtr.WriteTxnMarkersResponse:
        body = request.body
        assert isinstance(body, WriteTxnMarkersRequest), body
        return await self.write_txn_markers(body)

    async def write_txn_markers(
        self, request: WriteTxnMarkersRequest
    ) -> wtr.WriteTxnMarkersResponse:
        decoded = m.WriteTxnMarkersRequest(
            tuple(
                m.TxnMarker(
                    producer_id=marker.producer_id,
                    producer_epoch=marker.producer_epoch,
                    committed=marker.transaction_result,
                    coordinator_epoch=marker.coordinator_epoch,
                    partitions=tuple(
                        (topic.name, index)
                        for topic in marker.topics
                        for index in topic.partition_indexes
                    ),
                    transaction_version=marker.transaction_version,
                )
                for marker in request.markers
            ),
            DEFAULT_TIMEOUT_MS,
        )
        try:
            answer = await self._service.write_txn_markers(decoded)
        except Refused as refused:
            raise RequestRefusedError(f"broker {self.broker_id}: {refused.details}") from None
        return wtr.WriteTxnMarkersResponse(
            markers=[
                wtr.WritableTxnMarkerResult(
                    producer_id=marker.producer_id,
                    topics=[
                        wtr.WritableTxnMarkerTopicResult(
                            name=topic.name,
                            partitions=[
                                wtr.WritableTxnMarkerPartitionResult(
                                    partition_index=r.partition, error_code=error_code(r.error)
                                )
                                for r in answered
                            ],
                        )
                        for topic, answered in per_topic(
                            marker.topics, lambda t: t.partition_indexes, result.partitions
                        )
                    ],
                )
                for marker, result in zip(request.markers, answer.markers, strict=True)
            ]
        )
