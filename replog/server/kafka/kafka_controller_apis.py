"""The handlers of a controller's Kafka listener: what Kafka 4's tools send with
`--bootstrap-controller` (`kafka-metadata-quorum`, `kafka-features`, `kafka-cluster`).

Rules:
- Served: ApiVersions (with the features, `kafka_features`: finalized as the controller's
  committed state holds them), DescribeCluster, DescribeQuorum (`kafka_quorum_apis`),
  UnregisterBroker, UpdateFeatures (`kafka_feature_apis`), and SaslHandshake and
  SaslAuthenticate (a SASL listener's exchange answers them; elsewhere ILLEGAL_SASL_STATE,
  `kafka_sasl_apis`). Any other API is refused by the connection core (not in the table).
- DescribeCluster answers controller endpoints (type 2, Kafka's KIP-919 answer of a
  controller): every voter serving a Kafka controller listener (`controller_endpoints`), with
  the active controller as `controller_id` (-1: none known). Broker endpoints (type 1, and
  v0, which has no type) are UNSUPPORTED_ENDPOINT_TYPE: a controller describes controllers.
- UnregisterBroker and UpdateFeatures are controller writes
  (`QuorumController.unregister_broker`, `update_features`), answered once committed; a standby
  answers NOT_CONTROLLER (the admin client then asks the active one).
- With an authorizer (`authorizer.class.name`), the ACLs of the controller's committed state
  decide, by the rules of `api_authorization` (Kafka's ControllerApis asks the same):
  UnregisterBroker, UpdateFeatures and DescribeCluster need ALTER on the cluster (unlike a
  broker's DescribeCluster: the controllers are told only to an admin), DescribeQuorum
  DESCRIBE; ApiVersions nothing.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

from replog.errors import InvalidRequestError
from replog.kafka.api_authorization import controller_gate
from replog.kafka.connection import Answer, KafkaRequest, Served
from replog.kafka.messages import describe_cluster_response as dcr
from replog.kafka.messages import unregister_broker_response as ubr
from replog.kafka.messages.api_versions_request import ApiVersionsRequest
from replog.kafka.messages.api_versions_response import ApiVersion, ApiVersionsResponse
from replog.kafka.messages.describe_cluster_request import DescribeClusterRequest
from replog.kafka.messages.unregister_broker_request import UnregisterBrokerRequest
from replog.kafka.messages.update_features_request import UpdateFeaturesRequest
from replog.kafka.messages.update_features_response import UpdateFeaturesResponse
from replog.quorum.controller import reads
from replog.quorum.controller.reads import FinalizedFeatures
from replog.quorum.metadata.records import Endpoint
from replog.server.kafka.broker_authorizer import BrokerAuthorizer, authorized
from replog.server.kafka.kafka_admin_apis import (
    DESCRIBE_CLUSTER,
    ENDPOINT_TYPE_CONTROLLERS,
    UNREGISTER_BROKER,
    other_endpoint_type,
)
from replog.server.kafka.kafka_apis import API_VERSIONS, bad_client_software, error_code
from replog.server.kafka.kafka_feature_apis import FEATURE_SERVED, answer, updates_of
from replog.server.kafka.kafka_features import FEATURES_VERSION, with_features
from replog.server.kafka.kafka_quorum_apis import QUORUM_SERVED, KafkaQuorumApis
from replog.server.kafka.kafka_sasl_apis import SASL_EXCHANGE_SERVED, outside_an_exchange

CONTROLLER_SERVED: Mapping[int, tuple[int, int]] = {
    API_VERSIONS: (0, 4),
    DESCRIBE_CLUSTER: (0, 2),
    UNREGISTER_BROKER: (0, 0),
    **FEATURE_SERVED,
    **QUORUM_SERVED,
    **SASL_EXCHANGE_SERVED,
}


class Controller(Protocol):
    """What the handlers need of the node's controller (`ControllerDriver`)."""

    @property
    def controller_id(self) -> int: ...

    def read(self, query: Any) -> Awaitable[Any]: ...

    def write(self, call: Any, timeout_ms: int) -> Awaitable[Any]: ...


