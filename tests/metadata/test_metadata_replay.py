"""Replaying each metadata record kind into a MetadataDelta: Kafka's semantics, one scenario per
rule, and the typed error for a record that names something the image does not hold."""

from __future__ import annotations

from dataclasses import replace
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import given, settings
from metadata_helpers import (
    bootstrapped,
    create_topic,
    delta_of,
    register,
    replayed,
    topic_id,
)
from metadata_strategies import partition, partition_change

from replog.errors import MetadataReplayError
from replog.quorum.metadata.broker_registration import BrokerRegistration
from replog.quorum.metadata.delta import MetadataDelta
from replog.quorum.metadata.image import (
    ConfigResource,
    MetadataImage,
    MetadataProvenance,
    TopicsImage,
)
from replog.quorum.metadata.partition_registration import PartitionRegistration
from replog.quorum.metadata.records import (
    LEADER_UNCHANGED,
    METADATA_VERSION_FEATURE,
    NO_LEADER,
    RECOVERY_STATE_UNCHANGED,
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    ConfigResourceType,
    FeatureLevelRecord,
    FenceChange,
    LeaderRecoveryState,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RemoveTopicRecord,
    TopicRecord,
    UnregisterBrokerRecord,
)

ORDERS = topic_id(1)
PAYMENTS = topic_id(2)
TOPIC = ConfigResourceType.TOPIC
BROKER = ConfigResourceType.BROKER


def replay_error(image: MetadataImage, *records: object) -> str:
    with pytest.raises(MetadataReplayError) as caught:
        delta_of(image, *records)  # type: ignore[arg-type]
    return str(caught.value)


# --- brokers -------------------------------------------------------------------------------------


def test_register_broker_keeps_the_record_and_its_broker_epoch() -> None:
    image = replayed(bootstrapped(), register(1, broker_epoch=1))
    assert image.cluster.brokers[1] == BrokerRegistration.from_record(register(1, 1))
    assert image.cluster.brokers[1].broker_epoch == 1
    assert image.cluster.brokers[1].fenced  # a new registration starts fenced
    assert image.cluster.brokers[1].endpoint("PLAINTEXT") is not None
    assert image.cluster.active_broker_ids() == []


def test_a_new_registration_replaces_the_old_one_flags_and_all() -> None:
    image = replayed(
        bootstrapped(),
        register(1, broker_epoch=1),
        BrokerRegistrationChangeRecord(1, 1, FenceChange.UNFENCE, in_controlled_shutdown=True),
        register(1, broker_epoch=3),
    )
    broker = image.cluster.brokers[1]
    assert (broker.broker_epoch, broker.fenced, broker.in_controlled_shutdown) == (3, True, False)


def test_broker_registration_change_fences_unfences_and_starts_controlled_shutdown() -> None:
    image = replayed(bootstrapped(), register(1, 1))
    steps = [
        (BrokerRegistrationChangeRecord(1, 1, FenceChange.UNFENCE), (False, False)),
        (BrokerRegistrationChangeRecord(1, 1, FenceChange.NONE), (False, False)),
        (BrokerRegistrationChangeRecord(1, 1, FenceChange.NONE, True), (False, True)),
        # False means "no change": only a new registration leaves controlled shutdown.
        (BrokerRegistrationChangeRecord(1, 1, FenceChange.NONE, False), (False, True)),
        (BrokerRegistrationChangeRecord(1, 1, FenceChange.FENCE), (True, True)),
    ]
    for change, (fenced, in_controlled_shutdown) in steps:
        image = replayed(image, change)
        broker = image.cluster.brokers[1]
        assert (broker.fenced, broker.in_controlled_shutdown) == (fenced, in_controlled_shutdown)


