"""The span scan (replog/record/record_spans.py) against the record decoder: on any records
region, whole, sparse or damaged, it accepts what the decoder decodes, with the same offsets,
keys and tombstones, and raises the decoder's own error for the rest; a respanned record
decodes to the same record at its new timestamp."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replog.errors import InvalidRecordError
from replog.record.record import append_record, decode_records
from replog.record.record_spans import respan, scan_records

WHERE = "load-0/00000000000000000000.log at byte 0"
BASE_OFFSET = 1_000
BASE_TIMESTAMP = 1_700_000_000_000

records = st.lists(
    st.tuples(
        st.integers(1, 3),  # the gap before the record's offset delta (1: dense)
        st.integers(-(1 << 40), 1 << 40) | st.integers(-70, 70),  # timestamp delta
        st.none() | st.binary(max_size=80),  # key
        st.none() | st.binary(max_size=300),  # value
        st.lists(st.tuples(st.text(max_size=4), st.none() | st.binary(max_size=5)), max_size=2),
    ),
    min_size=1,
    max_size=8,
)


def region(
    chosen: list[tuple[int, int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]],
) -> tuple[bytes, int]:
    """The encoded records (a batch header's worth of bytes before them) and the last offset
    delta."""
    parts: list[bytes] = [b"h" * 61]
    delta = -1
    for gap, timestamp_delta, key, value, headers in chosen:
        delta += gap
        append_record(parts, delta, timestamp_delta, key, value, headers)
    return b"".join(parts), delta


def decoded(data: bytes, count: int, last_delta: int) -> list[tuple[int, int, bytes | None, bool]]:
    return [
        (r.offset - BASE_OFFSET, r.timestamp - BASE_TIMESTAMP, r.key, r.value is None)
        for r in decode_records(
            data,
            61,
            len(data),
            records_count=count,
            base_offset=BASE_OFFSET,
            base_timestamp=BASE_TIMESTAMP,
            log_append_time=None,
            where=WHERE,
            last_offset_delta=last_delta,
        )
    ]


def scanned(data: bytes, count: int, last_delta: int) -> list[tuple[int, int, bytes | None, bool]]:
    spans = scan_records(
        data,
        61,
        len(data),
        records_count=count,
        base_offset=BASE_OFFSET,
        where=WHERE,
        last_offset_delta=last_delta,
    )
    return [span[:4] for span in spans]


def outcome(read: object, data: bytes, count: int, last_delta: int) -> tuple[str, object]:
    try:
        return "ok", read(data, count, last_delta)  # type: ignore[operator]
    except InvalidRecordError as error:
        return "error", str(error)


@settings(max_examples=300, deadline=None)
@given(
    chosen=records,
    damage=st.lists(st.tuples(st.integers(0), st.integers(0, 255)), max_size=3),
    cut=st.integers(0, 6),
    count_change=st.sampled_from([0, 0, 0, -1, 1]),
)
def test_the_scan_answers_as_the_decoder(
    chosen: list[tuple[int, int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]],
    damage: list[tuple[int, int]],
    cut: int,
    count_change: int,
) -> None:
    data, last_delta = region(chosen)
    body = bytearray(data)
    for at, byte in damage:
        body[61 + at % (len(body) - 61)] = byte
    damaged = bytes(body[: len(body) - cut] if cut < len(body) - 61 else body)
    count = max(1, len(chosen) + count_change)
    for shape in (data, damaged):
        assert outcome(scanned, shape, count, last_delta) == outcome(
            decoded, shape, count, last_delta
        )


@settings(max_examples=200, deadline=None)
@given(chosen=records, new_delta=st.integers(-(1 << 40), 1 << 40) | st.integers(-70, 70))
def test_a_respanned_record_is_the_same_record_at_its_new_timestamp(
    chosen: list[tuple[int, int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]],
    new_delta: int,
) -> None:
    data, last_delta = region(chosen)
    spans = scan_records(
        data,
        61,
        len(data),
        records_count=len(chosen),
        base_offset=BASE_OFFSET,
        where=WHERE,
        last_offset_delta=last_delta,
    )
    for span, (_, _, key, value, headers) in zip(spans, chosen, strict=True):
        one = b"h" * 61 + respan(data, span, new_delta)
        [record] = decode_records(
            one,
            61,
            len(one),
            records_count=1,
            base_offset=BASE_OFFSET,
            base_timestamp=BASE_TIMESTAMP,
            log_append_time=None,
            where=WHERE,
            last_offset_delta=span[0],
        )
        assert (record.offset, record.timestamp) == (
            BASE_OFFSET + span[0],
            BASE_TIMESTAMP + new_delta,
        )
        assert (record.key, record.value) == (key, value)
        assert list(record.headers) == [(k, v) for k, v in headers]


def test_a_damaged_region_raises_the_decoders_message() -> None:
    data, _ = region([(1, 0, b"k", b"v", [])])
    with pytest.raises(
        InvalidRecordError, match="declares 2 records, its records region holds only 1"
    ):
        scanned(data, 2, 1)


@pytest.mark.parametrize(
    ("at", "byte"),
    [(4, 0x03), (6, 0x03), (8, 0x01), (8, 0x02), (3, 0x04), (0, 0x00), (6, 0x7E)],
    ids=["key-2", "value-2", "headers-1", "a-header-cut", "offset-2", "length-0", "value-long"],
)
def test_each_field_refused_as_the_decoder_refuses_it(at: int, byte: int) -> None:
    data, last_delta = region([(1, 0, b"k", b"v", [])])
    damaged = bytearray(data)
    damaged[61 + at] = byte
    assert outcome(scanned, bytes(damaged), 1, last_delta) == outcome(
        decoded, bytes(damaged), 1, last_delta
    )
    assert outcome(scanned, bytes(damaged), 1, last_delta)[0] == "error"
