"""A feature update of Kafka's UpdateFeatures (KIP-584, KIP-778): a feature, the level asked
for, and how the level may move (`UpgradeType`, Kafka's `FeatureUpdate.UpgradeType` by its wire
code).

- UPGRADE (1) may only raise the level; SAFE_DOWNGRADE (2) lowers it where no metadata is lost;
  UNSAFE_DOWNGRADE (3) would lower it even so; UNKNOWN (0) is any code Kafka does not define,
  which a controller refuses (`UpgradeType.of`, Kafka's `fromCode`).
- Level 0 with a downgrade type removes the feature (`kafka-features disable`).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum


class UpgradeType(IntEnum):
    UNKNOWN = 0
    UPGRADE = 1
    SAFE_DOWNGRADE = 2
    UNSAFE_DOWNGRADE = 3

    @classmethod
    def of(cls, code: int) -> UpgradeType:
        """The type of a wire code; a code Kafka does not define is UNKNOWN."""
        return cls(code) if code in (1, 2, 3) else cls.UNKNOWN


@dataclass(frozen=True, slots=True)
class FeatureUpdate:
    feature: str
    level: int
    upgrade_type: UpgradeType = UpgradeType.UPGRADE