def test_whether_a_broker_leads_anything_is_a_lookup_not_a_walk() -> None:
    """A broker in controlled shutdown asks at every image whether it leads anything: a walk
    over 100,000 partitions each time held its loop 54-61 ms of CPU. The image's leader
    counts (kept by each delta) answer without visiting a partition."""

    class Unwalkable(dict[Any, Any]):
        def values(self) -> Any:
            raise AssertionError("the partitions were walked")

    image = replayed(
        bootstrapped(),
        *(register(b, b) for b in (1, 2)),
        BrokerRegistrationChangeRecord(1, 1, FenceChange.UNFENCE),
        *create_topic("orders", ORDERS, (1, 2), (2, 1)),
        BrokerRegistrationChangeRecord(1, 1, FenceChange.NONE, True),
    )
    topics = replace(image.topics, by_id=Unwalkable(image.topics.by_id))
    image = replace(image, topics=topics)
    assert dict(image.topics.leaders) == {1: 1, 2: 1}
    assert not image.leaves_nothing_to_hand_over(1)
    image = replayed(image, PartitionChangeRecord(ORDERS, 0, leader=NO_LEADER))
    assert dict(image.topics.leaders) == {2: 1}
    assert image.leaves_nothing_to_hand_over(1)


def test_an_unfenced_broker_outside_controlled_shutdown_is_active() -> None:
    image = replayed(
        bootstrapped(),
        register(1, 1),
        register(2, 2),
        BrokerRegistrationChangeRecord(1, 1, FenceChange.UNFENCE),
    )
    assert image.cluster.active_broker_ids() == [1]


def test_a_broker_has_nothing_to_hand_over_once_it_leads_nothing_and_no_other_is_active() -> None:
    unfence = [BrokerRegistrationChangeRecord(b, b, FenceChange.UNFENCE) for b in (1, 2, 3)]
    image = replayed(
        bootstrapped(),
        *(register(b, b) for b in (1, 2, 3)),
        *unfence,
        *create_topic("orders", ORDERS, (1, 2, 3), (2, 3, 1)),
    )
    stopping = [BrokerRegistrationChangeRecord(b, b, FenceChange.NONE, True) for b in (1, 2, 3)]
    assert not image.leaves_nothing_to_hand_over(3)  # brokers 1 and 2 are active
    image = replayed(image, stopping[0], stopping[1])
    assert image.leaves_nothing_to_hand_over(3)  # leads nothing; the others are leaving
    assert not image.leaves_nothing_to_hand_over(1)  # leads orders-0, and 3 is active
    image = replayed(image, stopping[2], PartitionChangeRecord(ORDERS, 0, leader=NO_LEADER))
    assert image.leaves_nothing_to_hand_over(1)
    assert not image.leaves_nothing_to_hand_over(2)  # still leads orders-1
    # A fenced broker is not active either; a new, unfenced registration is.
    image = replayed(image, BrokerRegistrationChangeRecord(3, 3, FenceChange.FENCE))
    assert image.leaves_nothing_to_hand_over(3)
    image = replayed(
        image, register(3, 10), BrokerRegistrationChangeRecord(3, 10, FenceChange.UNFENCE)
    )
    assert not image.leaves_nothing_to_hand_over(1)


def test_unregister_broker_removes_the_registration() -> None:
    image = replayed(bootstrapped(), register(1, 1), register(2, 2))
    image = replayed(image, UnregisterBrokerRecord(1, 1))
    assert set(image.cluster.brokers) == {2}


@pytest.mark.parametrize(
    "record",
    [
        UnregisterBrokerRecord(9, 1),
        BrokerRegistrationChangeRecord(9, 1, FenceChange.UNFENCE),
    ],
)
def test_a_change_for_an_unregistered_broker_is_an_error(record: object) -> None:
    message = replay_error(replayed(bootstrapped(), register(1, 1)), record)
    assert "broker 9, which is not registered" in message
    assert type(record).__name__ in message


@pytest.mark.parametrize(
    "record",
    [
        UnregisterBrokerRecord(1, 1),
        BrokerRegistrationChangeRecord(1, 1, FenceChange.UNFENCE),
    ],
)
def test_a_change_at_a_stale_broker_epoch_is_an_error(record: object) -> None:
    image = replayed(bootstrapped(), register(1, 1), register(1, 2))
    message = replay_error(image, record)
    assert "broker 1 at broker epoch 1, but its registration has broker epoch 2" in message


