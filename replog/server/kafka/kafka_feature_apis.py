"""UpdateFeatures (57, v0-2; KIP-584, KIP-778) on the Kafka listeners: a broker forwards it to
the active controller, a controller's listener writes it to its own controller
(`kafka_controller_apis`); both read the request and shape the answer here.

Rules:
- Each update's upgrade type: at v0 `allow_downgrade` true is SAFE_DOWNGRADE and false UPGRADE
  (Kafka's `UpdateFeaturesRequest.getFeature`); from v1 its `upgrade_type` code, an unknown code
  refused by the controller. The controller decides everything (`feature_updates`).
- A broker forwards the whole request (`ControllerService.UpdateFeatures`), redirects and
  elections followed for as long as its `timeout_ms` allows (`kafka_admin_apis`); no controller
  answering is the request's error.
- The answer, as Kafka's `QuorumController.updateFeatures` gives it: a refusal is the top-level
  error and its message, with no results, at every version; success is error 0 with a null
  message and, at v0 and v1, one result per update in request order (error 0, message "NONE",
  Kafka's `Errors.NONE.message()`); v2 carries no results.
- Who may ask is `api_authorization`'s rule (ALTER on the cluster), asked before the handler.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping
from typing import Any, Protocol

from replog.common.feature_update import FeatureUpdate, UpgradeType
from replog.errors import InvalidRequestError, KafkaError
from replog.kafka.connection import KafkaRequest
from replog.kafka.messages import update_features_response as ufr
from replog.kafka.messages.update_features_request import UpdateFeaturesRequest
from replog.pb import controller_pb2 as cpb
from replog.server.kafka.kafka_apis import error_code

UPDATE_FEATURES = 57
FEATURE_SERVED: Mapping[int, tuple[int, int]] = {UPDATE_FEATURES: (0, 2)}
RESULTS_UNTIL = 1  # the last version whose answer lists each update
NONE_MESSAGE = "NONE"


class Forward(Protocol):
    """`KafkaAdminApis.forward_request`: a request to the active controller's gRPC method, its
    answer and the whole request's error."""

    def __call__(
        self, method: str, request: Any, client_timeout_ms: int | None = None
    ) -> Awaitable[tuple[Any, KafkaError | None]]: ...


def updates_of(request: UpdateFeaturesRequest, version: int) -> list[FeatureUpdate]:
    """The request's updates, in its order, each with its upgrade type (module Rules)."""
    return [
        FeatureUpdate(
            u.feature,
            u.max_version_level,
            (
                (UpgradeType.SAFE_DOWNGRADE if u.allow_downgrade else UpgradeType.UPGRADE)
                if version == 0
                else UpgradeType.of(u.upgrade_type)
            ),
        )
        for u in request.feature_updates
    ]


def answer(
    request: UpdateFeaturesRequest, version: int, error: KafkaError | None
) -> ufr.UpdateFeaturesResponse:
    """Kafka's answer to `request` at `version` (module Rules)."""
    if error is not None:
        return ufr.UpdateFeaturesResponse(error_code=error_code(error), error_message=str(error))
    results = (
        [
            ufr.UpdatableFeatureResult(feature=u.feature, error_code=0, error_message=NONE_MESSAGE)
            for u in request.feature_updates
        ]
        if version <= RESULTS_UNTIL
        else []
    )
    return ufr.UpdateFeaturesResponse(error_code=0, error_message=None, results=results)


class KafkaFeatureApis:
    """A broker's UpdateFeatures handler: forwarded to the active controller."""

    def __init__(self, forward: Forward) -> None:
        self._forward = forward

    @property
    def served(self) -> Mapping[int, tuple[int, int]]:
        return FEATURE_SERVED

    def handle(self, request: KafkaRequest, listener_name: str) -> Any:
        body = request.body
        if not isinstance(body, UpdateFeaturesRequest):
            raise InvalidRequestError(f"no feature handler for {type(body).__name__}")
        return self.update_features(body, request.api_version)

    async def update_features(
        self, request: UpdateFeaturesRequest, version: int
    ) -> ufr.UpdateFeaturesResponse:
        forwarded = cpb.UpdateFeaturesRequest(
            updates=[
                cpb.FeatureUpdate(
                    feature=u.feature, max_version_level=u.level, upgrade_type=u.upgrade_type
                )
                for u in updates_of(request, version)
            ],
            validate_only=request.validate_only,
        )
        _, failure = await self._forward("UpdateFeatures", forwarded, request.timeout_ms)
        return answer(request, version, failure)
