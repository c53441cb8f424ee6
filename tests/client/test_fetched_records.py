"""Decoding a consumer's fetch answer: positions, the high watermark, CRCs, deserializers."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replog.client.answer_batches import answer_batches, checked_batches
from replog.client.fetched_records import (
    CompletedFetch,
    _fast_records,
    _uniform_records,
    decode_fetched,
    fetched_answer,
)
from replog.client.records import ConsumerRecord, TopicPartition
from replog.errors import CorruptRecordError, InvalidRecordError, RecordDeserializationError
from replog.record import (
    COMPRESSION_GZIP,
    RECORD_BATCH_OVERHEAD,
    build_batch,
    compute_crc,
    iter_batches,
    read_header,
)
from replog.record.record import encode_record

TP = TopicPartition("t", 3)
TS = 1_700_000_000_000


def batch(base: int, count: int, **options: object) -> bytes:
    records = [(TS + base + i, b"k", b"v%d" % (base + i), ()) for i in range(count)]
    return build_batch(records, base_offset=base, partition_leader_epoch=4, **options)  # type: ignore[arg-type]


def corrupt(raw: bytes) -> bytes:
    flipped = bytearray(raw)
    flipped[-1] ^= 0xFF  # inside the CRC-covered records
    return bytes(flipped)


def offsets(records: list[ConsumerRecord]) -> list[int]:
    return [r.offset for r in records]


def test_records_become_consumer_records_with_partition_epoch_and_timestamp() -> None:
    data = build_batch(
        [(TS, b"key", b"value", (("h", b"1"),))], base_offset=10, partition_leader_epoch=4
    )
    fetched = decode_fetched(TP, data, position=10, high_watermark=11)
    assert fetched.records == [
        ConsumerRecord("t", 3, 10, TS, 0, b"key", b"value", (("h", b"1"),), 4)
    ]
    assert fetched.next_offset == 11 and fetched.error is None


def test_a_batch_starting_before_the_position_yields_only_records_from_it() -> None:
    data = batch(5, 5) + batch(10, 3)
    fetched = decode_fetched(TP, data, position=7, high_watermark=13)
    assert offsets(fetched.records) == [7, 8, 9, 10, 11, 12]
    assert fetched.next_offset == 13


def test_batches_wholly_before_the_position_are_not_even_checked() -> None:
    data = corrupt(batch(0, 5)) + batch(5, 2)
    fetched = decode_fetched(TP, data, position=5, high_watermark=7)
    assert offsets(fetched.records) == [5, 6] and fetched.error is None


def test_nothing_at_or_above_the_high_watermark_is_returned() -> None:
    data = batch(0, 3) + batch(3, 3)
    fetched = decode_fetched(TP, data, position=1, high_watermark=4)
    assert offsets(fetched.records) == [1, 2, 3]
    assert fetched.next_offset == 4


def test_a_crc_mismatch_names_partition_and_offset_after_the_records_before_it() -> None:
    data = batch(0, 2) + corrupt(batch(2, 2))
    fetched = decode_fetched(TP, data, position=0, high_watermark=4)
    assert offsets(fetched.records) == [0, 1]
    assert isinstance(fetched.error, CorruptRecordError)
    assert "t-3" in str(fetched.error) and "offset 2" in str(fetched.error)
    # The records are handed out; the position then stays at the bad batch.
    assert offsets(fetched.take(10)) == [0, 1]
    assert fetched.position == 2


def test_check_crcs_off_skips_the_crc() -> None:
    # Flip a bit of a value, so the records still parse: only the CRC can notice.
    raw = bytearray(batch(0, 1))
    raw[-2] ^= 0x01
    assert decode_fetched(TP, bytes(raw), position=0, high_watermark=1).error is not None
    fetched = decode_fetched(TP, bytes(raw), position=0, high_watermark=1, check_crcs=False)
    assert fetched.error is None and len(fetched.records) == 1


def test_a_partial_batch_at_the_end_is_ignored() -> None:
    data = batch(0, 2) + batch(2, 2)[:30]
    fetched = decode_fetched(TP, data, position=0, high_watermark=4)
    assert offsets(fetched.records) == [0, 1]
    assert fetched.next_offset == 2 and fetched.error is None


def test_control_batches_are_skipped_but_move_the_position() -> None:
    control = build_batch([(TS, b"\x00\x00\x00\x00", b"", ())], base_offset=2, is_control=True)
    data = batch(0, 2) + control
    fetched = decode_fetched(TP, data, position=0, high_watermark=3)
    assert offsets(fetched.records) == [0, 1]
    assert fetched.next_offset == 3
    fetched.take(5)
    assert fetched.position == 3


def test_compressed_batches_starting_before_the_position() -> None:
    data = batch(0, 10, compression=COMPRESSION_GZIP)
    fetched = decode_fetched(TP, data, position=6, high_watermark=10)
    assert offsets(fetched.records) == [6, 7, 8, 9]
    assert fetched.records[0].value == b"v6"


def test_log_append_time_batches_carry_the_broker_timestamp() -> None:
    data = batch(0, 2, log_append_time=TS + 999)
    fetched = decode_fetched(TP, data, position=0, high_watermark=2)
    assert {(r.timestamp, r.timestamp_type) for r in fetched.records} == {(TS + 999, 1)}


def test_deserializers_apply_and_a_failing_one_stops_at_its_record() -> None:
    def value(raw: bytes | None) -> str:
        assert raw is not None
        if raw == b"v2":
            raise ValueError("cannot decode v2")
        return raw.decode()

    fetched = decode_fetched(
        TP,
        batch(0, 4),
        position=0,
        high_watermark=4,
        key_deserializer=lambda k: None if k is None else k.upper(),
        value_deserializer=value,
    )
    assert [(r.key, r.value) for r in fetched.records] == [(b"K", "v0"), (b"K", "v1")]
    # Kafka's RecordDeserializationException: where, and which of key and value.
    error = fetched.error
    assert isinstance(error, RecordDeserializationError)
    assert (error.topic_partition, error.offset, error.origin) == (TP, 2, "value")
    assert isinstance(error.__cause__, ValueError)
    assert str(error) == (
        "the value deserializer failed on the record at offset 2 of t-3: ValueError: cannot "
        "decode v2 (seek to 3 to skip it)"
    )
    fetched.take(10)
    assert fetched.position == 2


def test_a_failing_key_deserializer_is_named_as_the_key() -> None:
    def key(raw: bytes | None) -> str:
        raise UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte")

    fetched = decode_fetched(TP, batch(3, 2), position=3, high_watermark=5, key_deserializer=key)
    assert fetched.records == []
    error = fetched.error
    assert isinstance(error, RecordDeserializationError)
    assert (error.offset, error.origin) == (3, "key")
    assert isinstance(error.__cause__, UnicodeDecodeError)


def test_take_hands_out_in_slices_and_then_moves_to_the_next_offset() -> None:
    control = build_batch([(TS, b"\x00\x00\x00\x00", b"", ())], base_offset=5, is_control=True)
    fetched = decode_fetched(TP, batch(0, 5) + control, position=0, high_watermark=6)
    assert offsets(fetched.take(2)) == [0, 1] and fetched.position == 2
    assert offsets(fetched.take(2)) == [2, 3] and fetched.position == 4
    assert offsets(fetched.take(2)) == [4] and fetched.position == 6
    assert fetched.exhausted


def test_an_answer_without_records_at_or_after_the_position_still_moves_on() -> None:
    fetched = decode_fetched(TP, batch(0, 5), position=5, high_watermark=5)
    assert fetched.records == [] and fetched.next_offset == 5


@pytest.mark.parametrize("hw", [-1])
def test_an_unknown_high_watermark_bounds_nothing(hw: int) -> None:
    fetched = decode_fetched(TP, batch(0, 2), position=0, high_watermark=hw)
    assert offsets(fetched.records) == [0, 1]


# Long fields (three-byte lengths) are rare: they go to the strict decoder anyway.
field = st.one_of(st.none(), st.binary(max_size=40), st.binary(max_size=40), st.just(b"L" * 8200))
header = st.tuples(
    st.one_of(st.text(max_size=5), st.text(min_size=64, max_size=70)),
    st.one_of(st.none(), st.binary(max_size=5), st.binary(min_size=64, max_size=70)),
)
record = st.tuples(
    st.integers(-20_000, 20_000),  # timestamp delta: one, two or three varint bytes
    field,
    field,
    st.lists(header, max_size=3),
)


@settings(max_examples=60, deadline=None)
@given(
    records=st.lists(record, min_size=1, max_size=70),
    base=st.integers(0, 1000),
    skip=st.integers(0, 80),
    compression=st.sampled_from([0, COMPRESSION_GZIP]),
)
def test_the_fast_decoder_agrees_with_the_strict_one(
    records: list[tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]],
    base: int,
    skip: int,
    compression: int,
) -> None:
    data = build_batch(
        [(TS + delta, key, value, headers) for delta, key, value, headers in records],
        base_offset=base,
        partition_leader_epoch=2,
        compression=compression,
    )
    position = base + skip
    expected = [
        ConsumerRecord("t", 3, r.offset, r.timestamp, 0, r.key, r.value, r.headers, 2)
        for r in next(iter_batches(data)).records()
        if r.offset >= position
    ]
    fetched = decode_fetched(TP, data, position=position, high_watermark=base + len(records))
    assert fetched.error is None
    assert fetched.records == expected


@pytest.mark.parametrize(
    ("record", "message"),
    [
        (bytes([0x0E, 0, 0, 0, 1, 2, 0x61, 0]), "offset delta 0, expected 1"),  # duplicate delta
        (bytes([0x0E, 0, 0, 2, 1, 2, 0x61, 2]), "runs past the end"),  # a header missing
        (bytes([0x0E, 0, 0, 2, 1, 0x7E, 0x61, 0]), "value of 63 bytes"),  # value runs past
        (bytes([0x10, 0, 0, 2, 1, 2, 0x61, 0, 0]), "declared length 8"),  # a byte left over
    ],
)
def test_malformed_records_get_the_strict_decoders_error(record: bytes, message: str) -> None:
    good = encode_record(0, 0, None, b"a")
    data = _with_records(good + record, count=2)
    fetched = decode_fetched(TP, data, position=0, high_watermark=2)
    assert isinstance(fetched.error, InvalidRecordError)
    assert message in str(fetched.error)
    assert fetched.records == []


def _with_records(region: bytes, *, count: int) -> bytes:
    """A batch whose records region is `region` as given (the builder would not make it)."""
    batch = bytearray(build_batch([(TS, None, b"a", ())] * count))
    del batch[RECORD_BATCH_OVERHEAD:]
    batch += region
    struct.pack_into(">i", batch, 8, len(batch) - 12)
    struct.pack_into(">I", batch, 17, compute_crc(batch, 0, len(batch)))
    return bytes(batch)


def test_the_fast_path_takes_the_common_shapes() -> None:
    records = [
        (TS + i * 7, None if i % 2 else b"key", b"v" * 300, (("trace", b"id"),)) for i in range(100)
    ]
    data = build_batch(records, base_offset=5)
    header = read_header(data)
    fast = _fast_records(TP, header, data, RECORD_BATCH_OVERHEAD, len(data), 0, 0, 1 << 62)
    assert fast is not None and len(fast) == 100
    assert fast[99] == ConsumerRecord(
        "t", 3, 104, TS + 693, 0, None, b"v" * 300, (("trace", b"id"),), -1
    )


def test_a_deserialization_error_survives_pickling() -> None:
    # It crosses processes (a multiprocessing pool of consumers): its own __init__ must not make
    # pickle.loads fail with a TypeError.
    import pickle

    error = RecordDeserializationError(TP, 7, "value", ValueError("bad"))
    again = pickle.loads(pickle.dumps(error))
    assert str(again) == str(error)
    assert (again.topic_partition, again.offset, again.origin) == (TP, 7, "value")


@settings(max_examples=80, deadline=None)
@given(
    records=st.lists(record, min_size=1, max_size=70),
    flips=st.lists(st.tuples(st.integers(0, 10**6), st.integers(1, 255)), min_size=1, max_size=3),
)
def test_the_fast_decoder_agrees_with_the_strict_one_on_damaged_records(
    records: list[tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]],
    flips: list[tuple[int, int]],
) -> None:
    """Bytes of the records region changed (CRC not checked): whatever the fast decoder
    returns, the strict one returns too, or the same error (it gives up rather than guess)."""
    data = bytearray(
        build_batch(
            [(TS + delta, key, value, headers) for delta, key, value, headers in records],
            partition_leader_epoch=2,
        )
    )
    _assert_fast_agrees_when_damaged(data, flips)


# Fixed-size values, no key, no headers, timestamp deltas of one varint byte: the batch-level
# decoder's layout (`_uniform_records`), across the offset delta's one- and two-byte runs.
uniform_batch = st.tuples(
    st.integers(1, 200),  # records
    st.sampled_from([0, 1, 40, 63, 64, 1024, 8000]),  # value size: one or two varint bytes
    # timestamps TS + these, cycled: deltas from the first record of -63..63, one varint byte
    st.lists(st.integers(0, 63), min_size=1, max_size=8),
)


def _uniform(count: int, size: int, deltas: list[int], base: int, **options: object) -> bytes:
    records = [
        (TS + deltas[i % len(deltas)], None, bytes([i % 251]) * size, ()) for i in range(count)
    ]
    return build_batch(records, base_offset=base, partition_leader_epoch=2, **options)  # type: ignore[arg-type]


@settings(max_examples=60, deadline=None)
@given(
    shape=uniform_batch,
    base=st.integers(0, 1000),
    skip=st.integers(0, 210),
    short=st.integers(0, 210),
    append_time=st.booleans(),
)
def test_the_batch_level_decoder_agrees_with_the_strict_one(
    shape: tuple[int, int, list[int]], base: int, skip: int, short: int, append_time: bool
) -> None:
    count, size, deltas = shape
    data = _uniform(count, size, deltas, base, log_append_time=TS + 99 if append_time else None)
    header = read_header(data)
    region = (RECORD_BATCH_OVERHEAD, len(data))
    position, bound = base + skip, base + max(count - short, 0)
    uniform = _uniform_records(TP, header, data, *region, int(append_time), position, bound)
    strict = [
        ConsumerRecord(
            "t",
            3,
            r.offset,
            TS + 99 if append_time else r.timestamp,
            int(append_time),
            None,
            r.value,
            (),
            2,
        )
        for r in next(iter_batches(data)).records()
        if position <= r.offset < bound
    ]
    assert uniform is not None and uniform == strict
    fetched = decode_fetched(TP, data, position=position, high_watermark=bound)
    assert fetched.records == strict and fetched.error is None


def test_the_batch_level_decoder_leaves_other_layouts_to_the_per_record_one() -> None:
    def taken(records: list[tuple[int, bytes | None, bytes | None, tuple[()]]]) -> bool:
        data = build_batch(records)
        header = read_header(data)
        return (
            _uniform_records(TP, header, data, RECORD_BATCH_OVERHEAD, len(data), 0, 0, 1 << 62)
            is not None
        )

    assert taken([(TS, None, b"v" * 10, ())] * 3)
    assert not taken([(TS, None, b"v" * 10, ()), (TS, None, b"v" * 11, ())])  # sizes differ
    assert not taken([(TS, b"k", b"v" * 10, ())] * 3)  # a key
    assert not taken([(TS, None, None, ())] * 3)  # no value
    assert not taken([(TS, None, b"v", ()), (TS + 64, None, b"v", ())])  # a 2-byte delta


@settings(max_examples=80, deadline=None)
@given(
    shape=uniform_batch,
    flips=st.lists(st.tuples(st.integers(0, 10**6), st.integers(1, 255)), min_size=1, max_size=3),
)
def test_the_batch_level_decoder_agrees_with_the_strict_one_on_damaged_records(
    shape: tuple[int, int, list[int]], flips: list[tuple[int, int]]
) -> None:
    """A uniform batch with bytes changed (CRC not checked): the same records or error as the
    strict decoder, whichever path takes it."""
    count, size, deltas = shape
    data = bytearray(_uniform(count, min(size, 100), deltas, 0))
    _assert_fast_agrees_when_damaged(data, flips)


def _assert_fast_agrees_when_damaged(data: bytearray, flips: list[tuple[int, int]]) -> None:
    """Whatever the fast decoders return for `data` with `flips` applied to its records (CRC
    not checked), the strict one returns too, or the same error (they give up rather than
    guess)."""
    for where, xor in flips:
        data[RECORD_BATCH_OVERHEAD + where % (len(data) - RECORD_BATCH_OVERHEAD)] ^= xor
    damaged = bytes(data)
    fast = decode_fetched(TP, damaged, position=0, high_watermark=1 << 40, check_crcs=False)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("replog.client.fetched_records._uniform_records", lambda *args: None)
        patch.setattr("replog.client.fetched_records._fast_records", lambda *args: None)
        strict = decode_fetched(TP, damaged, position=0, high_watermark=1 << 40, check_crcs=False)
    assert fast.records == strict.records
    assert repr(fast.error) == repr(strict.error)
    assert fast.next_offset == strict.next_offset


def _recount(data: bytes, count: int) -> bytes:
    """`data` (one batch) declaring `count` records (last offset delta `count - 1`), its CRC
    made right again: a batch a faulty writer built, which no CRC check catches."""
    raw = bytearray(data)
    struct.pack_into(">i", raw, 23, count - 1)  # lastOffsetDelta
    struct.pack_into(">i", raw, 57, count)  # recordsCount
    struct.pack_into(">I", raw, 17, compute_crc(raw, 0, len(raw)))
    return bytes(raw)


@pytest.mark.parametrize("held", [1, 63, 64, 65, 100])
def test_a_batch_declaring_more_uniform_records_than_it_holds_is_an_invalid_record_error(
    held: int,
) -> None:
    """The records region ends with the last record, one short of the count, at the end of
    the answer: the decoders give the strict one's typed error, never an IndexError."""
    data = _recount(_uniform(held, 10, [0], 0), held + 1)
    fetched = decode_fetched(TP, data, position=0, high_watermark=1 << 40)
    assert fetched.records == []
    assert isinstance(fetched.error, InvalidRecordError), repr(fetched.error)
    assert f"declares {held + 1} records" in str(fetched.error)