def test_an_unregistered_broker_cannot_be_changed_later_in_the_same_delta() -> None:
    image = replayed(bootstrapped(), register(1, 1))
    message = replay_error(
        image, UnregisterBrokerRecord(1, 1), BrokerRegistrationChangeRecord(1, 1)
    )
    assert "not registered" in message


# --- topics and partitions ---------------------------------------------------------------------


def test_topic_record_creates_an_empty_topic_found_by_id_and_by_name() -> None:
    image = replayed(bootstrapped(), TopicRecord("orders", ORDERS))
    topic = image.topics.by_id[ORDERS]
    assert image.topics.by_name["orders"] is topic
    assert (topic.name, topic.topic_id, dict(topic.partitions)) == ("orders", ORDERS, {})


def test_partition_record_creates_a_partition_registration() -> None:
    record = PartitionRecord(ORDERS, 0, (1, 2, 3), (1, 2), leader=1, leader_epoch=4)
    image = replayed(bootstrapped(), TopicRecord("orders", ORDERS), record)
    assert image.topics.partition(ORDERS, 0) == PartitionRegistration.from_record(record)
    assert image.topics.partition(ORDERS, 1) is None
    assert image.topics.partition(PAYMENTS, 0) is None


def test_a_partition_record_for_an_existing_partition_replaces_it() -> None:
    image = replayed(bootstrapped(), *create_topic("orders", ORDERS, (1, 2)))
    record = PartitionRecord(ORDERS, 0, (3,), (3,), leader=3, leader_epoch=9, partition_epoch=9)
    image = replayed(image, record)
    assert image.topics.partition(ORDERS, 0) == PartitionRegistration.from_record(record)


def test_partition_change_merges_fields_and_bumps_epochs() -> None:
    image = replayed(bootstrapped(), *create_topic("orders", ORDERS, (1, 2, 3)))
    # An ISR shrink: the partition epoch moves, the leader epoch does not.
    image = replayed(image, PartitionChangeRecord(ORDERS, 0, isr=(1, 2)))
    p = image.topics.partition(ORDERS, 0)
    assert p is not None
    assert (p.isr, p.leader, p.leader_epoch, p.partition_epoch) == ((1, 2), 1, 0, 1)
    # A new leader: both epochs move.
    image = replayed(image, PartitionChangeRecord(ORDERS, 0, leader=2))
    p = image.topics.partition(ORDERS, 0)
    assert p is not None
    assert (p.isr, p.leader, p.leader_epoch, p.partition_epoch) == ((1, 2), 2, 1, 2)
    # Naming the same leader again forces a leader epoch bump.
    image = replayed(image, PartitionChangeRecord(ORDERS, 0, leader=2))
    p = image.topics.partition(ORDERS, 0)
    assert p is not None
    assert (p.leader, p.leader_epoch, p.partition_epoch) == (2, 2, 3)
    # An unclean election: no leader, then a recovering one.
    image = replayed(
        image,
        PartitionChangeRecord(ORDERS, 0, leader=NO_LEADER),
        PartitionChangeRecord(ORDERS, 0, isr=(3,), leader=3, leader_recovery_state=1),
    )
    p = image.topics.partition(ORDERS, 0)
    assert p is not None
    assert (p.isr, p.leader, p.leader_epoch, p.partition_epoch) == ((3,), 3, 4, 5)
    assert p.leader_recovery_state is LeaderRecoveryState.RECOVERING
    assert p.replicas == (1, 2, 3)


