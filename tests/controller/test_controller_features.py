"""UpdateFeatures through the quorum controller (`QuorumController.update_features`): an upgrade
of a log begun at 3.3-IV3 commits on every controller and the brokers' image, and SCRAM
credentials, refused before it, are taken after it; a validate-only request and a refusal write
nothing; a standby answers NOT_CONTROLLER; a snapshot and a failover keep the new level; a
broker registered with an older range holds the cluster back; eligible leader replicas, on from
the bootstrap only where its metadata.version allows them, turn off and on again."""

from __future__ import annotations

import uuid

import pytest

from replog.common.feature_update import FeatureUpdate, UpgradeType
from replog.errors import InvalidUpdateVersionError, NotControllerError, UnsupportedVersionError
from replog.quorum.controller.cluster_control import BrokerRegistrationRequest
from replog.quorum.controller.controller_config import ControllerConfig
from replog.quorum.controller.feature_control import FeatureControl
from replog.quorum.controller.pending_response import PendingResponse
from replog.quorum.metadata.records import (
    METADATA_VERSION_LATEST,
    Endpoint,
    FeatureLevelRecord,
    FeatureRange,
    UserScramCredentialRecord,
)
from replog.security.scram_control import alter_credentials_write
from tests.controller.controller_harness import CLUSTER_ID, Cluster, replayed_image
from tests.controller.test_controller_scram import upsertion

MV, TV, ELR = "metadata.version", "transaction.version", "eligible.leader.replicas.version"
OLD_LEVEL = 7  # 3.3-IV3: the level logs begun by earlier replog releases hold


def update(
    cluster: Cluster, *updates: FeatureUpdate, validate_only: bool = False
) -> PendingResponse[None]:
    pending = cluster.active.update_features(
        list(updates), cluster.now_ms, validate_only=validate_only
    )
    cluster.log.commit()
    return pending


def feature_records(cluster: Cluster) -> list[FeatureLevelRecord]:
    return [r for _, r in cluster.log.committed_records() if isinstance(r, FeatureLevelRecord)]


def test_an_upgrade_commits_everywhere_and_scram_follows_it() -> None:
    cluster = Cluster.with_brokers((1, 2), bootstrap_metadata_version=OLD_LEVEL)
    refused = cluster.active.write(
        alter_credentials_write([], [upsertion("alice", "a")]), cluster.now_ms, "alter"
    )
    cluster.log.commit()
    assert isinstance(refused.result()["alice"], UnsupportedVersionError)
    assert update(cluster, FeatureUpdate(MV, METADATA_VERSION_LATEST)).result() is None
    for controller in cluster.controllers.values():
        assert controller.features.metadata_version() == METADATA_VERSION_LATEST
        assert controller.features.scram_supported()
    image = replayed_image(cluster.log.committed_records())
    assert image.features.metadata_version == METADATA_VERSION_LATEST
    accepted = cluster.active.write(
        alter_credentials_write([], [upsertion("alice", "a")]), cluster.now_ms, "alter"
    )
    cluster.log.commit()
    assert accepted.result() == {"alice": None}
    assert any(isinstance(r, UserScramCredentialRecord) for _, r in cluster.log.committed_records())
    # A failover and a snapshot keep it.
    cluster.elect(2)
    cluster.log.commit()
    assert cluster.active.features.metadata_version() == METADATA_VERSION_LATEST
    assert FeatureLevelRecord(MV, METADATA_VERSION_LATEST) in cluster.active.snapshot_records()


def test_transaction_version_moves_both_ways() -> None:
    cluster = Cluster.with_brokers((1,))
    before = len(feature_records(cluster))
    update(cluster, FeatureUpdate(TV, 1, UpgradeType.SAFE_DOWNGRADE)).result()
    assert cluster.active.features.finalized_levels()[TV] == 1
    update(cluster, FeatureUpdate(TV, 0, UpgradeType.SAFE_DOWNGRADE)).result()
    assert TV not in cluster.active.features.finalized_levels()
    assert TV not in replayed_image(cluster.log.committed_records()).features.levels
    update(cluster, FeatureUpdate(TV, 2)).result()
    assert cluster.controller(3).features.finalized_levels()[TV] == 2
    assert len(feature_records(cluster)) == before + 3


def test_validate_only_and_refusals_write_nothing() -> None:
    cluster = Cluster.with_brokers((1,), bootstrap_metadata_version=OLD_LEVEL)
    written = len(cluster.log.committed_records())
    dry = update(cluster, FeatureUpdate(MV, METADATA_VERSION_LATEST), validate_only=True)
    assert dry.result() is None
    refused = update(cluster, FeatureUpdate(MV, 4, UpgradeType.SAFE_DOWNGRADE))
    assert isinstance(refused.error, InvalidUpdateVersionError)
    assert "Unsupported metadata.version downgrade from 7 to 4." in str(refused.error)
    assert len(cluster.log.committed_records()) == written
    assert cluster.active.features.metadata_version() == OLD_LEVEL


