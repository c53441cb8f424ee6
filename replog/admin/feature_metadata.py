"""What `describe_features` returns: the features a node supports and the cluster's finalized
levels, read from its ApiVersions v3+ answer as Kafka's `Admin.describeFeatures` reads them.

- `supported`: each feature the answering node supports, with its [min, max] range.
- `finalized`: each finalized feature's level (a feature not finalized is absent: level 0).
- `epoch`: the offset of the metadata the finalized levels come from; None when the node has
  finalized nothing yet (the wire's -1).
"""

from __future__ import annotations

from dataclasses import dataclass

from replog.kafka.messages.api_versions_response import ApiVersionsResponse


@dataclass(frozen=True, slots=True)
class FeatureMetadata:
    supported: dict[str, tuple[int, int]]
    finalized: dict[str, int]
    epoch: int | None

    @classmethod
    def of(cls, answer: ApiVersionsResponse) -> FeatureMetadata:
        return cls(
            supported={
                f.name: (f.min_version, f.max_version) for f in answer.supported_features or ()
            },
            finalized={f.name: f.max_version_level for f in answer.finalized_features or ()},
            epoch=None if answer.finalized_features_epoch < 0 else answer.finalized_features_epoch,
        )