@settings(max_examples=300, deadline=None)
@given(record=partition, change=partition_change)
def test_a_merge_overwrites_what_the_change_carries_and_bumps_the_epochs(
    record: PartitionRecord, change: PartitionChangeRecord
) -> None:
    """Every field, each way: from_record keeps them all, merge takes each one the change
    carries, and the epochs follow Kafka's rules (module docstring of partition_registration)."""
    before = PartitionRegistration.from_record(record)
    assert before.to_record(record.topic_id, record.partition_id) == record
    leader_named = change.leader != LEADER_UNCHANGED
    recovery_named = change.leader_recovery_state != RECOVERY_STATE_UNCHANGED
    assert before.merge(change) == before._replace(
        replicas=before.replicas if change.replicas is None else change.replicas,
        isr=before.isr if change.isr is None else change.isr,
        leader=change.leader if leader_named else before.leader,
        leader_epoch=before.leader_epoch + leader_named,
        partition_epoch=before.partition_epoch + 1,
        removing_replicas=(
            before.removing_replicas
            if change.removing_replicas is None
            else change.removing_replicas
        ),
        adding_replicas=(
            before.adding_replicas if change.adding_replicas is None else change.adding_replicas
        ),
        leader_recovery_state=(
            LeaderRecoveryState(change.leader_recovery_state)
            if recovery_named
            else before.leader_recovery_state
        ),
        elr=before.elr if change.elr is None else change.elr,
        last_known_elr=(
            before.last_known_elr if change.last_known_elr is None else change.last_known_elr
        ),
    )


@given(record=partition)
def test_a_registration_from_a_record_is_its_fields_by_name(record: PartitionRecord) -> None:
    """`from_record` takes the record's fields after its ids as they stand (a slice): each
    by name, into a `PartitionRegistration`."""
    registration = PartitionRegistration.from_record(record)
    assert type(registration) is PartitionRegistration
    for name in PartitionRegistration._fields:
        assert getattr(registration, name) is getattr(record, name), name


@given(partition, partition)
def test_a_registration_is_immutable_and_equal_by_value(
    first_record: PartitionRecord, second_record: PartitionRecord
) -> None:
    """What the frozen dataclass gave: no field can be set, and equality (and the hash) is
    the fields'."""
    first = PartitionRegistration.from_record(first_record)
    second = PartitionRegistration.from_record(second_record)
    with pytest.raises(AttributeError):
        first.leader = 7  # type: ignore[misc]
    copy = PartitionRegistration(*first)
    assert copy == first and hash(copy) == hash(first)
    assert (first == second) == all(
        getattr(first, name) == getattr(second, name) for name in PartitionRegistration._fields
    )


def test_partition_changes_within_one_delta_merge_in_order() -> None:
    image = replayed(bootstrapped(), *create_topic("orders", ORDERS, (1, 2, 3)))
    image = replayed(
        image,
        PartitionChangeRecord(ORDERS, 0, replicas=(1, 2, 3, 4), adding_replicas=(4,)),
        PartitionChangeRecord(ORDERS, 0, isr=(1, 2, 3, 4)),
        PartitionChangeRecord(ORDERS, 0, replicas=(2, 3, 4), isr=(2, 3, 4), adding_replicas=()),
    )
    p = image.topics.partition(ORDERS, 0)
    assert p is not None
    assert (p.replicas, p.isr, p.adding_replicas, p.partition_epoch) == (
        (2, 3, 4),
        (2, 3, 4),
        (),
        3,
    )


@pytest.mark.parametrize(
    "record",
    [
        PartitionRecord(PAYMENTS, 0, (1,), (1,), 1),
        PartitionChangeRecord(PAYMENTS, 0, leader=1),
        RemoveTopicRecord(PAYMENTS),
    ],
)
def test_a_record_for_an_unknown_topic_is_an_error(record: object) -> None:
    image = replayed(bootstrapped(), *create_topic("orders", ORDERS, (1,)))
    message = replay_error(image, record)
    assert f"names unknown topic id {PAYMENTS}" in message
    assert type(record).__name__ in message


def test_a_change_for_an_unknown_partition_is_an_error() -> None:
    image = replayed(bootstrapped(), *create_topic("orders", ORDERS, (1,)))
    message = replay_error(image, PartitionChangeRecord(ORDERS, 5, leader=1))
    assert f"unknown partition orders-5 (topic id {ORDERS})" in message


def test_a_topic_name_or_id_in_use_is_an_error() -> None:
    image = replayed(bootstrapped(), TopicRecord("orders", ORDERS))
    assert f"topic id {ORDERS} already has that name" in replay_error(
        image, TopicRecord("orders", PAYMENTS)
    )
    assert "already in use" in replay_error(image, TopicRecord("payments", ORDERS))
    # A removed topic's id never comes back, even under another name.
    assert "already in use" in replay_error(
        image, RemoveTopicRecord(ORDERS), TopicRecord("payments", ORDERS)
    )