def test_a_standby_answers_not_controller() -> None:
    cluster = Cluster.with_brokers((1,))
    pending = cluster.controller(2).update_features([FeatureUpdate(TV, 2)], cluster.now_ms)
    assert isinstance(pending.error, NotControllerError)


def test_a_broker_with_an_older_range_holds_the_cluster_back() -> None:
    cluster = Cluster.with_brokers((1,), bootstrap_metadata_version=OLD_LEVEL)
    old = (FeatureRange(MV, 1, OLD_LEVEL), FeatureRange(TV, 0, 2))
    registered = cluster.active.register_broker(
        BrokerRegistrationRequest(
            9,
            CLUSTER_ID,
            uuid.UUID(int=9),
            endpoints=(Endpoint("PLAINTEXT", "localhost", 9099),),
            features=old,
        ),
        cluster.now_ms,
    )
    cluster.log.commit()
    assert registered.error is None
    refused = update(cluster, FeatureUpdate(MV, METADATA_VERSION_LATEST))
    assert str(refused.error).endswith(
        "Invalid update version 12 for feature metadata.version. Broker 9 only supports "
        "versions 1-7"
    )


@pytest.mark.parametrize("kind", [UpgradeType.SAFE_DOWNGRADE, UpgradeType.UNSAFE_DOWNGRADE])
def test_a_downgrade_that_loses_no_metadata_is_done(kind: UpgradeType) -> None:
    """12 (3.6-IV0) changed no metadata record: Kafka takes 12 -> 11 under either type."""
    cluster = Cluster.with_brokers((1,))
    update(cluster, FeatureUpdate(MV, 11, kind)).result()
    assert cluster.active.features.metadata_version() == 11


def test_a_bootstrap_level_below_eligible_leader_replicas_is_refused() -> None:
    with pytest.raises(ValueError, match=r"needs bootstrap\.metadata\.version 3\.6-IV0 or later"):
        ControllerConfig(
            node_id=1,
            cluster_id=CLUSTER_ID,
            bootstrap_metadata_version=11,
            eligible_leader_replicas_enable=True,
        )
    with pytest.raises(ValueError, match=r"depends on metadata\.version level 12"):
        FeatureControl.bootstrap_records(11, eligible_leader_replicas=True)
    assert FeatureLevelRecord(ELR, 1) in FeatureControl.bootstrap_records(
        METADATA_VERSION_LATEST, eligible_leader_replicas=True
    )


def elr_after_two_fencings(cluster: Cluster) -> tuple[int, ...]:
    """A new topic's ELR once brokers 1 and 2 of its replicas (1, 2, 3) are fenced, min ISR 2."""
    name = f"t{len(cluster.log.committed_records())}"
    cluster.create_topic(name, 1, 3)
    for broker_id in (1, 2):
        cluster.heartbeat(broker_id, want_fence=True).result()
    (description,) = cluster.active.read(
        lambda ctx: ctx.replication.describe_topics(ctx.offset, [name])
    )
    for broker_id in (1, 2):
        assert not cluster.heartbeat(broker_id).result().is_fenced
    return description.partitions[0].elr


def test_eligible_leader_replicas_turn_off_and_on_again() -> None:
    cluster = Cluster.with_brokers(
        (1, 2, 3),
        eligible_leader_replicas_enable=True,
        static_broker_configs={"min.insync.replicas": "2"},
    )
    assert cluster.active.features.eligible_leader_replicas_enabled()
    assert elr_after_two_fencings(cluster) == (2,)
    update(cluster, FeatureUpdate(ELR, 0, UpgradeType.SAFE_DOWNGRADE)).result()
    assert not cluster.active.features.eligible_leader_replicas_enabled()
    assert elr_after_two_fencings(cluster) == ()
    update(cluster, FeatureUpdate(ELR, 1)).result()
    for controller in cluster.controllers.values():
        assert controller.features.eligible_leader_replicas_enabled()
    assert replayed_image(cluster.log.committed_records()).features.levels[ELR] == 1
    assert elr_after_two_fencings(cluster) == (2,)


def test_eligible_leader_replicas_turn_on_once_metadata_version_allows() -> None:
    cluster = Cluster.with_brokers((1,), bootstrap_metadata_version=OLD_LEVEL)
    assert ELR not in cluster.active.features.finalized_levels()
    refused = update(cluster, FeatureUpdate(ELR, 1))
    assert str(refused.error).endswith("depends on metadata.version level 12")
    update(cluster, FeatureUpdate(MV, METADATA_VERSION_LATEST), FeatureUpdate(ELR, 1)).result()
    assert cluster.active.features.eligible_leader_replicas_enabled()
