"""UpdateFeatures' decision (`feature_updates`), pure: Kafka 4's FeatureControlManager answers
word for word (ranges of this controller and of each broker, upgrade types, metadata.version
downgrades across a level that changed metadata, dependencies, unknown features), the order of
Java's HashMap, and properties of every accepted or refused request."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replog.common import metadata_versions
from replog.common.feature_update import FeatureUpdate, UpgradeType
from replog.errors import InvalidUpdateVersionError, UnknownServerError
from replog.quorum.controller.feature_updates import (
    ELR_METADATA_VERSION,
    UPDATE_FAILED,
    bootstrap_refusal,
    java_hash_order,
    plan_updates,
)
from replog.quorum.metadata.broker_lifecycle import SUPPORTED_FEATURES
from replog.quorum.metadata.records import (
    METADATA_VERSION_LATEST,
    METADATA_VERSION_MINIMUM,
    FeatureLevelRecord,
    FeatureRange,
)

MV, TV, ELR = "metadata.version", "transaction.version", "eligible.leader.replicas.version"
UP, SAFE, UNSAFE = UpgradeType.UPGRADE, UpgradeType.SAFE_DOWNGRADE, UpgradeType.UNSAFE_DOWNGRADE
KAFKA_ORDER = [
    "group.version",
    "kraft.version",
    "metadata.version",
    "transaction.version",
    "eligible.leader.replicas.version",
]


def plan(
    *updates: FeatureUpdate,
    finalized: dict[str, int] | None = None,
    brokers: dict[int, tuple[FeatureRange, ...]] | None = None,
) -> list[FeatureLevelRecord]:
    return plan_updates(
        updates,
        finalized={MV: 12, TV: 2} if finalized is None else finalized,
        controller_id=1,
        supported=SUPPORTED_FEATURES,
        brokers={2: SUPPORTED_FEATURES, 3: SUPPORTED_FEATURES} if brokers is None else brokers,
    )


def by_name(*updates: FeatureUpdate, finalized: dict[str, int]) -> list[FeatureLevelRecord]:
    """`plan`'s records, by feature name (their order is Kafka's HashMap's)."""
    return sorted(plan(*updates, finalized=finalized), key=lambda r: r.name)


def refusal(*updates: FeatureUpdate, **kwargs: object) -> str:
    with pytest.raises(InvalidUpdateVersionError) as refused:
        plan(*updates, **kwargs)  # type: ignore[arg-type]
    message = str(refused.value)
    assert message.startswith(UPDATE_FAILED)
    return message.removeprefix(UPDATE_FAILED)


def test_an_upgrade_of_metadata_version_writes_its_record() -> None:
    assert plan(FeatureUpdate(MV, 12), finalized={MV: 7}) == [FeatureLevelRecord(MV, 12)]
    # The finalized level itself passes either way and is written again, as in Kafka.
    assert plan(FeatureUpdate(MV, 12)) == [FeatureLevelRecord(MV, 12)]
    assert plan(FeatureUpdate(MV, 12, SAFE)) == [FeatureLevelRecord(MV, 12)]


def test_a_metadata_version_downgrade_across_a_metadata_change_is_refused() -> None:
    # 12 (3.6-IV0) changed no metadata: down to 11 is safe; 11 (3.5-IV2) did: not below it.
    assert plan(FeatureUpdate(MV, 11, SAFE)) == [FeatureLevelRecord(MV, 11)]
    assert refusal(FeatureUpdate(MV, 7, SAFE)) == (
        "Unsupported metadata.version downgrade from 12 to 7. Refusing to perform the "
        "requested downgrade because it might delete metadata information."
    )
    assert refusal(FeatureUpdate(MV, 10, UNSAFE)) == (
        "Unsupported metadata.version downgrade from 12 to 10. Unsafe metadata downgrade is "
        "not supported in this version."
    )
    assert plan(FeatureUpdate(MV, 9, SAFE), finalized={MV: 10}) == [FeatureLevelRecord(MV, 9)]


def test_the_upgrade_type_must_match_the_direction() -> None:
    assert refusal(FeatureUpdate(MV, 11)) == (
        "Invalid update version 11 for feature metadata.version. Can't downgrade the version "
        "of this feature without setting the upgrade type to either safe or unsafe downgrade."
    )
    assert refusal(FeatureUpdate(MV, 12, SAFE), finalized={MV: 7}) == (
        "Invalid update version 12 for feature metadata.version. Can't downgrade to a newer "
        "version."
    )
    assert refusal(FeatureUpdate(TV, 1, UpgradeType.UNKNOWN)) == (
        "Invalid update version 1 for feature transaction.version. The controller does not "
        "support the given upgrade type."
    )
    assert refusal(FeatureUpdate(TV, -1, SAFE)) == (
        "Invalid update version -1 for feature transaction.version. A feature version cannot "
        "be less than 0."
    )


