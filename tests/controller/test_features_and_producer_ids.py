"""FeatureControl (metadata.version) and ProducerIdControl (blocks of producer ids)."""

from __future__ import annotations

import uuid

import pytest

from replog.errors import MetadataReplayError, StaleBrokerEpochError
from replog.quorum.controller.cluster_control import BrokerRegistrationRequest, ClusterControl
from replog.quorum.controller.controller_config import ControllerConfig
from replog.quorum.controller.feature_control import (
    METADATA_VERSION_LATEST,
    METADATA_VERSION_MINIMUM,
    FeatureControl,
)
from replog.quorum.controller.producer_id_control import (
    PRODUCER_ID_BLOCK_SIZE,
    ProducerIdControl,
    ProducerIdsBlock,
)
from replog.quorum.metadata.records import (
    METADATA_VERSION_FEATURE,
    TRANSACTION_VERSION_FEATURE,
    FeatureLevelRecord,
    FeatureRange,
    ProducerIdsRecord,
    RegisterBrokerRecord,
)
from replog.timeline import SnapshotRegistry


def test_the_bootstrap_record_sets_metadata_version_first() -> None:
    assert FeatureControl.bootstrap_records(METADATA_VERSION_LATEST) == [
        FeatureLevelRecord(METADATA_VERSION_FEATURE, METADATA_VERSION_LATEST),
        FeatureLevelRecord(TRANSACTION_VERSION_FEATURE, 2),
    ]
    with pytest.raises(ValueError, match="cannot bootstrap"):
        FeatureControl.bootstrap_records(METADATA_VERSION_LATEST + 1)


def test_a_new_cluster_can_finalize_an_older_transaction_version() -> None:
    assert FeatureControl.bootstrap_records(METADATA_VERSION_LATEST, 1) == [
        FeatureLevelRecord(METADATA_VERSION_FEATURE, METADATA_VERSION_LATEST),
        FeatureLevelRecord(TRANSACTION_VERSION_FEATURE, 1),
    ]
    # Level 0 is the feature's absence: no record.
    assert FeatureControl.bootstrap_records(METADATA_VERSION_LATEST, 0) == [
        FeatureLevelRecord(METADATA_VERSION_FEATURE, METADATA_VERSION_LATEST)
    ]
    with pytest.raises(ValueError, match=r"transaction\.version level 3"):
        FeatureControl.bootstrap_records(METADATA_VERSION_LATEST, 3)


def test_below_kafkas_minimum_metadata_version_no_transaction_version_is_finalized() -> None:
    # Kafka 4 refuses any feature above level 0 below metadata.version 7 (3.3-IV3), in
    # UpdateFeatures and in `kafka-storage format`: a new log at an older level finalizes none
    # by default, and refuses one asked for, naming the dependency.
    assert FeatureControl.bootstrap_records(6) == [FeatureLevelRecord(METADATA_VERSION_FEATURE, 6)]
    assert FeatureControl.bootstrap_records(7)[1] == FeatureLevelRecord(
        TRANSACTION_VERSION_FEATURE, 2
    )
    with pytest.raises(ValueError, match=r"depends on metadata\.version=7 \(3\.3-IV3\)"):
        FeatureControl.bootstrap_records(6, 2)
    with pytest.raises(ValueError, match=r"bootstrap\.transaction\.version.*metadata\.version"):
        ControllerConfig(1, "c", bootstrap_metadata_version=6, bootstrap_transaction_version=1)
    older = ControllerConfig(1, "c", bootstrap_metadata_version=6)
    assert older.bootstrap_transaction_version is None


def test_feature_replay_and_reads_at_offsets() -> None:
    registry = SnapshotRegistry()
    features = FeatureControl(registry)
    assert features.metadata_version() is None
    features.replay(FeatureLevelRecord(METADATA_VERSION_FEATURE, METADATA_VERSION_MINIMUM), 0)
    features.replay(FeatureLevelRecord("group.version", 1), 1)
    registry.get_or_create_snapshot(1)
    features.replay(FeatureLevelRecord("group.version", 0), 2)  # removed
    features.replay(FeatureLevelRecord(METADATA_VERSION_FEATURE, METADATA_VERSION_LATEST), 3)
    assert features.finalized_levels() == {METADATA_VERSION_FEATURE: METADATA_VERSION_LATEST}
    assert features.metadata_version(1) == METADATA_VERSION_MINIMUM
    assert features.snapshot_records(1) == [
        FeatureLevelRecord(METADATA_VERSION_FEATURE, METADATA_VERSION_MINIMUM),
        FeatureLevelRecord("group.version", 1),
    ]


