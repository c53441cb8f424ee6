"""FeatureControl: the finalized feature levels, `metadata.version` first among them.

`metadata.version` says which records, and which record fields, the metadata log may hold. A
new log begins with its FeatureLevelRecord (the bootstrap write of the first active
controller), then `transaction.version`'s (level 2 unless configured lower; a level 0 writes
none), and every broker must support the finalized levels to register.

Rules:
- FeatureLevelRecord sets a level; level 0 removes the feature, except `metadata.version`,
  which can be changed but never removed. A level this code does not know for
  `metadata.version` cannot be replayed (`MetadataReplayError`): the records after it might not
  mean what this code thinks.
- A broker registration must support every finalized feature: its advertised
  [min, max] range holds the finalized level. A feature it does not advertise counts as
  supported only at level 0, so a broker that says nothing about `metadata.version` cannot join
  (`UNSUPPORTED_VERSION`, naming the feature and both levels).
- Reads take an `offset` (the last stable offset) or None for the latest state.
- UpdateFeatures (`update_features`) changes the levels of a running cluster by Kafka's rules
  (`feature_updates`), checked against this controller's own supported ranges
  (`broker_lifecycle.SUPPORTED_FEATURES`, the code every node runs) and every registered
  broker's; its records are one atomic batch. Whatever is gated on a level follows the new level
  from the record's replay on: SCRAM credentials (`scram_supported`) on the controllers, the
  finalized features of every node's ApiVersions (`kafka_features`).

Levels: replog writes the record set of Kafka's `metadata.version` 3.6-IV0 (feature level 12),
its newest, and a new log begins with it. Level 1 (3.0-IV1) is the first KRaft level; 7
(3.3-IV3) adds InControlledShutdown to the broker registration records. What Kafka's levels 8
to 12 gate, and why replog holds each:
- 8 (3.4-IV0, KIP-866): ZooKeeper migration, a RegisterBrokerRecord flag saying a broker is a
  migrating ZooKeeper broker, and forwarding of admin requests to the controller. replog has no
  ZooKeeper (the flag is false for every broker, so its records carry none) and its brokers
  always forward.
- 9 (3.5-IV0, KIP-405) and 10 (3.5-IV1, KIP-903): no metadata record changes (Kafka marks
  both so); they gate the versions of the brokers' own Fetch and ListOffsets (tiered-storage
  offsets; the replica's broker epoch in every follower fetch, which replog's follower fetch
  carries and its leaders check before an ISR expansion).
- 11 (3.5-IV2): SCRAM credentials in the log. AlterUserScramCredentials below it is refused
  per user with UNSUPPORTED_VERSION, as Kafka's ScramControlManager refuses it, and bootstrap
  credentials need it (`ControllerConfig`). Replay reads them at any level, as Kafka's does.
- 12 (3.6-IV0, KAFKA-15021): from it on, an ISR shrink does not bump the leader epoch.
  replog's partition changes never bump it on a shrink (`partition_change_builder`), which
  below 12 differs from Kafka.
Not held: 13 (3.6-IV1), metadata transactions (Begin/End/AbortTransactionRecord), and the
levels after it. The ELR fields of the partition records (KIP-966) are gated by their own
feature instead, `eligible.leader.replicas.version` (level 1: on; absent or 0: off), as in
Kafka 4.x, whose level 1 needs `metadata.version` 4.0-IV1; here it needs 3.6-IV0
(`feature_updates.ELR_METADATA_VERSION`, which says why). A new log finalizes it when the
controller's `eligible.leader.replicas.enable` is true, which a lower bootstrap level refuses,
as Kafka's `kafka-storage format` refuses a feature whose dependency is not met; UpdateFeatures
turns it off and on again where the dependency holds.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from replog.common.feature_update import FeatureUpdate
from replog.errors import MetadataReplayError, UnsupportedVersionError
from replog.quorum.controller.controller_result import ControllerResult
from replog.quorum.controller.feature_updates import bootstrap_refusal, plan_updates
from replog.quorum.metadata.broker_lifecycle import SUPPORTED_FEATURES
from replog.quorum.metadata.records import (
    ELR_VERSION_FEATURE,
    ELR_VERSION_LATEST,
    METADATA_VERSION_FEATURE,
    METADATA_VERSION_LATEST,
    METADATA_VERSION_MINIMUM,
    METADATA_VERSION_SCRAM,
    TRANSACTION_VERSION_FEATURE,
    TRANSACTION_VERSION_LATEST,
    FeatureLevelRecord,
    FeatureRange,
)
from replog.timeline import SnapshotRegistry, TimelineHashMap


class FeatureControl:
    """Finalized feature levels, in timeline state."""

    __slots__ = ("_levels",)

    def __init__(self, registry: SnapshotRegistry) -> None:
        self._levels: TimelineHashMap[str, int] = TimelineHashMap(registry)

    # -- queries ------------------------------------------------------------------------------

    def metadata_version(self, offset: int | None = None) -> int | None:
        """The finalized `metadata.version` level at `offset` (None: latest); None before the
        bootstrap record."""
        return self._levels.get(METADATA_VERSION_FEATURE, offset=offset)

    def scram_supported(self) -> bool:
        """Whether the log may take SCRAM credentials: `metadata.version` at 3.5-IV2 or above
        (latest state, the write path's)."""
        return (self.metadata_version() or 0) >= METADATA_VERSION_SCRAM

    def eligible_leader_replicas_enabled(self) -> bool:
        """Whether KIP-966 is on: `eligible.leader.replicas.version` at level 1 or above
        (latest state, the write path's)."""
        return self._levels.live.get(ELR_VERSION_FEATURE, 0) >= 1

    def finalized_levels(self, offset: int | None = None) -> dict[str, int]:
        """Every finalized feature and its level at `offset` (None: latest)."""
        return self._levels.to_dict(offset)

    def check_broker_supports(self, broker_id: int, features: Iterable[FeatureRange]) -> None:
        """Raise `UnsupportedVersionError` unless `features` covers every finalized level."""
        ranges = {feature.name: feature for feature in features}
        for name, level in sorted(self._levels.items()):
            advertised = ranges.get(name)
            low, high = (
                (0, 0)
                if advertised is None
                else (advertised.min_supported_version, advertised.max_supported_version)
            )
            if not low <= level <= high:
                raise UnsupportedVersionError(
                    f"broker {broker_id} cannot register: it supports {name} levels "
                    f"{low}..{high}"
                    f"{' (it does not advertise the feature)' if advertised is None else ''}, "
                    f"but the finalized level is {level}"
                )

    # -- writes --------------------------------------------------------------------------------

    def update_features(
        self,
        updates: Sequence[FeatureUpdate],
        *,
        controller_id: int,
        brokers: Mapping[int, Iterable[FeatureRange]],
        validate_only: bool = False,
    ) -> ControllerResult[None]:
        """UpdateFeatures over the latest levels: the records in one atomic batch (none when
        `validate_only`); a refusal raises `InvalidUpdateVersionError` (`feature_updates`)."""
        records = plan_updates(
            updates,
            finalized=self._levels.to_dict(),
            controller_id=controller_id,
            supported=SUPPORTED_FEATURES,
            brokers=brokers,
        )
        return ControllerResult.of(() if validate_only else records, None, is_atomic=True)

    @staticmethod
    def bootstrap_records(
        metadata_version: int,
        transaction_version: int | None = None,
        *,
        eligible_leader_replicas: bool = False,
    ) -> list[FeatureLevelRecord]:
        """The records a new metadata log begins with: `transaction_version` (by default its
        latest level where `metadata_version` allows one, else 0, as Kafka's format takes a
        release's defaults); `eligible_leader_replicas` finalizes
        `eligible.leader.replicas.version` at its latest level too. `metadata_version` must
        allow both (`feature_updates.bootstrap_refusal`: ValueError)."""
        if not _known_metadata_version(metadata_version):
            raise ValueError(
                f"cannot bootstrap at {METADATA_VERSION_FEATURE} level {metadata_version}: "
                f"this code knows {METADATA_VERSION_MINIMUM}..{METADATA_VERSION_LATEST}"
            )
        levels = {METADATA_VERSION_FEATURE: metadata_version}
        if transaction_version is None:
            latest = {**levels, TRANSACTION_VERSION_FEATURE: TRANSACTION_VERSION_LATEST}
            transaction_version = 0 if bootstrap_refusal(latest) else TRANSACTION_VERSION_LATEST
        if not 0 <= transaction_version <= TRANSACTION_VERSION_LATEST:
            raise ValueError(
                f"cannot bootstrap at {TRANSACTION_VERSION_FEATURE} level {transaction_version}: "
                f"this code knows 0..{TRANSACTION_VERSION_LATEST}"
            )
        refusal = bootstrap_refusal({**levels, TRANSACTION_VERSION_FEATURE: transaction_version})
        if refusal is not None:
            raise ValueError(
                f"cannot bootstrap at {TRANSACTION_VERSION_FEATURE} level {transaction_version}: "
                f"{refusal}"
            )
        if eligible_leader_replicas:
            refusal = bootstrap_refusal({**levels, ELR_VERSION_FEATURE: ELR_VERSION_LATEST})
            if refusal is not None:
                raise ValueError(f"cannot bootstrap with eligible leader replicas: {refusal}")
        records = [FeatureLevelRecord(METADATA_VERSION_FEATURE, metadata_version)]
        if transaction_version:
            records.append(FeatureLevelRecord(TRANSACTION_VERSION_FEATURE, transaction_version))
        if eligible_leader_replicas:
            records.append(FeatureLevelRecord(ELR_VERSION_FEATURE, ELR_VERSION_LATEST))
        return records

    # -- replay and snapshots ------------------------------------------------------------------

    def replay(self, record: FeatureLevelRecord, offset: int) -> None:
        if record.name == METADATA_VERSION_FEATURE:
            if not _known_metadata_version(record.feature_level):
                raise MetadataReplayError(
                    f"FeatureLevelRecord at offset {offset} sets {METADATA_VERSION_FEATURE} to "
                    f"level {record.feature_level}; this code knows "
                    f"{METADATA_VERSION_MINIMUM}..{METADATA_VERSION_LATEST}"
                )
            self._levels[record.name] = record.feature_level
        elif record.feature_level == 0:
            self._levels.remove(record.name)
        else:
            self._levels[record.name] = record.feature_level

    def snapshot_records(self, offset: int | None = None) -> list[FeatureLevelRecord]:
        """Records that recreate the state at `offset`, `metadata.version` first."""
        levels = self._levels.to_dict(offset)
        names = sorted(levels, key=lambda name: (name != METADATA_VERSION_FEATURE, name))
        return [FeatureLevelRecord(name, levels[name]) for name in names]


def _known_metadata_version(level: int) -> bool:
    return METADATA_VERSION_MINIMUM <= level <= METADATA_VERSION_LATEST
