"""A broker's UpdateFeatures (`kafka_feature_apis`) on a fake forward to the controller:

- v0's `allow_downgrade` becomes SAFE_DOWNGRADE (false: UPGRADE), v1+ sends its `upgrade_type`
  code as it came (an unknown one for the controller to refuse); the request's order,
  `validate_only` and `timeout_ms` go with it;
- success at v0 and v1 lists each update with error 0 and message "NONE"; v2 lists none;
- the controller's refusal (or no controller answering) is the top-level error and message,
  with no results, at every version; each answer encodes at its version;
- without ALTER on the cluster the request is CLUSTER_AUTHORIZATION_FAILED before any forward.
"""

from __future__ import annotations

from typing import Any

import pytest

from replog.errors import InvalidUpdateVersionError, KafkaError, RequestTimedOutError
from replog.kafka.api_authorization import gate
from replog.kafka.connection import KafkaRequest
from replog.kafka.messages.request_header import RequestHeader
from replog.kafka.messages.update_features_request import FeatureUpdateKey, UpdateFeaturesRequest
from replog.pb import controller_pb2 as cpb
from replog.server.kafka.kafka_feature_apis import KafkaFeatureApis


class Forward:
    def __init__(self, failure: KafkaError | None = None) -> None:
        self.failure = failure
        self.sent: list[tuple[str, Any, int | None]] = []

    async def __call__(
        self, method: str, request: Any, client_timeout_ms: int | None = None
    ) -> tuple[Any, KafkaError | None]:
        self.sent.append((method, request, client_timeout_ms))
        return (None, self.failure) if self.failure else (cpb.UpdateFeaturesResponse(), None)


REQUEST = UpdateFeaturesRequest(
    timeout_ms=5000,
    feature_updates=[
        FeatureUpdateKey(feature="transaction.version", max_version_level=1, allow_downgrade=True,
                         upgrade_type=2),
        FeatureUpdateKey(feature="metadata.version", max_version_level=12, upgrade_type=7),
    ],
    validate_only=True,
)  # fmt: skip


async def handled(forward: Forward, version: int) -> Any:
    header = RequestHeader(request_api_key=57, request_api_version=version, correlation_id=1)
    answer = await KafkaFeatureApis(forward).handle(KafkaRequest(0, header, REQUEST, 0), "P")
    answer.encode(version)
    return answer


@pytest.mark.asyncio
async def test_updates_are_forwarded_with_their_upgrade_types() -> None:
    forward = Forward()
    await handled(forward, 0)
    await handled(forward, 1)
    (method, v0, timeout), (_, v1, _) = forward.sent
    assert (method, timeout, v0.validate_only) == ("UpdateFeatures", 5000, True)
    assert [(u.feature, u.max_version_level, u.upgrade_type) for u in v0.updates] == [
        ("transaction.version", 1, 2),
        ("metadata.version", 12, 1),
    ]
    assert [u.upgrade_type for u in v1.updates] == [2, 0]  # 7 is no type: the controller refuses


@pytest.mark.asyncio
async def test_success_lists_each_update_until_v1() -> None:
    for version in (0, 1):
        done = await handled(Forward(), version)
        assert (done.error_code, done.error_message) == (0, None)
        assert [(r.feature, r.error_code, r.error_message) for r in done.results] == [
            ("transaction.version", 0, "NONE"),
            ("metadata.version", 0, "NONE"),
        ]
    assert (await handled(Forward(), 2)).results == []


@pytest.mark.asyncio
async def test_a_refusal_is_the_whole_answer() -> None:
    for failure in (
        InvalidUpdateVersionError("The update failed for all features since ..."),
        RequestTimedOutError("no controller answered"),
    ):
        for version in (0, 1, 2):
            refused = await handled(Forward(failure), version)
            assert (refused.error_code, refused.error_message, refused.results) == (
                failure.code,
                str(failure),
                [],
            )


class Caller:
    def __init__(self, allowed: bool) -> None:
        self.allowed = allowed
        self.asked: list[tuple[Any, ...]] = []

    def may(self, *asked: Any, log: bool = True) -> bool:
        self.asked.append(asked)
        return self.allowed


def test_update_features_needs_alter_on_the_cluster() -> None:
    assert gate(57, 2, REQUEST, Caller(True)) is None  # type: ignore[arg-type]
    refused = gate(57, 2, REQUEST, Caller(False))  # type: ignore[arg-type]
    assert refused is not None and refused.body is None
    answer = refused.complete(None)
    assert answer is not None and answer.error_code == 31  # type: ignore[attr-defined]