def test_remove_topic_removes_the_topic_its_partitions_and_its_configs() -> None:
    image = replayed(
        bootstrapped(),
        *create_topic("orders", ORDERS, (1, 2), (2, 3)),
        *create_topic("payments", PAYMENTS, (1,)),
        ConfigRecord(TOPIC, "orders", "retention.ms", "1000"),
        ConfigRecord(TOPIC, "payments", "retention.ms", "2000"),
        ConfigRecord(BROKER, "1", "log.retention.ms", "3000"),
    )
    image = replayed(image, RemoveTopicRecord(ORDERS))
    assert ORDERS not in image.topics.by_id
    assert "orders" not in image.topics.by_name
    assert image.topics.partition(ORDERS, 0) is None
    assert ConfigResource(TOPIC, "orders") not in image.configs.resources
    assert dict(image.configs.get(ConfigResource(TOPIC, "payments"))) == {"retention.ms": "2000"}
    assert dict(image.configs.get(ConfigResource(BROKER, "1"))) == {"log.retention.ms": "3000"}


def test_a_removed_name_comes_back_with_a_new_id_and_no_old_configs_in_one_delta() -> None:
    image = replayed(
        bootstrapped(),
        *create_topic("orders", ORDERS, (1, 2)),
        ConfigRecord(TOPIC, "orders", "retention.ms", "1000"),
    )
    delta = delta_of(
        image,
        RemoveTopicRecord(ORDERS),
        *create_topic("orders", PAYMENTS, (3,)),
        ConfigRecord(TOPIC, "orders", "segment.bytes", "4096"),
    )
    assert delta.deleted_topic_ids == {ORDERS}
    assert set(delta.topic_deltas) == {PAYMENTS}
    new = delta.apply(MetadataProvenance(9, 1))
    assert new.topics.by_name["orders"].topic_id == PAYMENTS
    assert set(new.topics.by_id) == {PAYMENTS}
    assert dict(new.configs.get(ConfigResource(TOPIC, "orders"))) == {"segment.bytes": "4096"}


def test_a_topic_created_and_removed_in_one_delta_leaves_no_trace() -> None:
    base = bootstrapped()
    delta = delta_of(base, *create_topic("orders", ORDERS, (1,)), RemoveTopicRecord(ORDERS))
    assert delta.deleted_topic_ids == frozenset()
    assert dict(delta.topic_deltas) == {}
    image = delta.apply(MetadataProvenance(3, 1))
    assert image.topics == base.topics
    # And the name is free again.
    delta.replay(TopicRecord("orders", PAYMENTS), 4)
    assert delta.apply(MetadataProvenance(4, 1)).topics.by_name["orders"].topic_id == PAYMENTS


# --- configs, features, producer ids, no-ops -----------------------------------------------------


def test_config_record_sets_overwrites_and_deletes_keys() -> None:
    orders = ConfigResource(TOPIC, "orders")
    image = replayed(
        bootstrapped(),
        ConfigRecord(TOPIC, "orders", "retention.ms", "1000"),
        ConfigRecord(TOPIC, "orders", "retention.ms", "2000"),
        ConfigRecord(TOPIC, "orders", "min.insync.replicas", "2"),
        ConfigRecord(BROKER, "", "min.insync.replicas", "1"),  # the cluster-wide default
    )
    assert dict(image.configs.get(orders)) == {"retention.ms": "2000", "min.insync.replicas": "2"}
    assert dict(image.configs.get(ConfigResource(BROKER, ""))) == {"min.insync.replicas": "1"}
    image = replayed(
        image,
        ConfigRecord(TOPIC, "orders", "retention.ms", None),
        ConfigRecord(TOPIC, "orders", "no.such.key", None),  # deleting nothing is fine
    )
    assert dict(image.configs.get(orders)) == {"min.insync.replicas": "2"}