class KafkaControllerApis:
    """The handlers of one controller's Kafka listener."""

    def __init__(
        self,
        *,
        cluster_id: str,
        controller: Controller,
        controller_listeners: Callable[[], Awaitable[Mapping[int, Endpoint]]],
        quorum: KafkaQuorumApis,
        request_timeout_ms: int,
        authorizer: BrokerAuthorizer | None = None,
    ) -> None:
        """`authorizer`: over the controller's committed ACLs (None: authorization off)."""
        self._authorizer = authorizer
        self._cluster_id = cluster_id
        self._controller = controller
        self._controller_listeners = controller_listeners
        self._quorum = quorum
        self._request_timeout_ms = request_timeout_ms
        self._api_versions = ApiVersionsResponse(
            api_keys=[
                ApiVersion(api_key=key, min_version=low, max_version=high)
                for key, (low, high) in sorted(CONTROLLER_SERVED.items())
            ]
        )

    @property
    def served(self) -> Served:
        return CONTROLLER_SERVED

    def handle(self, request: KafkaRequest, listener_name: str) -> Answer:
        return authorized(
            self._authorizer,
            request,
            lambda asked, _: self._handle(asked, listener_name),
            controller_gate,
        )

    def _handle(self, request: KafkaRequest, listener_name: str) -> Answer:
        body, version = request.body, request.api_version
        if isinstance(body, ApiVersionsRequest):
            return self.api_versions(body, version)
        if isinstance(body, DescribeClusterRequest):
            return self.describe_cluster(body)
        if isinstance(body, UnregisterBrokerRequest):
            return self.unregister_broker(body)
        if isinstance(body, UpdateFeaturesRequest):
            return self.update_features(body, version)
        outside = outside_an_exchange(body, listener_name)
        if outside is not None:
            return outside
        return self._quorum.handle(request, listener_name)

    async def api_versions(self, request: ApiVersionsRequest, version: int) -> ApiVersionsResponse:
        if bad_client_software(request, version):
            return ApiVersionsResponse(error_code=InvalidRequestError.code)
        if version < FEATURES_VERSION:
            return self._api_versions
        answer = await self._controller.read(reads.finalized_features())
        if answer.error is not None:
            return self._api_versions  # no committed state to read: no features to tell
        features: FinalizedFeatures = answer.result()
        return with_features(self._api_versions, features.levels, features.offset)

    async def describe_cluster(
        self, request: DescribeClusterRequest
    ) -> dcr.DescribeClusterResponse:
        if request.endpoint_type != ENDPOINT_TYPE_CONTROLLERS:
            return other_endpoint_type(request, self._cluster_id, "controller", "broker")
        controllers = await self._controller_listeners()
        return dcr.DescribeClusterResponse(
            endpoint_type=ENDPOINT_TYPE_CONTROLLERS,
            cluster_id=self._cluster_id,
            controller_id=self._controller.controller_id,
            brokers=[
                dcr.DescribeClusterBroker(broker_id=i, host=e.host, port=e.port, rack=None)
                for i, e in sorted(controllers.items())
            ],
        )

    async def unregister_broker(
        self, request: UnregisterBrokerRequest
    ) -> ubr.UnregisterBrokerResponse:
        broker_id = request.broker_id
        answer = await self._controller.write(
            lambda c, now: c.unregister_broker(broker_id, now), self._request_timeout_ms
        )
        error = answer.error
        return ubr.UnregisterBrokerResponse(
            error_code=error_code(error), error_message=None if error is None else str(error)
        )

    async def update_features(
        self, request: UpdateFeaturesRequest, version: int
    ) -> UpdateFeaturesResponse:
        updates = updates_of(request, version)
        validate_only = request.validate_only
        timeout_ms = request.timeout_ms if request.timeout_ms > 0 else self._request_timeout_ms
        written = await self._controller.write(
            lambda c, now: c.update_features(updates, now, validate_only=validate_only),
            timeout_ms,
        )
        return answer(request, version, written.error)
