"""A controller's Kafka listener (`kafka_controller_apis`), on a fake controller driver:

- ApiVersions lists exactly ApiVersions, DescribeCluster, DescribeQuorum, UnregisterBroker,
  UpdateFeatures, SaslHandshake and SaslAuthenticate; v3+ carries the features the controller's
  committed state finalized, at its offset; a SASL request no exchange took is
  ILLEGAL_SASL_STATE;
- DescribeCluster of controllers (type 2) lists each voter's controller listener and the
  active controller; brokers (type 1, v0) are UNSUPPORTED_ENDPOINT_TYPE;
- UnregisterBroker is a controller write; its error (BROKER_ID_NOT_REGISTERED, NOT_CONTROLLER)
  is the answer's; so is UpdateFeatures (`kafka-features --bootstrap-controller`), its updates
  handed over in request order with their upgrade types; with an authorizer both need ALTER
  on the cluster (refused: nothing written); DescribeCluster too needs ALTER on the cluster
  there (Kafka's ControllerApis);
- the controller endpoints are asked of each voter once per answer age, a failed or
  listener-less voter again next time; a voter that does not answer keeps its last known
  listener, one serving none is left out (`controller_endpoints`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import grpc
import pytest

from replog.common.feature_update import FeatureUpdate, UpgradeType
from replog.errors import (
    BrokerIdNotRegisteredError,
    IllegalSaslStateError,
    KafkaError,
    NotControllerError,
)
from replog.kafka.connection import KafkaRequest
from replog.kafka.messages.api_versions_request import ApiVersionsRequest
from replog.kafka.messages.describe_cluster_request import DescribeClusterRequest
from replog.kafka.messages.request_header import RequestHeader
from replog.kafka.messages.sasl_authenticate_request import SaslAuthenticateRequest
from replog.kafka.messages.sasl_handshake_request import SaslHandshakeRequest
from replog.kafka.messages.unregister_broker_request import UnregisterBrokerRequest
from replog.kafka.messages.update_features_request import FeatureUpdateKey, UpdateFeaturesRequest
from replog.kafka.protocol.codec import Message
from replog.pb import raft_pb2 as pb
from replog.quorum.controller.reads import FinalizedFeatures
from replog.quorum.metadata.image import MetadataImage
from replog.quorum.metadata.records import Endpoint
from replog.quorum.raft.config import VoterAddress
from replog.server.config.authorizer_config import AuthorizerConfig
from replog.server.kafka.broker_authorizer import BrokerAuthorizer
from replog.server.kafka.kafka_controller_apis import KafkaControllerApis
from replog.server.kafka.kafka_quorum_apis import KafkaQuorumApis
from replog.server.raft.controller_endpoints import ControllerEndpoints, endpoint_answer


@dataclass
class Answer:
    controller_id: int
    value: Any = None
    error: KafkaError | None = None

    def result(self) -> Any:
        if self.error is not None:
            raise self.error
        return self.value


class FakeController:
    controller_id = 2

    def __init__(self, unregister_error: KafkaError | None = None) -> None:
        self.unregister_error = unregister_error
        self.unregistered: list[int] = []
        self.updated: list[tuple[list[FeatureUpdate], bool]] = []

    async def read(self, query: Any) -> Answer:
        return Answer(2, FinalizedFeatures({"metadata.version": 7}, 41))

    async def write(self, call: Any, timeout_ms: int) -> Answer:
        controller = self

        class Core:
            def unregister_broker(self, broker_id: int, now_ms: int) -> None:
                controller.unregistered.append(broker_id)

            def update_features(
                self, updates: list[FeatureUpdate], now_ms: int, *, validate_only: bool
            ) -> None:
                controller.updated.append((updates, validate_only))

        call(Core(), 0)
        return Answer(2, error=self.unregister_error)


def controller_apis(
    controller: FakeController | None = None, authorizer: BrokerAuthorizer | None = None
) -> KafkaControllerApis:
    async def listeners() -> Mapping[int, Endpoint]:
        return {
            1: Endpoint("CONTROLLER_KAFKA", "h1", 9191),
            2: Endpoint("CONTROLLER_KAFKA", "h2", 9192),
        }

    async def describe() -> pb.DescribeQuorumResponse:
        return pb.DescribeQuorumResponse(leader_id=2, quorum_epoch=1)

    return KafkaControllerApis(
        cluster_id="c1",
        controller=controller or FakeController(),
        controller_listeners=listeners,
        quorum=KafkaQuorumApis(describe, controller_listeners=listeners, grpc_listener_name="C"),
        request_timeout_ms=1000,
        authorizer=authorizer,
    )


async def handled(apis: KafkaControllerApis, body: Message, version: int) -> Any:
    header = RequestHeader(
        request_api_key=body.API_KEY, request_api_version=version, correlation_id=1
    )
    answer = apis.handle(KafkaRequest(0, header, body, 0), "CONTROLLER_KAFKA")
    response = await answer  # type: ignore[misc]  # every answer here waits for the controller
    response.encode(version)
    return response


@pytest.mark.asyncio
async def test_api_versions_lists_the_controller_apis_with_the_finalized_features() -> None:
    request = ApiVersionsRequest(client_software_name="t", client_software_version="1")
    response = await handled(controller_apis(), request, 3)
    assert [k.api_key for k in response.api_keys] == [17, 18, 36, 55, 57, 60, 64]
    assert [(f.name, f.max_version_level) for f in response.finalized_features] == [
        ("metadata.version", 7)
    ]
    assert response.finalized_features_epoch == 41
    assert [(f.name, f.min_version, f.max_version) for f in response.supported_features] == [
        ("metadata.version", 1, 12),
        ("transaction.version", 0, 2),
        ("eligible.leader.replicas.version", 0, 1),
    ]
    assert (await handled(controller_apis(), ApiVersionsRequest(), 3)).error_code == 42


def test_a_sasl_request_outside_an_exchange_is_an_illegal_sasl_state() -> None:
    """On a controller listener without SASL (or after the exchange), as Kafka's ControllerApis
    answers SaslHandshake and SaslAuthenticate."""
    for body, version in (
        (SaslHandshakeRequest(mechanism="SCRAM-SHA-512"), 1),
        (SaslAuthenticateRequest(auth_bytes=b"n,,n=a,r=b"), 2),
    ):
        header = RequestHeader(
            request_api_key=body.API_KEY, request_api_version=version, correlation_id=1
        )
        answer: Any = controller_apis().handle(KafkaRequest(0, header, body, 0), "CONTROLLER_KAFKA")
        assert answer.error_code == IllegalSaslStateError.code == 34
        answer.encode(version)


@pytest.mark.asyncio
async def test_describe_cluster_lists_the_controllers_and_refuses_brokers() -> None:
    response = await handled(controller_apis(), DescribeClusterRequest(endpoint_type=2), 1)
    assert (response.error_code, response.controller_id, response.cluster_id) == (0, 2, "c1")
    assert [(b.broker_id, b.host, b.port) for b in response.brokers] == [
        (1, "h1", 9191),
        (2, "h2", 9192),
    ]
    for body, version in (
        (DescribeClusterRequest(endpoint_type=1), 1),
        (DescribeClusterRequest(), 0),
    ):
        refused = await handled(controller_apis(), body, version)
        assert refused.error_code == 115 and refused.brokers == []


@pytest.mark.asyncio
async def test_unregister_broker_is_a_controller_write() -> None:
    controller = FakeController()
    done = await handled(controller_apis(controller), UnregisterBrokerRequest(broker_id=3), 0)
    assert (done.error_code, controller.unregistered) == (0, [3])
    for error in (
        BrokerIdNotRegisteredError("broker 9 is not registered"),
        NotControllerError("x"),
    ):
        refused = await handled(
            controller_apis(FakeController(error)), UnregisterBrokerRequest(broker_id=9), 0
        )
        assert (refused.error_code, refused.error_message) == (error.code, str(error))


@pytest.mark.asyncio
async def test_update_features_is_a_controller_write() -> None:
    controller = FakeController()
    request = UpdateFeaturesRequest(
        feature_updates=[
            FeatureUpdateKey(feature="metadata.version", max_version_level=12),
            FeatureUpdateKey(feature="transaction.version", max_version_level=1, upgrade_type=2),
        ],
        validate_only=True,
    )
    done = await handled(controller_apis(controller), request, 1)
    assert (done.error_code, done.error_message) == (0, None)
    assert [(r.feature, r.error_code, r.error_message) for r in done.results] == [
        ("metadata.version", 0, "NONE"),
        ("transaction.version", 0, "NONE"),
    ]
    assert controller.updated == [
        (
            [
                FeatureUpdate("metadata.version", 12, UpgradeType.UPGRADE),
                FeatureUpdate("transaction.version", 1, UpgradeType.SAFE_DOWNGRADE),
            ],
            True,
        )
    ]
    refused = await handled(controller_apis(FakeController(NotControllerError("x"))), request, 2)
    assert (refused.error_code, refused.error_message, refused.results) == (41, "x", [])


class Unreachable(grpc.RpcError):  # type: ignore[misc]  # grpc ships no type hints
    pass


@pytest.mark.asyncio
async def test_controller_endpoints_ask_failed_and_listenerless_voters_again() -> None:
    asked: list[int] = []
    down = {3}

    async def ask(voter: VoterAddress, timeout_s: float) -> pb.KafkaControllerEndpointResponse:
        asked.append(voter.node_id)
        if voter.node_id in down:
            raise Unreachable()
        if voter.node_id == 2:
            return endpoint_answer(None)  # serves no controller listener
        return endpoint_answer(Endpoint("CONTROLLER_KAFKA", "", 9190 + voter.node_id))

    voters = [VoterAddress(i, f"v{i}", 19090 + i) for i in (1, 2, 3)]
    endpoints = ControllerEndpoints(voters, ask=ask, clock=lambda: 0.0)
    # An empty (wildcard) host is where the voter's gRPC listener was reached.
    assert await endpoints.lookup() == {1: Endpoint("CONTROLLER_KAFKA", "v1", 9191)}
    down.clear()
    assert await endpoints.lookup() == {
        1: Endpoint("CONTROLLER_KAFKA", "v1", 9191),
        3: Endpoint("CONTROLLER_KAFKA", "v3", 9193),
    }
    # Voter 2 serves none: asked every time, as it may be restarted with one.
    assert asked == [1, 2, 3, 2, 3]
    assert endpoint_answer(Endpoint("X", "0.0.0.0", 1)).host == ""
    assert endpoint_answer(Endpoint("X", "h", 1)).host == "h"


@pytest.mark.asyncio
async def test_controller_endpoints_are_asked_again_once_old_and_kept_while_unanswered() -> None:
    now = [0.0]
    ports: dict[int, int | None] = {1: 9191, 2: 9192}  # None: serves no controller listener
    down: set[int] = set()
    asked: list[int] = []

    async def ask(voter: VoterAddress, timeout_s: float) -> pb.KafkaControllerEndpointResponse:
        asked.append(voter.node_id)
        if voter.node_id in down:
            raise Unreachable()
        port = ports[voter.node_id]
        return endpoint_answer(None if port is None else Endpoint("CONTROLLER_KAFKA", "", port))

    voters = [VoterAddress(i, f"v{i}", 19090 + i) for i in (1, 2)]
    endpoints = ControllerEndpoints(voters, ask=ask, clock=lambda: now[0], max_age_s=30.0)
    v1 = Endpoint("CONTROLLER_KAFKA", "v1", 9191)
    assert await endpoints.lookup() == {1: v1, 2: Endpoint("CONTROLLER_KAFKA", "v2", 9192)}
    # Voter 2 restarts with a new controller listener port: seen once its answer is old.
    ports[2] = 9292
    now[0] = 29.0
    assert (await endpoints.lookup())[2].port == 9192
    assert asked == [1, 2]
    now[0] = 30.0
    moved = {1: v1, 2: Endpoint("CONTROLLER_KAFKA", "v2", 9292)}
    assert await endpoints.lookup() == moved
    assert asked == [1, 2, 1, 2]
    # A voter that does not answer stays listed at its last known listener, and is asked
    # again next time.
    down.add(2)
    now[0] = 60.0
    assert await endpoints.lookup() == moved
    assert await endpoints.lookup() == moved
    assert asked == [1, 2, 1, 2, 1, 2, 2]
    # Restarted serving none: left out, and asked again next time.
    down.clear()
    ports[2] = None
    assert await endpoints.lookup() == {1: v1}
    assert await endpoints.lookup() == {1: v1}
    assert asked[-2:] == [2, 2]


@pytest.mark.asyncio
async def test_with_an_authorizer_unregister_and_update_features_need_cluster_alter() -> None:
    controller = FakeController()
    authorizer = BrokerAuthorizer(AuthorizerConfig(enabled=True), lambda: MetadataImage())
    apis = controller_apis(controller, authorizer)
    header = RequestHeader(request_api_key=64, request_api_version=0, correlation_id=1)
    refused = apis.handle(KafkaRequest(0, header, UnregisterBrokerRequest(broker_id=3), 0), "C")
    assert refused.error_code == 31  # type: ignore[union-attr]  # answered at once
    assert controller.unregistered == []
    admin = BrokerAuthorizer(
        AuthorizerConfig(enabled=True, super_users=frozenset({"User:ANONYMOUS"})),
        lambda: MetadataImage(),
    )
    response = await handled(
        controller_apis(controller, admin), UnregisterBrokerRequest(broker_id=3), 0
    )
    assert response.error_code == 0 and controller.unregistered == [3]
    update = UpdateFeaturesRequest(
        feature_updates=[FeatureUpdateKey(feature="transaction.version", max_version_level=2)]
    )
    header = RequestHeader(request_api_key=57, request_api_version=2, correlation_id=1)
    refused = apis.handle(KafkaRequest(0, header, update, 0), "C")
    assert refused.error_code == 31  # type: ignore[union-attr]  # answered at once
    assert controller.updated == []


@pytest.mark.asyncio
async def test_with_an_authorizer_describe_cluster_needs_alter_on_the_cluster() -> None:
    anyone = BrokerAuthorizer(AuthorizerConfig(enabled=True), lambda: MetadataImage())
    header = RequestHeader(request_api_key=60, request_api_version=1, correlation_id=1)
    request = KafkaRequest(0, header, DescribeClusterRequest(endpoint_type=2), 0)
    refused = controller_apis(authorizer=anyone).handle(request, "C")
    assert refused.error_code == 31 and refused.brokers == []  # type: ignore[union-attr]
    admin = BrokerAuthorizer(
        AuthorizerConfig(enabled=True, super_users=frozenset({"User:ANONYMOUS"})),
        lambda: MetadataImage(),
    )
    response = await handled(
        controller_apis(authorizer=admin), DescribeClusterRequest(endpoint_type=2), 1
    )
    assert response.error_code == 0 and [b.broker_id for b in response.brokers] == [1, 2]
