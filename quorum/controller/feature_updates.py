"""UpdateFeatures' decision (Kafka 4's `FeatureControlManager.updateFeatures`, KIP-584 and
KIP-778): the FeatureLevelRecords a request writes, or the one error that refuses it whole.

Rules (Kafka's, each update checked in turn; the first refusal refuses the request):
- An update (`replog.common.feature_update`) names a feature, a level, and how the level may
  move; a type code Kafka does not define is refused ("The controller does not support the
  given upgrade type.").
- The level is not negative, and lies within every node's supported range: this controller's
  own first ("Local controller N only supports versions 1-12"), then every registered broker's,
  fenced ones included, by id ("Broker N ..."). A feature a node does not advertise supports
  level 0 only ("... does not support this feature.").
- A level below the finalized one needs SAFE_DOWNGRADE or UNSAFE_DOWNGRADE, a level above it
  UPGRADE; the finalized level itself passes either way and is written again.
- `metadata.version`: level 0 is outside every range, so it is never removed; a downgrade
  across a level that changed metadata (`metadata_versions.metadata_changed`) is refused with
  Kafka 4's "Unsupported metadata.version downgrade from 12 to 7. Refusing to perform the
  requested downgrade because it might delete metadata information." (UNSAFE_DOWNGRADE: "Unsafe
  metadata downgrade is not supported in this version."); one across none is done.
- Any other feature must be one Kafka 4 defines ("Feature X not found.", the removal of an
  unknown feature too); those replog does not serve pass at level 0 only (the range check),
  `kraft.version` writing no record, as in Kafka. Above level 0 a feature needs
  `metadata.version` 7 (3.3-IV3, Kafka 4's minimum) and the level's dependencies, both as the
  request would leave the levels (`DEPENDENCIES`: `eligible.leader.replicas.version` 1 needs
  `metadata.version` `ELR_METADATA_VERSION`; `transaction.version` needs nothing more). A
  change of `metadata.version` is refused where a feature it leaves above 0 would lose a
  level it depends on (Kafka needs no such check: its ELR level, 4.0-IV1, changed metadata,
  so no downgrade crosses it). A new log's levels obey the same (`bootstrap_refusal`).
- Order: Kafka's controller collects the updates in a Java HashMap and checks them in its
  iteration order (`java_hash_order`), so the refusal named, and the order of the records, are
  Kafka's; a feature named twice keeps its first place and its last level.
- Every error is INVALID_UPDATE_VERSION whose message is the controller's answer: "The update
  failed for all features since the following feature had an error: Invalid update version 3
  for feature transaction.version. Local controller 1 only supports versions 0-2".
- Pure: the finalized levels and the nodes' ranges come in; records or an error go out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from replog.common import metadata_versions
from replog.common.feature_update import FeatureUpdate, UpgradeType
from replog.errors import InvalidUpdateVersionError, UnknownServerError
from replog.quorum.metadata.records import (
    ELR_VERSION_FEATURE,
    METADATA_VERSION_FEATURE,
    TRANSACTION_VERSION_FEATURE,
    FeatureLevelRecord,
    FeatureRange,
)

UPDATE_FAILED = "The update failed for all features since the following feature had an error: "
# The metadata.version `eligible.leader.replicas.version` 1 needs. Kafka's is 4.0-IV1 (23), a
# record set replog does not write (its newest is 3.6-IV0): the ELR fields ride replog's own
# partition records, so its newest level stands in for Kafka's, and ELR is on only there.
ELR_METADATA_VERSION = 12
# Kafka's FeatureVersion.dependencies of each level of the other features Kafka 4 defines: the
# levels of those replog serves, and level 0 alone of those it does not (a release version's
# downgrade sends each of them at 0, which changes nothing here).
DEPENDENCIES: Mapping[str, Mapping[int, Mapping[str, int]]] = {
    TRANSACTION_VERSION_FEATURE: {0: {}, 1: {}, 2: {}},
    ELR_VERSION_FEATURE: {0: {}, 1: {METADATA_VERSION_FEATURE: ELR_METADATA_VERSION}},
    "group.version": {0: {}},
    "share.version": {0: {}},
    "streams.version": {0: {}},
}
# The Raft quorum's own feature: Kafka's controller hands it to Raft, never to the metadata log.
# replog's quorum is static (level 0), which no update changes.
KRAFT_VERSION_FEATURE = "kraft.version"


def plan_updates(
    updates: Sequence[FeatureUpdate],
    *,
    finalized: Mapping[str, int],
    controller_id: int,
    supported: Iterable[FeatureRange],
    brokers: Mapping[int, Iterable[FeatureRange]],
) -> list[FeatureLevelRecord]:
    """The records `updates` write over the `finalized` levels (`metadata.version` among them),
    checked against this controller's `supported` ranges and each registered broker's; raises
    `InvalidUpdateVersionError` with Kafka's answer (module Rules)."""
    if METADATA_VERSION_FEATURE not in finalized:
        raise UnknownServerError("cannot update features: metadata.version is not finalized yet")
    by_name: dict[str, FeatureUpdate] = {}
    for update in updates:
        by_name[update.feature] = update  # Java's put: the first place, the last value
    proposed = {**finalized, **{name: u.level for name, u in by_name.items()}}
    local = {r.name: r for r in supported}
    ranges = {broker_id: {r.name: r for r in found} for broker_id, found in brokers.items()}
    records = []
    for name in java_hash_order(by_name):
        update = by_name[name]
        reason = _refusal(update, finalized.get(name, 0), proposed, controller_id, local, ranges)
        if reason is not None:
            raise InvalidUpdateVersionError(UPDATE_FAILED + reason)
        if name != KRAFT_VERSION_FEATURE:
            records.append(FeatureLevelRecord(name, update.level))
    metadata_version = by_name.get(METADATA_VERSION_FEATURE)
    if metadata_version is not None:
        for name in sorted(proposed):
            if name in by_name or proposed[name] < 1 or name not in DEPENDENCIES:
                continue
            kept = _unmet_dependency(name, proposed[name], proposed, "kept at")
            if kept is not None:
                raise InvalidUpdateVersionError(UPDATE_FAILED + _invalid(metadata_version, kept))
    return records


