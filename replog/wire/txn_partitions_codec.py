"""Translation between the Broker service's AddPartitionsToTxn messages (`broker.proto`) and
`replog.replication.messages` (`TxnPartitionsRequest`, `TxnPartitionsResponse`).

Rules (`txn_marker_codec`'s): the wire groups partitions by topic, in the order topics first
appear; the dataclasses hold one flat (topic, partition) entry each, and decoding keeps the
wire's order. Errors cross as `ErrorStatus`. No decision is made here.
"""

from __future__ import annotations

from replog.pb import broker_pb2 as pb
from replog.replication import messages as m
from replog.wire.txn_marker_codec import partitions_by_topic, results_from_proto, results_to_proto

__all__ = ["request_from_proto", "request_to_proto", "response_from_proto", "response_to_proto"]


def request_to_proto(request: m.TxnPartitionsRequest) -> pb.AddPartitionsToTxnRequest:
    return pb.AddPartitionsToTxnRequest(
        transactional_id=request.transactional_id,
        producer_id=request.producer_id,
        producer_epoch=request.producer_epoch,
        verify_only=request.verify_only,
        topics=[
            pb.TxnMarkerTopic(topic=topic, partitions=partitions)
            for topic, partitions in partitions_by_topic(request.partitions).items()
        ],
    )


def request_from_proto(message: pb.AddPartitionsToTxnRequest) -> m.TxnPartitionsRequest:
    return m.TxnPartitionsRequest(
        transactional_id=message.transactional_id,
        producer_id=message.producer_id,
        producer_epoch=message.producer_epoch,
        partitions=tuple(
            (topic.topic, partition) for topic in message.topics for partition in topic.partitions
        ),
        verify_only=message.verify_only,
    )


def response_to_proto(response: m.TxnPartitionsResponse) -> pb.AddPartitionsToTxnResponse:
    out = pb.AddPartitionsToTxnResponse()
    results_to_proto(response.partitions, out.topics)
    return out


def response_from_proto(
    message: pb.AddPartitionsToTxnResponse, where: str = ""
) -> m.TxnPartitionsResponse:
    """`where` (the RPC and peer) names the source of an unregistered error code."""
    return m.TxnPartitionsResponse(tuple(results_from_proto(message.topics, where)))
