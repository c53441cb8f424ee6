"""The features an ApiVersions answer carries (v3+, KIP-584): what this node supports and what
the cluster has finalized, as `kafka-features describe` prints them.

Rules:
- Supported: the ranges this node's broker registers with (`broker_lifecycle.SUPPORTED_FEATURES`:
  `metadata.version` 1..12, the levels the metadata code reads and writes, and
  `transaction.version` 0..2, KIP-890; `eligible.leader.replicas.version` 0..1, KIP-966).
  Nothing else is claimed: replog has no `kraft.version` 1 (dynamic quorum), no
  `group.version` or `share.version` feature to finalize.
- A client reads `transaction.version` from the finalized levels (2: Produce v12 and
  TxnOffsetCommit v5 add partitions, EndTxn v5 bumps the epoch); the broker serves both
  protocols whatever is finalized, each by the request versions the client sends.
- Finalized: every level the metadata image holds (a removed feature is absent), each with
  its level as both min and max (Kafka's KRaft answer); the epoch is the image's last offset,
  -1 when nothing is finalized yet (Kafka's "unknown"). An UpdateFeatures shows here once the
  node has replayed its FeatureLevelRecord (`kafka_feature_apis`).
"""

from __future__ import annotations

from collections.abc import Mapping

from replog.kafka.messages.api_versions_response import (
    ApiVersionsResponse,
    FinalizedFeatureKey,
    SupportedFeatureKey,
)
from replog.quorum.metadata.broker_lifecycle import SUPPORTED_FEATURES

FEATURES_VERSION = 3  # ApiVersions' first version with features


def with_features(
    answer: ApiVersionsResponse, finalized: Mapping[str, int], epoch: int
) -> ApiVersionsResponse:
    """`answer` (its API table) with the supported features and the `finalized` levels at
    `epoch`; `answer` itself is not changed."""
    return ApiVersionsResponse(
        error_code=answer.error_code,
        api_keys=answer.api_keys,
        supported_features=[
            SupportedFeatureKey(
                name=f.name,
                min_version=f.min_supported_version,
                max_version=f.max_supported_version,
            )
            for f in SUPPORTED_FEATURES
        ],
        finalized_features_epoch=epoch if finalized else -1,
        finalized_features=[
            FinalizedFeatureKey(name=name, max_version_level=level, min_version_level=level)
            for name, level in sorted(finalized.items())
        ],
    )