def bootstrap_refusal(levels: Mapping[str, int]) -> str | None:
    """Why a new metadata log may not begin with `levels` (`metadata.version` among them): a
    feature above 0 below Kafka 4's minimum metadata.version, or whose dependencies they do
    not meet, as Kafka's `kafka-storage format` refuses it; None when they may."""
    minimum = metadata_versions.KAFKA_MINIMUM
    for name in sorted(levels):
        if name != METADATA_VERSION_FEATURE and levels[name] >= 1 and name in DEPENDENCIES:
            if levels.get(METADATA_VERSION_FEATURE, 0) < minimum:
                return (
                    f"{name} could not be set to {levels[name]} because it depends on "
                    f"metadata.version={minimum} ({metadata_versions.name_of(minimum)})"
                )
            unmet = _unmet_dependency(name, levels[name], levels, "set to")
            if unmet is not None:
                return unmet
    return None


def _refusal(
    update: FeatureUpdate,
    current: int,
    proposed: Mapping[str, int],
    controller_id: int,
    local: Mapping[str, FeatureRange],
    brokers: Mapping[int, Mapping[str, FeatureRange]],
) -> str | None:
    """Why `update` is refused (Kafka's `updateFeature`), None when it passes."""
    name, level, kind = update.feature, update.level, update.upgrade_type
    if kind is UpgradeType.UNKNOWN:
        return _invalid(update, "The controller does not support the given upgrade type.")
    if level < 0:
        return _invalid(update, "A feature version cannot be less than 0.")
    unsupported = _not_supported(level, f"Local controller {controller_id}", local.get(name))
    for broker_id in sorted(brokers):
        if unsupported is None:
            unsupported = _not_supported(level, f"Broker {broker_id}", brokers[broker_id].get(name))
    if unsupported is not None:
        return _invalid(update, unsupported)
    if level < current and kind is UpgradeType.UPGRADE:
        return _invalid(
            update,
            "Can't downgrade the version of this feature without setting the upgrade type to "
            "either safe or unsafe downgrade.",
        )
    if level > current and kind is not UpgradeType.UPGRADE:
        return _invalid(update, "Can't downgrade to a newer version.")
    if name == METADATA_VERSION_FEATURE:
        return _metadata_version_refusal(current, level, kind)
    if name == KRAFT_VERSION_FEATURE:
        return None  # level 0, its level: Kafka writes no FeatureLevelRecord of it
    return _dependency_refusal(update, proposed)