@pytest.mark.parametrize("held", [2, 63, 64, 65, 100])
def test_a_high_watermark_inside_a_batch_short_of_its_count_returns_none_of_it(held: int) -> None:
    """The high watermark cuts the batch before its last record and its missing one: the
    batch is still checked whole, so none of its records are returned, only the strict
    decoder's error."""
    data = _recount(_uniform(held, 10, [0], 0), held + 1)
    fetched = decode_fetched(TP, data, position=0, high_watermark=held - 1)
    assert fetched.records == []
    assert isinstance(fetched.error, InvalidRecordError), repr(fetched.error)
    assert f"declares {held + 1} records" in str(fetched.error)


def test_a_high_watermark_before_a_malformed_record_returns_none_of_its_batch() -> None:
    good = encode_record(0, 0, None, b"a") + encode_record(1, 0, None, b"b")
    bad = bytes([0x0E, 0, 0, 4, 1, 0x7E, 0x61, 0])  # offset delta 2; its value runs past
    data = batch(0, 3) + _rebased(good + bad, base=3)
    fetched = decode_fetched(TP, data, position=0, high_watermark=4)  # 3 below, 4 and 5 above
    assert offsets(fetched.records) == [0, 1, 2]  # the good batch before it
    assert isinstance(fetched.error, InvalidRecordError)
    assert "value of 63 bytes" in str(fetched.error)


