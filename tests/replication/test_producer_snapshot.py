"""Producer-state snapshot bytes: Kafka's version 1 layout, what a table keeps through one, and
every defect named."""

from __future__ import annotations

import struct
from dataclasses import replace

import crc32c
import pytest
from hypothesis import given
from hypothesis import strategies as st

from replog.errors import CorruptProducerSnapshotError
from replog.replication.producer_snapshot import (
    decode_producer_snapshot,
    encode_producer_snapshot,
)
from replog.replication.producer_state import (
    INT32_MAX,
    BatchMetadata,
    ProducerEntry,
    ProducerStateTable,
)
from tests.replication.test_producer_state import batch

SOURCE = "/data/payments-2/00000000000000000042.snapshot"


def entry(producer_id: int, epoch: int, *batches: BatchMetadata, last_ts: int = 7) -> ProducerEntry:
    return ProducerEntry(producer_id, epoch, tuple(batches), last_ts)


def test_the_bytes_are_kafkas_version_1_layout() -> None:
    data = encode_producer_snapshot(
        [entry(9, 2, BatchMetadata(10, 14, 100, 104, 5), BatchMetadata(15, 16, 200, 201, 6))]
    )
    body = struct.pack(">i", 1) + struct.pack(">qhiqiqiq", 9, 2, 16, 201, 1, 7, -1, -1)
    assert data == struct.pack(">hI", 1, crc32c.crc32c(body)) + body
    assert len(data) == 6 + 4 + 46


def test_an_entry_keeps_the_last_batch_only() -> None:
    first, last = BatchMetadata(0, 4, 10, 14, 5), BatchMetadata(5, 7, 20, 22, 6)
    [loaded] = decode_producer_snapshot(
        encode_producer_snapshot([entry(3, 0, first, last)]), SOURCE
    )
    assert loaded == entry(3, 0, BatchMetadata(5, 7, 20, 22, 7))
    # The table detects a retry of that batch, and only needs the next sequence after it.
    table = ProducerStateTable("t")
    table.load([loaded])
    duplicate = table.check(batch(3, 0, 5, count=3))
    assert duplicate is not None and (duplicate.first_offset, duplicate.last_offset) == (20, 22)
    assert table.check(batch(3, 0, 8)) is None


def test_an_open_transaction_and_the_coordinator_epoch_survive_a_snapshot() -> None:
    open_txn = replace(
        entry(9, 2, BatchMetadata(10, 14, 100, 104, 5)),
        current_txn_first_offset=90,
        coordinator_epoch=4,
    )
    data = encode_producer_snapshot([open_txn])
    assert struct.unpack_from(">iq", data, len(data) - 12) == (4, 90)  # Kafka's last two fields
    [loaded] = decode_producer_snapshot(data, SOURCE)
    assert (loaded.current_txn_first_offset, loaded.coordinator_epoch) == (90, 4)


def test_a_producer_with_no_data_batch_reads_back_with_none() -> None:
    data = encode_producer_snapshot([entry(4, 1)])
    assert struct.unpack_from(">qhiq", data, 10)[2:] == (-1, -1)
    assert decode_producer_snapshot(data, SOURCE) == [entry(4, 1)]


def test_a_batch_whose_sequences_wrap_reads_back_whole() -> None:
    wrapped = BatchMetadata(INT32_MAX - 1, 1, 50, 53, 7)  # sequences MAX-1, MAX, 0, 1
    assert decode_producer_snapshot(encode_producer_snapshot([entry(5, 0, wrapped)]), SOURCE) == [
        entry(5, 0, wrapped)
    ]


batches = st.builds(
    lambda seq, count, offset, ts: BatchMetadata(
        seq, (seq + count - 1) & INT32_MAX, offset, offset + count - 1, ts
    ),
    st.integers(0, INT32_MAX),
    st.integers(1, 1000),
    st.integers(0, 2**62),
    st.integers(-1, 2**50),
)
entries = st.builds(
    lambda pid, epoch, kept, ts: ProducerEntry(pid, epoch, tuple(kept), ts),
    st.integers(0, 2**63 - 1),
    st.integers(0, 2**15 - 1),
    st.lists(batches, max_size=5),
    st.integers(-1, 2**50),
)


@given(st.lists(entries, max_size=20, unique_by=lambda e: e.producer_id))
def test_round_trip_keeps_each_producers_epoch_timestamp_and_last_batch(
    table: list[ProducerEntry],
) -> None:
    loaded = decode_producer_snapshot(encode_producer_snapshot(table), SOURCE)
    # One timestamp per producer is stored: the last batch reads back with it.
    assert loaded == [
        ProducerEntry(
            e.producer_id,
            e.producer_epoch,
            tuple(replace(b, timestamp_ms=e.last_timestamp_ms) for b in e.batches[-1:]),
            e.last_timestamp_ms,
        )
        for e in table
    ]


VALID = encode_producer_snapshot([entry(9, 2, BatchMetadata(10, 14, 100, 104, 5))])


def recrc(data: bytes) -> bytes:
    return data[:2] + struct.pack(">I", crc32c.crc32c(data[6:])) + data[6:]


@pytest.mark.parametrize(
    ("data", "named"),
    [
        (b"", "0 bytes, shorter than the 10-byte header"),
        (VALID[:9], "9 bytes, shorter"),
        (struct.pack(">h", 2) + VALID[2:], "version 2, only 1 is known"),
        (VALID[:-1] + bytes([VALID[-1] ^ 1]), "does not match the stored"),
        (recrc(VALID[:-3]), "53 bytes for 1 entries (56 expected)"),
        (recrc(VALID[:6] + struct.pack(">i", -1) + VALID[10:]), "for -1 entries"),
    ],
    ids=["empty", "short", "version", "crc", "length", "negative-count"],
)
def test_every_defect_is_named_with_the_file(data: bytes, named: str) -> None:
    with pytest.raises(CorruptProducerSnapshotError) as raised:
        decode_producer_snapshot(data, SOURCE)
    assert str(raised.value).startswith(SOURCE + ": ") and named in str(raised.value)