def test_an_unknown_metadata_version_cannot_be_replayed() -> None:
    features = FeatureControl(SnapshotRegistry())
    with pytest.raises(MetadataReplayError, match=r"offset 4 sets metadata.version to level 0"):
        features.replay(FeatureLevelRecord(METADATA_VERSION_FEATURE, 0), 4)
    with pytest.raises(MetadataReplayError, match="level 99"):
        features.replay(FeatureLevelRecord(METADATA_VERSION_FEATURE, 99), 4)


def test_broker_support_covers_every_finalized_feature() -> None:
    features = FeatureControl(SnapshotRegistry())
    features.replay(FeatureLevelRecord(METADATA_VERSION_FEATURE, 7), 0)
    features.replay(FeatureLevelRecord("group.version", 1), 1)
    supported = (FeatureRange(METADATA_VERSION_FEATURE, 1, 7), FeatureRange("group.version", 0, 1))
    features.check_broker_supports(1, supported)
    with pytest.raises(Exception, match=r"group.version levels 0..0"):
        features.check_broker_supports(1, supported[:1])


@pytest.fixture
def producer_ids() -> tuple[ProducerIdControl, ClusterControl, SnapshotRegistry]:
    registry = SnapshotRegistry()
    features = FeatureControl(registry)
    cluster = ClusterControl(registry, cluster_id="c", features=features)
    cluster.replay(RegisterBrokerRecord(1, uuid.UUID(int=1), 5), 5)
    return ProducerIdControl(registry, cluster), cluster, registry


def test_blocks_are_consecutive_thousands(
    producer_ids: tuple[ProducerIdControl, ClusterControl, SnapshotRegistry],
) -> None:
    control, _, registry = producer_ids
    first = control.generate_next_block(1, 5)
    assert first.response == ProducerIdsBlock(1, 0, PRODUCER_ID_BLOCK_SIZE)
    assert first.records == (ProducerIdsRecord(1, 5, 1000),)
    assert first.is_atomic
    (record,) = first.records
    assert isinstance(record, ProducerIdsRecord)
    control.replay(record, 10)
    registry.get_or_create_snapshot(10)
    second = control.generate_next_block(1, 5)
    assert second.response.first_producer_id == 1000
    assert second.response.last_producer_id == 1999
    (record,) = second.records
    assert isinstance(record, ProducerIdsRecord)
    control.replay(record, 11)
    assert control.next_producer_id() == 2000
    assert control.next_producer_id(10) == 1000
    assert control.snapshot_records(10) == [ProducerIdsRecord(-1, -1, 1000)]


def test_producer_ids_need_the_current_broker_epoch(
    producer_ids: tuple[ProducerIdControl, ClusterControl, SnapshotRegistry],
) -> None:
    control, _, _ = producer_ids
    with pytest.raises(
        StaleBrokerEpochError, match="broker epoch 4, but its registration has broker epoch 5"
    ):
        control.generate_next_block(1, 4)
    with pytest.raises(StaleBrokerEpochError, match="is not registered"):
        control.generate_next_block(2, 5)


def test_a_producer_ids_record_must_move_forward(
    producer_ids: tuple[ProducerIdControl, ClusterControl, SnapshotRegistry],
) -> None:
    control, _, _ = producer_ids
    control.replay(ProducerIdsRecord(1, 5, 1000), 1)
    with pytest.raises(MetadataReplayError, match="from 1000 to 1000, which is not forward"):
        control.replay(ProducerIdsRecord(1, 5, 1000), 2)


def test_registration_requests_carry_their_fields() -> None:
    request = BrokerRegistrationRequest(1, "c", uuid.UUID(int=3))
    assert request.features == () and request.rack is None