def _rebased(region: bytes, *, base: int) -> bytes:
    """`_with_records(region, count=3)` at base offset `base`, its CRC made right."""
    raw = bytearray(_with_records(region, count=3))
    struct.pack_into(">q", raw, 0, base)
    struct.pack_into(">I", raw, 17, compute_crc(raw, 0, len(raw)))
    return bytes(raw)


@settings(max_examples=120, deadline=None)
@given(
    records=st.one_of(
        st.lists(record, min_size=1, max_size=70),
        uniform_batch.map(
            lambda s: [(s[2][i % len(s[2])], None, b"u" * min(s[1], 100), []) for i in range(s[0])]
        ),
    ),
    flips=st.lists(st.tuples(st.integers(0, 10**6), st.integers(1, 255)), min_size=1, max_size=3),
    cut=st.integers(0, 10**6),
    shrink=st.integers(0, 8),
    check_crcs=st.booleans(),
)
def test_a_damaged_batch_the_high_watermark_cuts_gives_every_path_the_same_answer(
    records: list[tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]],
    flips: list[tuple[int, int]],
    cut: int,
    shrink: int,
    check_crcs: bool,
) -> None:
    """A good batch, then a damaged one (bytes changed, or records missing against its count)
    with the high watermark inside it: the fast paths give the strict decoder's records and
    error, with or without `check.crcs`, and none of the damaged batch's records are returned
    once it has an error."""
    first = batch(0, 2)
    damaged = bytearray(
        build_batch(
            [(TS + delta, key, value, headers) for delta, key, value, headers in records],
            base_offset=2,
            partition_leader_epoch=2,
        )
    )
    if shrink:
        damaged = bytearray(_recount(bytes(damaged), len(records) + shrink))
    else:
        for where, xor in flips:
            damaged[RECORD_BATCH_OVERHEAD + where % (len(damaged) - RECORD_BATCH_OVERHEAD)] ^= xor
    data = first + bytes(damaged)
    declared = len(records) + shrink
    hw = 3 + cut % max(declared - 1, 1)  # inside the damaged batch [2, 2 + declared) if it can

    def fetch() -> CompletedFetch:
        return decode_fetched(TP, data, position=0, high_watermark=hw, check_crcs=check_crcs)

    fast = fetch()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("replog.client.fetched_records._uniform_records", lambda *args: None)
        patch.setattr("replog.client.fetched_records._fast_records", lambda *args: None)
        strict = fetch()
    assert fast.records == strict.records
    assert repr(fast.error) == repr(strict.error)
    assert fast.next_offset == strict.next_offset
    if fast.error is not None:
        assert offsets(fast.records) == [0, 1]


