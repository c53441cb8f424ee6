"""Translation between the Broker service's WriteTxnMarkers messages (`broker.proto`) and
`replog.replication.messages` (`TxnMarker`, `WriteTxnMarkersRequest`, `WriteTxnMarkersResponse`).

Rules (`broker_codec`'s): the wire groups a marker's partitions by topic, in the order topics
first appear; the dataclasses hold one flat (topic, partition) entry each, and decoding keeps
the wire's order. Errors cross as `ErrorStatus` (`broker_codec.error_to_proto` and
`error_from_proto`). A timeout of 0 on the wire is Kafka's default request timeout. No decision
is made here.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from replog.pb import broker_pb2 as pb
from replog.replication import messages as m
from replog.wire.broker_codec import error_from_proto, error_to_proto

__all__ = [
    "DEFAULT_TIMEOUT_MS",
    "partitions_by_topic",
    "request_from_proto",
    "request_to_proto",
    "response_from_proto",
    "response_to_proto",
    "results_from_proto",
    "results_to_proto",
]

DEFAULT_TIMEOUT_MS = 30_000  # Kafka's request.timeout.ms, which its markers are written with


def partitions_by_topic(pairs: Iterable[tuple[str, int]]) -> dict[str, list[int]]:
    topics: dict[str, list[int]] = {}
    for topic, partition in pairs:
        topics.setdefault(topic, []).append(partition)
    return topics


def request_to_proto(request: m.WriteTxnMarkersRequest) -> pb.WriteTxnMarkersRequest:
    return pb.WriteTxnMarkersRequest(
        markers=[
            pb.WritableTxnMarker(
                producer_id=marker.producer_id,
                producer_epoch=marker.producer_epoch,
                committed=marker.committed,
                coordinator_epoch=marker.coordinator_epoch,
                topics=[
                    pb.TxnMarkerTopic(topic=topic, partitions=partitions)
                    for topic, partitions in partitions_by_topic(marker.partitions).items()
                ],
                transaction_version=marker.transaction_version,
            )
            for marker in request.markers
        ],
        timeout_ms=request.timeout_ms,
    )


def request_from_proto(message: pb.WriteTxnMarkersRequest) -> m.WriteTxnMarkersRequest:
    return m.WriteTxnMarkersRequest(
        tuple(
            m.TxnMarker(
                producer_id=marker.producer_id,
                producer_epoch=marker.producer_epoch,
                committed=marker.committed,
                coordinator_epoch=marker.coordinator_epoch,
                partitions=tuple(
                    (topic.topic, partition)
                    for topic in marker.topics
                    for partition in topic.partitions
                ),
                transaction_version=marker.transaction_version,
            )
            for marker in message.markers
        ),
        timeout_ms=message.timeout_ms or DEFAULT_TIMEOUT_MS,
    )


def results_to_proto(results: Iterable[m.TxnMarkerPartitionResult], out: Any) -> None:
    """Add `results` to `out`, a repeated `TxnMarkerTopicResult` field, grouped by topic."""
    topics: dict[str, pb.TxnMarkerTopicResult] = {}
    for partition in results:
        topic = topics.get(partition.topic)
        if topic is None:
            topic = topics[partition.topic] = out.add(topic=partition.topic)
        entry = topic.partitions.add(partition=partition.partition)
        error = error_to_proto(partition.error)
        if error is not None:
            entry.error.CopyFrom(error)


def results_from_proto(
    topics: Iterable[pb.TxnMarkerTopicResult], where: str
) -> Iterator[m.TxnMarkerPartitionResult]:
    """The flat results of `topics`, in the wire's order."""
    for topic in topics:
        for entry in topic.partitions:
            error = error_from_proto(entry, where, topic.topic, entry.partition)
            yield m.TxnMarkerPartitionResult(topic.topic, entry.partition, error)


def response_to_proto(response: m.WriteTxnMarkersResponse) -> pb.WriteTxnMarkersResponse:
    out = pb.WriteTxnMarkersResponse()
    for marker in response.markers:
        results_to_proto(marker.partitions, out.markers.add(producer_id=marker.producer_id).topics)
    return out


def response_from_proto(
    message: pb.WriteTxnMarkersResponse, where: str = ""
) -> m.WriteTxnMarkersResponse:
    """`where` (the RPC and peer) names the source of an unregistered error code."""
    return m.WriteTxnMarkersResponse(
        tuple(
            m.TxnMarkerResult(marker.producer_id, tuple(results_from_proto(marker.topics, where)))
            for marker in message.markers
        )
    )
