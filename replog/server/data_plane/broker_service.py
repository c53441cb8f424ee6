"""The `Broker` gRPC servicer (`broker.proto`): what other nodes ask of this broker itself, a
transaction coordinator's WriteTxnMarkers for the partitions it leads, and a partition
leader's AddPartitionsToTxn for the transactional ids it coordinates (KIP-890).

Rules:
- WriteTxnMarkers is `BrokerCores.write_txn_markers`, the call the Kafka listener's
  WriteTxnMarkers makes too; the request's timeout (0: Kafka's 30 s) is cut to what the
  caller's deadline leaves, so the caller gets the per-partition answer (REQUEST_TIMED_OUT
  where the ISR was too slow) rather than DEADLINE_EXCEEDED.
- AddPartitionsToTxn is the broker's transaction coordinator's answer, passed in as
  `add_partitions_to_txn` by the broker runtime (`txn_verifier.answer_to_wire`).
- Calls are guarded (`tolerant_service.add_guarded_service`): garbage bytes are
  INVALID_ARGUMENT, a broker not serving data requests UNAVAILABLE (`Refused`).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

from replog.errors import CoordinatorNotAvailableError
from replog.pb import broker_pb2 as pb
from replog.replication import messages as m
from replog.server.data_plane.broker_cores import BrokerCores
from replog.server.runtime.tolerant_service import Context, add_guarded_service, remaining_ms
from replog.wire import txn_marker_codec as codec
from replog.wire import txn_partitions_codec

log = logging.getLogger("replog.server.broker")

DESCRIPTOR = pb.DESCRIPTOR.services_by_name["Broker"]


class BrokerService:
    """Serves the `Broker` service's calls (module Rules)."""

    def __init__(
        self,
        broker_id: int,
        cores: BrokerCores,
        add_partitions_to_txn: Callable[
            [m.TxnPartitionsRequest], Awaitable[m.TxnPartitionsResponse]
        ]
        | None = None,
    ) -> None:
        """`add_partitions_to_txn` None: this broker has no transaction coordinator, every
        partition asked is COORDINATOR_NOT_AVAILABLE."""
        self.broker_id = broker_id
        self._cores = cores
        self._add_partitions_to_txn = add_partitions_to_txn or self._no_coordinator

    async def _no_coordinator(self, request: m.TxnPartitionsRequest) -> m.TxnPartitionsResponse:
        error = CoordinatorNotAvailableError(
            f"broker {self.broker_id} has no transaction coordinator"
        )
        return m.TxnPartitionsResponse(
            tuple(m.TxnMarkerPartitionResult(t, p, error) for t, p in request.partitions)
        )

    async def WriteTxnMarkers(
        self, request: pb.WriteTxnMarkersRequest, context: Context
    ) -> pb.WriteTxnMarkersResponse:
        decoded = codec.request_from_proto(request)
        left = remaining_ms(context)
        if left is not None and left < decoded.timeout_ms:
            decoded = replace(decoded, timeout_ms=left)
        return codec.response_to_proto(await self._cores.write_txn_markers(decoded))

    async def AddPartitionsToTxn(
        self, request: pb.AddPartitionsToTxnRequest, context: Context
    ) -> pb.AddPartitionsToTxnResponse:
        answer = await self._add_partitions_to_txn(txn_partitions_codec.request_from_proto(request))
        return txn_partitions_codec.response_to_proto(answer)


def add_broker_service(service: BrokerService, server: Any) -> None:
    """Register `service` on a grpc.aio server (guarded, module Rules)."""
    add_guarded_service(server, service, DESCRIPTOR, who=f"broker {service.broker_id}", log=log)