# --- decoded as taken ---------------------------------------------------------------------


def test_an_answer_is_decoded_a_batch_at_a_time_as_take_reaches_it() -> None:
    """`fetched_answer` checks the batches and decodes none; `take` decodes only what it
    hands out (and the rest of a batch it started), and hands out what the whole decode
    would, in the same slices."""
    data = batch(0, 3) + batch(3, 3) + batch(6, 3)
    fetched = fetched_answer(TP, data, position=1, high_watermark=8)
    assert fetched.records == [] and fetched.error is None and fetched.next_offset == 8
    assert not fetched.exhausted and not fetched.empty
    assert offsets(fetched.take(1)) == [1]
    assert offsets(fetched.records) == [1, 2]  # only the first batch decoded
    assert offsets(fetched.take(3)) == [2, 3, 4] and fetched.position == 5
    assert offsets(fetched.take(10)) == [5, 6, 7] and fetched.position == 8
    assert fetched.exhausted and fetched.empty
    whole = decode_fetched(TP, data, position=1, high_watermark=8)
    assert whole.records == fetched_answer(TP, data, position=1, high_watermark=8).take(99)


def test_a_damaged_batch_after_good_ones_is_raised_once_they_are_taken() -> None:
    """A CRC mismatch found when the answer arrives waits behind the batches before it; a
    deserializer's error met while taking ends the answer there, the records before it
    handed out and the position left at the bad record."""
    data = batch(0, 2) + corrupt(batch(2, 2))
    fetched = fetched_answer(TP, data, position=0, high_watermark=4)
    assert fetched.error is None and not fetched.empty
    assert offsets(fetched.take(5)) == [0, 1] and fetched.exhausted
    assert isinstance(fetched.error, CorruptRecordError) and fetched.position == 2

    def value(raw: bytes | None) -> bytes:
        if raw == b"v3":
            raise ValueError("no v3")
        return raw or b""

    fetched = fetched_answer(
        TP, batch(0, 2) + batch(2, 2), position=0, high_watermark=4, value_deserializer=value
    )
    assert offsets(fetched.take(1)) == [0]
    assert offsets(fetched.take(5)) == [1, 2] and fetched.exhausted
    error = fetched.error
    assert isinstance(error, RecordDeserializationError) and error.offset == 3
    assert fetched.position == 3


