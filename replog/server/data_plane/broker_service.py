"""The `Broker` gRPC servicer (`broker.proto`): what other nodes ask of this broker itself, a
transaction coordinator's WriteTxnMarkers for the partitions it leads.

Rules:
- WriteTxnMarkers is `BrokerCores.write_txn_markers`, the call the Kafka listener's
  WriteTxnMarkers makes too; the request's timeout (0: Kafka's 30 s) is cut to what the
  caller's deadline leaves, so the caller gets the per-partition answer (REQUEST_TIMED_OUT
  where the ISR was too slow) rather than DEADLINE_EXCEEDED.
- Calls are guarded (`tolerant_service.add_guarded_service`): garbage bytes are
  INVALID_ARGUMENT, a broker not serving data requests UNAVAILABLE (`Refused`).
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

from replog.pb import broker_pb2 as pb
from replog.server.data_plane.broker_cores import BrokerCores
from replog.server.runtime.tolerant_service import Context, add_guarded_service, remaining_ms
from replog.wire import txn_marker_codec as codec

log = logging.getLogger("replog.server.broker")

DESCRIPTOR = pb.DESCRIPTOR.services_by_name["Broker"]


class BrokerService:
    """Serves the `Broker` service's calls (module Rules)."""

    def __init__(self, broker_id: int, cores: BrokerCores) -> None:
        self.broker_id = broker_id
        self._cores = cores

    async def WriteTxnMarkers(
        self, request: pb.WriteTxnMarkersRequest, context: Context
    ) -> pb.WriteTxnMarkersResponse:
        decoded = codec.request_from_proto(request)
        left = remaining_ms(context)
        if left is not None and left < decoded.timeout_ms:
            decoded = replace(decoded, timeout_ms=left)
        return codec.response_to_proto(await self._cores.write_txn_markers(decoded))


def add_broker_service(service: BrokerService, server: Any) -> None:
    """Register `service` on a grpc.aio server (guarded, module Rules)."""
    add_guarded_service(server, service, DESCRIPTOR, who=f"broker {service.broker_id}", log=log)
