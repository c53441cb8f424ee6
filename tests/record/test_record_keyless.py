"""The records without a key in a produce's batches (`replog.record.keyless`): the byte walk
finds exactly the records the strict decoder finds without a key, over random batches (keys
and values of any size, records of 8 KiB and more, every codec, several batches); a batch that
fails its CRC is CORRUPT_MESSAGE before anything else; records that do not fill their region
are the strict decoder's InvalidRecordError; Kafka's messages."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replog.errors import CorruptRecordError, InvalidRecordError, RecordsRejectedError
from replog.record import RecordBatch, build_batch
from replog.record.compression import COMPRESSION_NONE, available_codecs
from replog.record.header import compute_crc
from replog.record.keyless import keyless_record_errors, refuse_keyless_records

T0 = 1_700_000_000_000
MESSAGE = "Compacted topic cannot accept message without key in topic partition t-0."

records = st.lists(
    st.tuples(
        st.one_of(st.none(), st.binary(max_size=40)),
        st.one_of(st.none(), st.binary(max_size=300), st.binary(min_size=8200, max_size=8300)),
        st.integers(-(2**40), 2**40),
    ),
    min_size=1,
    max_size=60,
)


@settings(max_examples=150, deadline=None)
@given(
    batches=st.lists(records, min_size=1, max_size=3),
    codec=st.sampled_from(sorted(available_codecs())),
)
def test_the_walk_finds_what_the_strict_decoder_finds(
    batches: list[list[tuple[bytes | None, bytes | None, int]]], codec: int
) -> None:
    built = [
        build_batch([(T0 + delta, key, value, ()) for key, value, delta in rows], compression=codec)
        for rows in batches
    ]
    expected = [
        (i, MESSAGE)
        for batch in built
        for i, record in enumerate(RecordBatch.parse(batch).records())
        if record.key is None
    ]
    assert keyless_record_errors(b"".join(built), "t-0") == expected


def test_kafka_s_summary_names_at_most_three_records() -> None:
    batch = build_batch([(T0, None, b"v", ())] * 5)
    with pytest.raises(RecordsRejectedError) as raised:
        refuse_keyless_records(batch, "t-0")
    assert raised.value.record_errors == tuple((i, MESSAGE) for i in range(5))
    assert str(raised.value) == (
        "One or more records have been rejected due to 5 record errors in total, and only "
        "showing the first three errors at most: ["
        + ", ".join(f"RecordError(batchIndex={i}, message='{MESSAGE}')" for i in range(3))
        + "]"
    )
    refuse_keyless_records(build_batch([(T0, b"k", None, ())]), "t-0")  # a keyed tombstone


def test_a_corrupt_batch_is_corrupt_and_a_malformed_one_the_strict_decoder_s_error() -> None:
    batch = bytearray(build_batch([(T0, b"k", b"v", ())], compression=COMPRESSION_NONE))
    batch[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="CRC-32C"):
        keyless_record_errors(bytes(batch), "t-0")
    batch[-1] ^= 0xFF
    batch[61] = 40  # the record's length: 20 bytes, past the batch's end
    batch[17:21] = compute_crc(batch, 0, len(batch)).to_bytes(4, "big")
    with pytest.raises(InvalidRecordError):
        keyless_record_errors(bytes(batch), "t-0")