def test_an_answer_with_nothing_at_or_after_the_position_is_empty() -> None:
    fetched = fetched_answer(TP, batch(0, 5), position=5, high_watermark=5)
    assert fetched.empty and fetched.next_offset == 5
    assert fetched_answer(TP, corrupt(batch(0, 2)), position=0, high_watermark=2).error


def test_an_answer_held_as_a_view_of_its_buffer_gives_records_of_their_own() -> None:
    """A view of the response's buffer is copied a batch at a time as it is decoded: the
    records are those of the bytes, and their values are bytes of their own."""
    raw = bytearray(batch(0, 3) + batch(3, 2))
    fetched = fetched_answer(TP, memoryview(raw), position=1, high_watermark=5)
    taken = fetched.take(10)
    assert taken == decode_fetched(TP, bytes(raw), position=1, high_watermark=5).records
    assert all(type(r.value) is bytes for r in taken)
    raw[:] = bytes(len(raw))  # the buffer reused: the records handed out keep their bytes
    assert [r.value for r in taken] == [b"v1", b"v2", b"v3", b"v4"]


# --- the batches of an answer ----------------------------------------------------------------


def _walk(walk: object, data: bytes, position: int, bound: int) -> object:
    """The batches a walk yields and what it raises, for comparing two walks."""
    found: list[tuple[int, int]] = []
    try:
        for at, header in walk(data, position, bound):  # type: ignore[operator]
            found.append((at, header.base_offset))
    except Exception as exc:
        return found, type(exc), str(exc)
    return found, None, None


