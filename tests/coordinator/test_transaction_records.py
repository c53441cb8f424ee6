"""`__transaction_state` records: Kafka 4.4.0's own bytes (golden vectors written by its
TransactionLogKey / TransactionLogValue classes), round trips, and corrupt input."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from replog.coordinator.transaction_metadata import TxnMetadata, TxnState
from replog.coordinator.transaction_records import (
    decode_key,
    decode_value,
    encode_key,
    encode_value,
    value_version,
)
from replog.errors import CorruptRecordError

# Written by Kafka 4.4.0 (MessageUtil.toVersionPrefixedBytes of TransactionLogValue).
KAFKA_KEY_T = "0000000174"
KAFKA_V0_EMPTY = "0000000000000000000700000000ea6000ffffffff0000000000000005ffffffffffffffff"
KAFKA_V1_EMPTY = "0001000000000000000700000000ea6000000000000000000005ffffffffffffffff00"
KAFKA_V0_PREPARE = (
    "000000000000000003e80003000dbba002000000020001610000000200000000000000020002626200000001"
    "000000010000018bcfe568000000018bcfe56418"
)
KAFKA_V1_PREPARE = (
    "000100000000000003e80003000dbba002030261030000000000000002000362620200000001000000018bcf"
    "e568000000018bcfe5641802000800000000000003e802020002"
)
EMPTY = TxnMetadata("t", 7, producer_epoch=0, timeout_ms=60_000, last_update_ms=5)
PREPARE = TxnMetadata(
    "t",
    1000,
    producer_epoch=3,
    timeout_ms=900_000,
    state=TxnState.PREPARE_COMMIT,
    partitions=frozenset({("a", 0), ("a", 2), ("bb", 1)}),
    start_ms=1_699_999_999_000,
    last_update_ms=1_700_000_000_000,
)


def test_the_key_is_kafkas():
    assert encode_key("t").hex() == KAFKA_KEY_T
    assert decode_key(bytes.fromhex(KAFKA_KEY_T)) == "t"


@pytest.mark.parametrize(
    ("meta", "version", "kafka_hex"),
    [
        (EMPTY, 0, KAFKA_V0_EMPTY),
        (EMPTY, 1, KAFKA_V1_EMPTY),
        (PREPARE, 0, KAFKA_V0_PREPARE),
        (
            replace(PREPARE, prev_producer_id=1000, transaction_version=2),
            1,
            KAFKA_V1_PREPARE,
        ),
    ],
)
def test_values_are_byte_for_byte_kafkas(meta, version, kafka_hex):
    assert encode_value(meta, version).hex() == kafka_hex
    decoded = decode_value("t", bytes.fromhex(kafka_hex))
    assert decoded == meta


def test_transaction_version_2_writes_the_flexible_value():
    assert (value_version(0), value_version(1), value_version(2)) == (0, 0, 1)


_topics = st.text(alphabet="abcxyz-._", min_size=1, max_size=8)
_metas = st.builds(
    lambda pid, epoch, timeout, state, parts, start, update, prev, nxt, tv: TxnMetadata(
        "tid",
        pid,
        producer_epoch=epoch,
        timeout_ms=timeout,
        state=state,
        partitions=frozenset() if state is TxnState.EMPTY else frozenset(parts),
        start_ms=start,
        last_update_ms=update,
        prev_producer_id=prev,
        next_producer_id=nxt,
        transaction_version=tv,
    ),
    st.integers(0, 2**63 - 1),
    st.integers(0, 32767),
    st.integers(1, 2**31 - 1),
    st.sampled_from(list(TxnState)),
    st.sets(st.tuples(_topics, st.integers(0, 2**31 - 1)), max_size=6),
    st.integers(-1, 2**62),
    st.integers(-1, 2**62),
    st.integers(-1, 2**40),
    st.integers(-1, 2**40),
    st.integers(0, 2),
)


@given(_metas)
def test_flexible_values_round_trip(meta):
    assert decode_value("tid", encode_value(meta, 1)) == meta


@given(_metas)
def test_version_0_values_round_trip_without_the_tagged_fields(meta):
    decoded = decode_value("tid", encode_value(meta, 0))
    assert decoded == replace(meta, prev_producer_id=-1, next_producer_id=-1, transaction_version=0)


@pytest.mark.parametrize(
    ("data", "names"),
    [
        (bytes.fromhex(KAFKA_V1_PREPARE)[:-3], "tag"),
        (bytes.fromhex(KAFKA_V0_EMPTY) + b"\x00", "bytes left"),
        (b"\x00\x07" + bytes.fromhex(KAFKA_V0_EMPTY)[2:], "unknown value version 7"),
        (
            bytes.fromhex(KAFKA_V0_EMPTY)[:16] + b"\x09" + bytes.fromhex(KAFKA_V0_EMPTY)[17:],
            "state 9",
        ),
        (b"\x00", "the value version"),
    ],
)
def test_corrupt_values_are_named(data, names):
    with pytest.raises(CorruptRecordError, match=names):
        decode_value("t", data)


def test_an_empty_transaction_with_partitions_cannot_be_encoded():
    bad = replace(EMPTY, partitions=frozenset({("a", 0)}))
    with pytest.raises(ValueError, match="Empty"):
        encode_value(bad, 1)
