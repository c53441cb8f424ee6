"""The Kafka listener's API handlers: each request translated into what the broker already
knows, its answer into Kafka's response (docs/kafka-protocol.md, "Listener").

Rules:
- `SERVED` is the handler table and the only source of the ApiVersions answer: an API is
  advertised exactly when it has a handler here, at exactly the versions handled.
- ApiVersions v3+ with a client software name or version that is not
  `[a-zA-Z0-9](?:[a-zA-Z0-9\\-.]*[a-zA-Z0-9])?` is INVALID_REQUEST with no APIs (Kafka's check;
  librdkafka then retries v0). Supported and finalized features are left empty.
- Metadata is the broker's view of its image (`broker_metadata.metadata_view_from_image`, the
  same view the gRPC Broker service answers from): unfenced brokers only, a partition without a
  leader LEADER_NOT_AVAILABLE, a topic asked for and absent UNKNOWN_TOPIC_OR_PARTITION (topics
  are never created automatically), one asked for by an unknown id UNKNOWN_TOPIC_ID.
- Brokers are advertised with their endpoint of the listener name the client connected through
  (Kafka's rule); a broker that registered no such endpoint is left out, and a partition whose
  leader is such a broker has leader -1 and LISTENER_NOT_FOUND (v6+) or LEADER_NOT_AVAILABLE.
- `controller_id` is the active controller when it is a broker listed in the answer, else the
  lowest listed broker (a KRaft broker names some live broker: clients send their admin
  requests there), -1 with none.
- Metadata v0: an empty topic list means every topic; v1+: null means every topic, empty none.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from uuid import UUID

from quorum.controller.reads import PartitionView, TopicView
from quorum.metadata.image import MetadataImage
from quorum.metadata.records import Endpoint
from replog.errors import (
    InvalidRequestError,
    LeaderNotAvailableError,
    UnknownTopicIdError,
)
from replog.kafka.connection import KafkaRequest, Served
from replog.kafka.messages.api_versions_request import ApiVersionsRequest
from replog.kafka.messages.api_versions_response import ApiVersion, ApiVersionsResponse
from replog.kafka.messages.metadata_request import MetadataRequest
from replog.kafka.messages.metadata_response import (
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from replog.kafka.protocol.codec import ZERO_UUID, Message
from replog.server.broker_metadata import metadata_view_from_image
from replog.topic_names import is_internal_topic

API_VERSIONS = 18
METADATA = 3
# The handler table: API key -> (min, max) version handled. Kafka 4.x serves the same ranges.
SERVED: Mapping[int, tuple[int, int]] = {
    METADATA: (0, 13),
    API_VERSIONS: (0, 4),
}
LISTENER_NOT_FOUND = 72
_SOFTWARE = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


class KafkaApis:
    """The handlers of one broker's Kafka listeners (every listener shares them)."""

    def __init__(
        self,
        broker_id: int,
        *,
        cluster_id: str,
        image: Callable[[], MetadataImage],
        controller_id: Callable[[], int] = lambda: -1,
    ) -> None:
        self.broker_id = broker_id
        self._cluster_id = cluster_id
        self._image = image
        self._controller_id = controller_id

    @property
    def served(self) -> Served:
        return SERVED

    async def handle(self, request: KafkaRequest, listener_name: str) -> Message | None:
        """The response to `request` (its key and version are in `SERVED`: the connection core
        refuses the others), None when the request gets none."""
        body = request.body
        if isinstance(body, ApiVersionsRequest):
            return self.api_versions(body, request.api_version)
        if isinstance(body, MetadataRequest):
            return self.metadata(body, request.api_version, listener_name)
        raise InvalidRequestError(f"no handler for {type(body).__name__}")

    # --- ApiVersions ---------------------------------------------------------------------------

    def api_versions(self, request: ApiVersionsRequest, version: int) -> ApiVersionsResponse:
        if version >= 3 and not (
            _SOFTWARE.fullmatch(request.client_software_name)
            and _SOFTWARE.fullmatch(request.client_software_version)
        ):
            return ApiVersionsResponse(error_code=InvalidRequestError.code)
        return ApiVersionsResponse(
            api_keys=[
                ApiVersion(api_key=key, min_version=low, max_version=high)
                for key, (low, high) in sorted(SERVED.items())
            ]
        )

    # --- Metadata ------------------------------------------------------------------------------

    def metadata(
        self, request: MetadataRequest, version: int, listener_name: str
    ) -> MetadataResponse:
        image = self._image()
        names: list[str] | None
        unknown_ids: list[UUID] = []
        if request.topics is None or (version == 0 and not request.topics):
            names = None
        else:
            names = []
            for wanted in request.topics:
                if wanted.name is not None:
                    names.append(wanted.name)
                    continue
                topic = image.topics.by_id.get(wanted.topic_id)
                if topic is None:
                    unknown_ids.append(wanted.topic_id)
                else:
                    names.append(topic.name)
        view = metadata_view_from_image(image, names, self._cluster_id)
        endpoints = {
            broker.broker_id: endpoint
            for broker in view.brokers
            if (endpoint := _endpoint(image, broker.broker_id, listener_name)) is not None
        }
        brokers = [
            MetadataResponseBroker(
                node_id=broker.broker_id,
                host=endpoints[broker.broker_id].host,
                port=endpoints[broker.broker_id].port,
                rack=broker.rack,
            )
            for broker in view.brokers
            if broker.broker_id in endpoints
        ]
        missing_listener = LISTENER_NOT_FOUND if version >= 6 else LeaderNotAvailableError.code
        topics = [_topic(topic, endpoints, missing_listener) for topic in view.topics]
        topics += [
            MetadataResponseTopic(error_code=UnknownTopicIdError.code, name=None, topic_id=topic_id)
            for topic_id in unknown_ids
        ]
        controller = self._controller_id()
        if controller not in endpoints:
            controller = min(endpoints, default=-1)
        return MetadataResponse(
            brokers=brokers,
            cluster_id=self._cluster_id,
            controller_id=controller,
            topics=topics,
        )