@pytest.mark.parametrize("damage_at", [0, 1, 2])
@pytest.mark.parametrize(
    "damage",
    ["crc", "count", "magic", "short length", "tiny length", "partial", "cut header"],
)
def test_the_inlined_walk_of_an_answer_agrees_with_the_checked_one(
    damage: str, damage_at: int
) -> None:
    """answer_batches' inlined checks hand any doubt to the walk that checks one thing at a
    time: the same batches, then the same error (or the same quiet end at a partial tail),
    wherever the damage lies, with the position and the bound cutting in."""
    good = [batch(base, 2) for base in range(0, 6, 2)]
    raw = bytearray(good[damage_at])
    if damage == "crc":
        raw[-1] ^= 0xFF
    elif damage == "count":
        struct.pack_into(">i", raw, 57, 5)  # records_count, CRC made to match
        struct.pack_into(">I", raw, 17, compute_crc(bytes(raw), 0, len(raw)))
    elif damage == "magic":
        raw[16] = 1
    elif damage == "short length":
        struct.pack_into(">i", raw, 8, 30)  # frames, but shorter than a header
    elif damage == "tiny length":
        struct.pack_into(">i", raw, 8, 5)  # below the framing minimum: a quiet end
    elif damage == "partial":
        raw = raw[:-3]
    else:
        raw = raw[:40]
    data = b"".join(good[:damage_at]) + bytes(raw) + b"".join(good[damage_at + 1 :])

    def fast(data: bytes, position: int, bound: int) -> object:
        return answer_batches(data, position, bound, check_crcs=True, name="t-3", where="w")

    def checked(data: bytes, position: int, bound: int) -> object:
        return checked_batches(data, 0, position, bound, True, "t-3", "w", False)

    for position, bound in [(0, 1 << 40), (3, 1 << 40), (0, 3), (5, 6)]:
        assert _walk(fast, data, position, bound) == _walk(checked, data, position, bound)