def test_every_node_must_support_the_level() -> None:
    assert refusal(FeatureUpdate(TV, 3)) == (
        "Invalid update version 3 for feature transaction.version. Local controller 1 only "
        "supports versions 0-2"
    )
    # metadata.version is never removed: level 0 is outside every node's range.
    assert refusal(FeatureUpdate(MV, 0, SAFE)) == (
        "Invalid update version 0 for feature metadata.version. Local controller 1 only "
        "supports versions 1-12"
    )
    older = (FeatureRange(MV, 1, 7),)
    brokers = {2: SUPPORTED_FEATURES, 3: older}
    assert refusal(FeatureUpdate(MV, 12), finalized={MV: 7}, brokers=brokers) == (
        "Invalid update version 12 for feature metadata.version. Broker 3 only supports "
        "versions 1-7"
    )
    assert refusal(FeatureUpdate(TV, 2), finalized={MV: 12}, brokers=brokers) == (
        "Invalid update version 2 for feature transaction.version. Broker 3 does not support "
        "this feature."
    )
    assert refusal(FeatureUpdate("group.version", 1)) == (
        "Invalid update version 1 for feature group.version. Local controller 1 does not "
        "support this feature."
    )


def test_features_kafka_defines_and_replog_does_not_serve_pass_at_level_0() -> None:
    assert plan(FeatureUpdate("group.version", 0, SAFE)) == [FeatureLevelRecord("group.version", 0)]
    assert plan(FeatureUpdate("kraft.version", 0, SAFE)) == []  # Raft's, never the log's
    assert refusal(FeatureUpdate("no.such.feature", 0, SAFE)) == (
        "Invalid update version 0 for feature no.such.feature. Feature no.such.feature not found."
    )


def test_dependencies_are_checked_against_the_levels_the_request_leaves() -> None:
    assert refusal(FeatureUpdate(TV, 2), finalized={MV: 6}) == (
        "Invalid update version 2 for feature transaction.version. transaction.version could "
        "not be set to 2 because it depends on metadata.version=7 (3.3-IV3)"
    )
    assert by_name(FeatureUpdate(TV, 2), FeatureUpdate(MV, 7), finalized={MV: 6}) == [
        FeatureLevelRecord(MV, 7),
        FeatureLevelRecord(TV, 2),
    ]
    assert plan(FeatureUpdate(TV, 0, SAFE), finalized={MV: 6, TV: 2}) == [FeatureLevelRecord(TV, 0)]
    assert plan(FeatureUpdate(ELR, 0, SAFE), finalized={MV: 12, ELR: 1}) == [
        FeatureLevelRecord(ELR, 0)
    ]


def test_eligible_leader_replicas_turn_on_again_where_metadata_version_allows() -> None:
    # Level 1 needs metadata.version 3.6-IV0 (12) here (Kafka's 4.0-IV1 is past replog's).
    assert ELR_METADATA_VERSION == 12
    assert plan(FeatureUpdate(ELR, 1), finalized={MV: 12}) == [FeatureLevelRecord(ELR, 1)]
    assert plan(FeatureUpdate(ELR, 1), finalized={MV: 12, ELR: 0}) == [FeatureLevelRecord(ELR, 1)]
    assert refusal(FeatureUpdate(ELR, 1), finalized={MV: 11}) == (
        "Invalid update version 1 for feature eligible.leader.replicas.version. "
        "eligible.leader.replicas.version could not be set to 1 because it depends on "
        "metadata.version level 12"
    )
    assert by_name(FeatureUpdate(ELR, 1), FeatureUpdate(MV, 12), finalized={MV: 11}) == [
        FeatureLevelRecord(ELR, 1),
        FeatureLevelRecord(MV, 12),
    ]
    # A metadata.version downgrade may not leave it on below its level (12 to 11 changes no
    # metadata, so nothing else refuses it); turned off in the same request, it may.
    assert refusal(FeatureUpdate(MV, 11, SAFE), finalized={MV: 12, ELR: 1}) == (
        "Invalid update version 11 for feature metadata.version. "
        "eligible.leader.replicas.version could not be kept at 1 because it depends on "
        "metadata.version level 12"
    )
    assert by_name(
        FeatureUpdate(MV, 11, SAFE), FeatureUpdate(ELR, 0, SAFE), finalized={MV: 12, ELR: 1}
    ) == [FeatureLevelRecord(ELR, 0), FeatureLevelRecord(MV, 11)]
    assert plan(FeatureUpdate(MV, 11, SAFE), finalized={MV: 12}) == [FeatureLevelRecord(MV, 11)]
    assert bootstrap_refusal({MV: 12, ELR: 1}) is None
    assert bootstrap_refusal({MV: 11, ELR: 1}) == (
        "eligible.leader.replicas.version could not be set to 1 because it depends on "
        "metadata.version level 12"
    )