def test_a_resource_with_no_keys_left_disappears() -> None:
    orders = ConfigResource(TOPIC, "orders")
    image = replayed(bootstrapped(), ConfigRecord(TOPIC, "orders", "retention.ms", "1000"))
    assert orders in image.configs.resources
    image = replayed(image, ConfigRecord(TOPIC, "orders", "retention.ms", None))
    assert orders not in image.configs.resources
    assert dict(image.configs.get(orders)) == {}


def test_feature_level_record_sets_and_removes_features() -> None:
    image = replayed(
        MetadataImage.EMPTY,
        FeatureLevelRecord(METADATA_VERSION_FEATURE, 7),
        FeatureLevelRecord("kraft.version", 1),
    )
    assert image.features.metadata_version == 7
    assert dict(image.features.levels) == {METADATA_VERSION_FEATURE: 7, "kraft.version": 1}
    image = replayed(
        image,
        FeatureLevelRecord(METADATA_VERSION_FEATURE, 8),
        FeatureLevelRecord("kraft.version", 0),
    )
    assert dict(image.features.levels) == {METADATA_VERSION_FEATURE: 8}


def test_metadata_version_cannot_be_removed() -> None:
    message = replay_error(bootstrapped(), FeatureLevelRecord(METADATA_VERSION_FEATURE, 0))
    assert "metadata.version to level 0" in message


def test_an_image_has_no_metadata_version_before_its_first_feature_level_record() -> None:
    assert MetadataImage.EMPTY.features.metadata_version is None


def test_producer_ids_record_moves_the_next_block_forward_only() -> None:
    assert MetadataImage.EMPTY.next_producer_id == -1
    image = replayed(bootstrapped(), ProducerIdsRecord(1, 1, 1000), ProducerIdsRecord(2, 5, 2000))
    assert image.next_producer_id == 2000
    message = replay_error(image, ProducerIdsRecord(1, 1, 2000))
    assert "moves the next producer id back from 2000 to 2000" in message


def test_no_op_record_changes_nothing_but_the_provenance() -> None:
    base = replayed(bootstrapped(), register(1, 1), *create_topic("orders", ORDERS, (1,)))
    image = replayed(base, NoOpRecord(), NoOpRecord())
    assert image.provenance == MetadataProvenance(base.provenance.last_offset + 2, 3)
    assert image.features is base.features
    assert image.cluster is base.cluster
    assert image.topics is base.topics
    assert image.configs is base.configs


# --- images: sharing, immutability, provenance, offsets ------------------------------------------


def test_a_new_image_reuses_every_part_the_delta_did_not_touch() -> None:
    base = replayed(
        bootstrapped(),
        register(1, 1),
        *create_topic("orders", ORDERS, (1,), (1,)),
        *create_topic("payments", PAYMENTS, (1,)),
    )
    image = replayed(base, PartitionChangeRecord(ORDERS, 1, leader=1))
    assert image.topics.by_id[PAYMENTS] is base.topics.by_id[PAYMENTS]
    assert image.topics.by_id[ORDERS].partitions[0] is base.topics.by_id[ORDERS].partitions[0]
    assert image.topics.by_id[ORDERS] is not base.topics.by_id[ORDERS]
    assert image.topics.by_name["orders"] is image.topics.by_id[ORDERS]
    assert image.cluster is base.cluster
    assert image.features is base.features
    assert image.configs is base.configs
    # The base image is untouched.
    assert base.topics.partition(ORDERS, 1).leader_epoch == 0  # type: ignore[union-attr]


class _CountingDict(dict[object, object]):
    """A dict that counts the reads of single keys (a copy key by key makes one a key)."""

    reads = 0

    def __getitem__(self, key: object) -> object:
        _CountingDict.reads += 1
        return super().__getitem__(key)


def test_a_new_image_copies_the_topic_indexes_whole_not_key_by_key() -> None:
    # An image's topic indexes are read-only proxies; `dict()` copies one key by key through
    # the proxy: 5 ms for the two indexes of 10,000 topics, each image a delta builds (a
    # broker publishes one a committed batch: the largest piece of its loop turns while
    # 100,000 partitions were created). The proxy's own copy is the dict's, whole (0.2 ms).
    base = replayed(bootstrapped(), *create_topic("orders", ORDERS, (1,)))
    by_id = _CountingDict(base.topics.by_id)
    by_name = _CountingDict(base.topics.by_name)
    base = replace(base, topics=TopicsImage(MappingProxyType(by_id), MappingProxyType(by_name)))
    _CountingDict.reads = 0
    image = replayed(base, TopicRecord("payments", PAYMENTS))
    assert _CountingDict.reads == 0
    assert set(image.topics.by_name) == {"orders", "payments"}
    assert image.topics.by_id[ORDERS] is base.topics.by_id[ORDERS]


