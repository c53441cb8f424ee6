"""The consumer-protocol group records' bytes: Kafka's layouts (examples whose bytes Kafka
4.4.0's own generated classes wrote, `MessageUtil.toVersionPrefixedBytes`), every
record type through its bytes and back, unknown tagged fields skipped, bad bytes refused, and
the offsets loader handing them to the consumer groups' replay."""

from __future__ import annotations

from dataclasses import replace
from uuid import UUID

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replog.coordinator import consumer_group_records as rec
from replog.coordinator.offsets_cache import OffsetsCache, ReplayStats, replay_record
from replog.errors import CorruptRecordError

T1 = UUID(int=1)


def test_group_epoch_record_bytes() -> None:
    key = rec.ConsumerGroupKey(rec.CONSUMER_GROUP_METADATA, "g")
    assert rec.encode_consumer_group_key(key) == bytes.fromhex("0003 0001 67")
    # value version 0, epoch 5, no tagged fields
    assert rec.encode_consumer_group_value(rec.GroupEpochValue(5)) == bytes.fromhex(
        "0000 00000005 00"
    )


def test_current_assignment_record_bytes() -> None:
    key = rec.ConsumerGroupKey(rec.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT, "g", "m")
    assert rec.encode_consumer_group_key(key) == bytes.fromhex("0008 0001 67 0001 6d")
    value = rec.CurrentAssignmentValue(3, 2, 1, ((T1, (0, 2)),), ())
    assert rec.encode_consumer_group_value(value) == bytes.fromhex(
        "0000 00000003 00000002 01"
        # assigned: 1 topic (varint 2): uuid, 2 partitions (varint 3), no tags
        "02" + T1.hex + "03 00000000 00000002 00"
        # pending revocation: empty (varint 1), then the value's tags
        "01 00"
    )


def test_member_metadata_record_bytes() -> None:
    value = rec.MemberMetadataValue(None, None, "c", "h", ("t",), None, 500, "range")
    assert rec.encode_consumer_group_value(value) == bytes.fromhex(
        "0000 00 00 0263 0268 02 0274 00 000001f4 0672616e6765 00"
    )


def test_classic_member_metadata_is_tag_0_of_the_member_record() -> None:
    classic = rec.ClassicMemberMetadata(10_000, (("range", b"\x00\x03"),))
    value = rec.MemberMetadataValue(None, None, "c", "h", ("t",), None, 500, None, classic)
    data = rec.encode_consumer_group_value(value)
    # the fields, then 1 tagged field: tag 0, its size, then session timeout, 1 protocol
    # (name "range", metadata 2 bytes, no tags), no tags of the struct
    field = "00002710 02 0672616e6765 03 0003 00 00"
    assert data == bytes.fromhex("0000 00 00 0263 0268 02 0274 00 000001f4 00" + "01 00 10" + field)
    assert rec.decode_consumer_group_value(rec.CONSUMER_GROUP_MEMBER_METADATA, data) == value


names = st.text(max_size=5)
partitions = st.lists(
    st.tuples(st.uuids(), st.lists(st.integers(0, 1000), unique=True, max_size=4)), max_size=3
).map(lambda ts: tuple((t, tuple(sorted(ps))) for t, ps in ts))
values = st.one_of(
    st.builds(rec.GroupEpochValue, st.integers(-(2**31), 2**31 - 1)),
    st.builds(
        rec.PartitionMetadataValue,
        st.lists(st.builds(rec.TopicMetadata, st.uuids(), names, st.integers(0, 99))).map(tuple),
    ),
    st.builds(
        rec.MemberMetadataValue,
        st.none() | names,
        st.none() | names,
        names,
        names,
        st.lists(names, max_size=3).map(tuple),
        st.none() | names,
        st.integers(-1, 10**6),
        st.none() | names,
        st.none()
        | st.builds(
            rec.ClassicMemberMetadata,
            st.integers(1, 10**6),
            st.lists(st.tuples(names, st.binary(max_size=6)), max_size=2).map(tuple),
        ),
    ),
    st.builds(rec.TargetAssignmentEpochValue, st.integers(-1, 99)),
    st.builds(rec.TargetAssignmentMemberValue, partitions),
    st.builds(
        rec.CurrentAssignmentValue,
        st.integers(-2, 99),
        st.integers(-2, 99),
        st.sampled_from([0, 1, 2, 127]),
        partitions,
        partitions,
    ),
)
TYPES = {
    rec.GroupEpochValue: 3,
    rec.PartitionMetadataValue: 4,
    rec.MemberMetadataValue: 5,
    rec.TargetAssignmentEpochValue: 6,
    rec.TargetAssignmentMemberValue: 7,
    rec.CurrentAssignmentValue: 8,
}