def _endpoint(image: MetadataImage, broker_id: int, listener_name: str) -> Endpoint | None:
    registration = image.cluster.brokers.get(broker_id)
    if registration is None:
        return None
    return next((e for e in registration.endpoints if e.name == listener_name), None)


def _topic(
    topic: TopicView, endpoints: Mapping[int, Endpoint], missing_listener: int
) -> MetadataResponseTopic:
    if topic.error is not None:
        return MetadataResponseTopic(error_code=topic.error.code, name=topic.name)
    return MetadataResponseTopic(
        name=topic.name,
        topic_id=topic.topic_id or ZERO_UUID,
        is_internal=is_internal_topic(topic.name),
        partitions=[_partition(p, endpoints, missing_listener) for p in topic.partitions],
    )


def _partition(
    partition: PartitionView, endpoints: Mapping[int, Endpoint], missing_listener: int
) -> MetadataResponsePartition:
    registration = partition.registration
    error = 0 if partition.error is None else partition.error.code
    leader = registration.leader
    if error == 0 and leader not in endpoints:
        # Alive (it has a leader) but unreachable through this listener, or not live at all.
        error = missing_listener if leader in _live(partition) else LeaderNotAvailableError.code
        leader = -1
    return MetadataResponsePartition(
        error_code=error,
        partition_index=partition.partition_id,
        leader_id=leader,
        leader_epoch=registration.leader_epoch,
        replica_nodes=list(registration.replicas),
        isr_nodes=list(registration.isr),
        offline_replicas=list(partition.offline_replicas),
    )


def _live(partition: PartitionView) -> set[int]:
    offline = set(partition.offline_replicas)
    return {r for r in partition.registration.replicas if r not in offline}