def test_images_are_read_only() -> None:
    image = replayed(bootstrapped(), *create_topic("orders", ORDERS, (1,)))
    with pytest.raises(TypeError):
        image.topics.by_id[PAYMENTS] = image.topics.by_id[ORDERS]  # type: ignore[index]
    with pytest.raises(TypeError):
        image.topics.by_id[ORDERS].partitions[1] = image.topics.partition(ORDERS, 0)  # type: ignore[index]
    with pytest.raises(AttributeError):
        image.next_producer_id = 5  # type: ignore[misc]


def test_the_provenance_names_the_snapshot_id() -> None:
    image = replayed(bootstrapped(), NoOpRecord())
    assert image.provenance == MetadataProvenance(1, 3)
    assert (
        image.provenance.snapshot_id().file_name() == "00000000000000000002-0000000003.checkpoint"
    )


def test_records_replayed_out_of_order_are_an_error() -> None:
    image = replayed(bootstrapped(), NoOpRecord())  # ends at offset 1
    delta = MetadataDelta(image)
    with pytest.raises(MetadataReplayError, match="base image ends at offset 1"):
        delta.replay(NoOpRecord(), 1)
    delta.replay(NoOpRecord(), 5)
    delta.replay(NoOpRecord(), 5)  # records of one snapshot share an offset
    with pytest.raises(MetadataReplayError, match="previous record was at offset 5"):
        delta.replay(NoOpRecord(), 4)
    with pytest.raises(MetadataReplayError, match="before the last replayed record at offset 5"):
        delta.apply(MetadataProvenance(4, 3))


def test_a_delta_applies_again_after_more_records() -> None:
    base = bootstrapped()
    delta = delta_of(base, *create_topic("orders", ORDERS, (1,)))
    first = delta.apply(MetadataProvenance(2, 3))
    assert delta.apply(MetadataProvenance(2, 3)) == first
    delta.replay(PartitionChangeRecord(ORDERS, 0, leader=1), 3)
    second = delta.apply(MetadataProvenance(3, 3))
    assert second.topics.partition(ORDERS, 0).leader_epoch == 1  # type: ignore[union-attr]
    assert first.topics.partition(ORDERS, 0).leader_epoch == 0  # type: ignore[union-attr]


def test_the_delta_reports_what_changed() -> None:
    base = replayed(
        bootstrapped(),
        register(1, 1),
        register(2, 2),
        *create_topic("orders", ORDERS, (1,), (2,)),
        *create_topic("payments", PAYMENTS, (1,)),
    )
    delta = delta_of(
        base,
        BrokerRegistrationChangeRecord(1, 1, FenceChange.UNFENCE),
        UnregisterBrokerRecord(2, 2),
        PartitionChangeRecord(ORDERS, 1, leader=2),
        RemoveTopicRecord(PAYMENTS),
        FeatureLevelRecord("kraft.version", 1),
        ConfigRecord(BROKER, "1", "log.retention.ms", "5"),
    )
    assert set(delta.broker_changes) == {1, 2}
    assert delta.broker_changes[2] is None
    assert delta.broker_changes[1] is not None and not delta.broker_changes[1].fenced
    assert set(delta.topic_deltas) == {ORDERS}
    orders = delta.topic_deltas[ORDERS]
    assert not orders.is_new
    assert set(orders.partition_changes) == {1}
    assert delta.deleted_topic_ids == {PAYMENTS}
    assert dict(delta.feature_changes) == {"kraft.version": 1}
    assert delta.changed_config_resources == {
        ConfigResource(BROKER, "1"),
        ConfigResource(TOPIC, "payments"),  # the removed topic's configs went with it
    }