@settings(max_examples=40, deadline=None)
@given(values, names, names)
def test_every_record_round_trips(value: rec.ConsumerGroupValue, group: str, member: str) -> None:
    kind = TYPES[type(value)]
    key = rec.ConsumerGroupKey(kind, group, member if kind in (5, 7, 8) else "")
    assert rec.decode_consumer_group_key(kind, rec.encode_consumer_group_key(key)) == key
    data = rec.encode_consumer_group_value(value)
    assert rec.decode_consumer_group_value(kind, data) == value
    # A newer writer's tagged field (tag 9, 2 bytes) is skipped.
    if isinstance(value, rec.MemberMetadataValue) and value.classic is not None:
        plain = rec.encode_consumer_group_value(replace(value, classic=None))
        tag0 = data[len(plain) :]  # after the count (1): tag 0, its size and bytes
        tagged = plain[:-1] + bytes([2]) + tag0 + bytes([9, 2, 0xAB, 0xCD])
    else:
        tagged = data[:-1] + bytes([1, 9, 2, 0xAB, 0xCD])
    assert rec.decode_consumer_group_value(kind, tagged) == value


# Written by Kafka 4.4.0's generated record classes (kafka-group-coordinator-4.4.0.jar).
KAFKA_BYTES = [
    (rec.GroupEpochValue(5), "00000000000500"),
    (
        rec.CurrentAssignmentValue(3, 2, 1, ((T1, (0, 2)),), ()),
        "00000000000300000002010200000000000000000000000000000001030000000000000002000100",
    ),
    (
        rec.MemberMetadataValue(None, None, "c", "h", ("t",), None, 500, "range"),
        "000000000263026802027400000001f40672616e676500",
    ),
    (
        rec.TargetAssignmentMemberValue(((T1, (1,)),)),
        "0000020000000000000000000000000000000102000000010000",
    ),
    (
        rec.PartitionMetadataValue((rec.TopicMetadata(T1, "t", 3),)),
        "00000200000000000000000000000000000001027400000003010000",
    ),
]


@pytest.mark.parametrize(("value", "kafka"), KAFKA_BYTES, ids=lambda v: type(v).__name__)
def test_values_are_the_bytes_kafka_writes(value: rec.ConsumerGroupValue, kafka: str) -> None:
    assert rec.encode_consumer_group_value(value).hex() == kafka
    kind = TYPES[type(value)]
    assert rec.decode_consumer_group_value(kind, bytes.fromhex(kafka)) == value


def test_bad_bytes_name_the_record() -> None:
    with pytest.raises(CorruptRecordError, match="ConsumerGroupMetadata value: unknown value"):
        rec.decode_consumer_group_value(3, bytes.fromhex("0001 00000005 00"))
    with pytest.raises(CorruptRecordError, match="end inside the epoch"):
        rec.decode_consumer_group_value(3, bytes.fromhex("0000 0000"))
    with pytest.raises(CorruptRecordError, match="bytes left"):
        rec.decode_consumer_group_value(3, bytes.fromhex("0000 00000005 00 00"))
    with pytest.raises(ValueError, match="under a key of type 3"):
        rec.ConsumerGroupRecord(rec.ConsumerGroupKey(3, "g"), rec.TargetAssignmentEpochValue(1))


def test_the_loader_hands_consumer_group_records_over() -> None:
    seen: list[tuple[rec.ConsumerGroupKey, object]] = []
    stats = ReplayStats()
    key = rec.ConsumerGroupKey(rec.CONSUMER_GROUP_METADATA, "g")
    key_bytes = rec.encode_consumer_group_key(key)
    value_bytes = rec.encode_consumer_group_value(rec.GroupEpochValue(4))
    cache = OffsetsCache()
    replay_record(cache, 0, key_bytes, value_bytes, stats)
    assert stats.skipped == 1 and not seen
    replay_record(
        cache, 1, key_bytes, value_bytes, stats, on_consumer_group=lambda k, v: seen.append((k, v))
    )
    replay_record(
        cache, 2, key_bytes, None, stats, on_consumer_group=lambda k, v: seen.append((k, v))
    )
    assert seen == [(key, rec.GroupEpochValue(4)), (key, None)]
    assert len(cache) == 0