def _metadata_version_refusal(current: int, level: int, kind: UpgradeType) -> str | None:
    """Kafka's `updateMetadataVersion`: a downgrade that might drop metadata is refused."""
    if metadata_versions.name_of(level) is None:
        known = sorted(metadata_versions.NAMES)
        return (
            f"Invalid metadata.version {level}. Valid versions are from {known[0]} to {known[-1]}."
        )
    if level < current and metadata_versions.metadata_changed(current, level):
        why = (
            "Unsafe metadata downgrade is not supported in this version."
            if kind is UpgradeType.UNSAFE_DOWNGRADE
            else "Refusing to perform the requested downgrade because it might delete metadata "
            "information."
        )
        return f"Unsupported metadata.version downgrade from {current} to {level}. {why}"
    return None


def _dependency_refusal(update: FeatureUpdate, proposed: Mapping[str, int]) -> str | None:
    """Kafka's `Feature.validateVersion` over the levels the request would leave."""
    name, level = update.feature, update.level
    levels = DEPENDENCIES.get(name)
    if levels is None:
        return _invalid(update, f"Feature {name} not found.")
    if level not in levels:
        return _invalid(update, f"No feature:{name} with feature level {level}")
    minimum = metadata_versions.KAFKA_MINIMUM
    metadata_version = proposed.get(METADATA_VERSION_FEATURE)
    if level >= 1 and (metadata_version is None or metadata_version < minimum):
        return _invalid(
            update,
            f"{name} could not be set to {level} because it depends on metadata.version="
            f"{minimum} ({metadata_versions.name_of(minimum)})",
        )
    unmet = _unmet_dependency(name, level, proposed, "set to")
    return None if unmet is None else _invalid(update, unmet)


def _unmet_dependency(name: str, level: int, levels: Mapping[str, int], verb: str) -> str | None:
    """Kafka's words for the first dependency of `name` at `level` that `levels` do not meet."""
    for needed, needed_level in DEPENDENCIES[name].get(level, {}).items():
        have = levels.get(needed)
        if have is None or have < needed_level:
            return (
                f"{name} could not be {verb} {level} because it depends on {needed} level "
                f"{needed_level}"
            )
    return None


def _not_supported(level: int, who: str, advertised: FeatureRange | None) -> str | None:
    """Kafka's `QuorumFeatures.reasonNotSupported`: an absent feature is the range 0-0."""
    low, high = (
        (0, 0)
        if advertised is None
        else (advertised.min_supported_version, advertised.max_supported_version)
    )
    if low <= level <= high:
        return None
    if high == 0:
        return f"{who} does not support this feature."
    return f"{who} only supports versions {low if low == high else f'{low}-{high}'}"


def _invalid(update: FeatureUpdate, reason: str) -> str:
    return f"Invalid update version {update.level} for feature {update.feature}. {reason}"


def java_hash_order(names: Iterable[str]) -> list[str]:
    """`names` (distinct, in insertion order) as a `java.util.HashMap` built by putting them in
    that order iterates them: by bucket (the String hash, spread as `HashMap.hash` spreads it,
    masked by the table size, 16 doubled while more than three quarters full), then in
    insertion order within a bucket."""
    ordered = list(names)
    table = 16
    while len(ordered) > table * 3 // 4:
        table *= 2
    return sorted(ordered, key=lambda name: _spread(_java_string_hash(name)) & (table - 1))


def _java_string_hash(text: str) -> int:
    """Java's `String.hashCode` (over UTF-16 code units), as an unsigned 32-bit value."""
    value = 0
    encoded = text.encode("utf-16-be")
    for index in range(0, len(encoded), 2):
        value = (value * 31 + int.from_bytes(encoded[index : index + 2], "big")) & 0xFFFFFFFF
    return value


def _spread(value: int) -> int:
    return value ^ (value >> 16)