def test_a_level_the_names_do_not_cover_is_refused_by_name() -> None:
    wide = (FeatureRange(MV, 1, 20),)
    valid = r"Invalid metadata\.version 13\. Valid versions are from 1 to 12\."
    with pytest.raises(InvalidUpdateVersionError, match=valid):
        plan_updates(
            [FeatureUpdate(MV, 13)], finalized={MV: 12}, controller_id=1, supported=wide, brokers={}
        )


def test_no_metadata_version_yet_is_a_server_error() -> None:
    with pytest.raises(UnknownServerError):
        plan(FeatureUpdate(TV, 1), finalized={})


def test_the_first_refusal_in_java_hash_order_is_the_answer() -> None:
    # Java 17's HashMap, those names put in this order, iterates them as `KAFKA_ORDER` (jshell).
    names = [TV, MV, ELR, "group.version", "kraft.version"]
    assert java_hash_order(names) == KAFKA_ORDER
    bad = [FeatureUpdate(TV, 99), FeatureUpdate(MV, 99)]
    assert refusal(*bad).startswith(f"Invalid update version 99 for feature {MV}.")
    updates = [FeatureUpdate(TV, 1, SAFE), FeatureUpdate("group.version", 0, SAFE)]
    assert [r.name for r in plan(*updates, FeatureUpdate(MV, 12))] == ["group.version", MV, TV]


def test_java_string_hashes_and_hash_map_order() -> None:
    from replog.quorum.controller.feature_updates import _java_string_hash

    # Values of Java's String.hashCode: "hello", a colliding pair, Integer.MIN_VALUE.
    assert _java_string_hash("hello") == 99162322
    assert _java_string_hash("Aa") == _java_string_hash("BB") == 2112
    assert _java_string_hash("polygenelubricants") == 0x80000000
    # Same bucket: insertion order kept.
    assert java_hash_order(["BB", "Aa"]) == ["BB", "Aa"]
    assert java_hash_order(["Aa", "BB"]) == ["Aa", "BB"]


def test_metadata_version_names_and_changes() -> None:
    # One name per level the metadata code reads and writes.
    assert sorted(metadata_versions.NAMES) == list(
        range(METADATA_VERSION_MINIMUM, METADATA_VERSION_LATEST + 1)
    )
    assert metadata_versions.level_of("3.5-IV2") == 11
    assert metadata_versions.level_of("3.5") == 11
    assert metadata_versions.level_of("3.6") == 12
    assert metadata_versions.level_of("4.0-IV0") is None
    assert not metadata_versions.metadata_changed(12, 11)
    assert metadata_versions.metadata_changed(11, 10)
    assert not metadata_versions.metadata_changed(10, 9)
    assert metadata_versions.metadata_changed(7, 12)
    assert not metadata_versions.metadata_changed(12, 12)


NAMES = st.sampled_from([MV, TV, ELR, "group.version", "kraft.version", "other"])
UPDATES = st.lists(
    st.builds(
        FeatureUpdate,
        NAMES,
        st.integers(-1, 14),
        st.sampled_from(list(UpgradeType)),
    ),
    max_size=4,
)
FINALIZED = st.fixed_dictionaries(
    {MV: st.integers(1, 12)},
    optional={TV: st.integers(1, 2), ELR: st.just(1)},
)


@settings(max_examples=400, deadline=None)
@given(UPDATES, FINALIZED, st.integers(1, 12))
def test_any_request_is_refused_whole_or_leaves_every_level_supported(
    updates: list[FeatureUpdate], finalized: dict[str, int], broker_max: int
) -> None:
    brokers = {2: (FeatureRange(MV, 1, broker_max), FeatureRange(TV, 0, 2))}
    try:
        records = plan_updates(
            updates,
            finalized=finalized,
            controller_id=1,
            supported=SUPPORTED_FEATURES,
            brokers=brokers,
        )
    except InvalidUpdateVersionError as error:
        message = str(error).removeprefix(UPDATE_FAILED)
        assert any(
            message.startswith(f"Invalid update version {u.level} for feature {u.feature}.")
            or message.startswith("Unsupported metadata.version downgrade")
            for u in updates
        )
        return
    levels = dict(finalized)
    last = {u.feature: u for u in updates}
    assert sorted(r.name for r in records) == sorted(n for n in last if n != "kraft.version")
    for record in records:
        update = last[record.name]
        assert record.feature_level == update.level
        assert update.upgrade_type is not UpgradeType.UNKNOWN
        current = levels.get(record.name, 0)
        if update.level > current:
            assert update.upgrade_type is UpgradeType.UPGRADE
        if update.level < current:
            assert update.upgrade_type is not UpgradeType.UPGRADE
    for record in records:
        levels[record.name] = record.feature_level
    if MV in last:
        assert 1 <= levels[MV] <= broker_max
    if MV in last and levels[MV] < finalized[MV]:
        assert not metadata_versions.metadata_changed(finalized[MV], levels[MV])
    if TV in last and levels[TV] >= 1:
        assert levels[MV] >= metadata_versions.KAFKA_MINIMUM
    assert levels.get(ELR, 0) == finalized.get(ELR, 0) or levels.get(ELR) == 0
