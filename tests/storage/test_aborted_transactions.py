"""The `.txnindex` format and the fetch's search over it (Kafka's TransactionIndex)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from replog.errors import CorruptIndexError
from replog.storage.aborted_transactions import (
    ENTRY_SIZE,
    AbortedTransaction,
    decode,
    encode,
    overlapping,
)

A = AbortedTransaction(producer_id=7, first_offset=10, last_offset=15, last_stable_offset=10)
B = AbortedTransaction(producer_id=8, first_offset=12, last_offset=30, last_stable_offset=16)


def test_an_entry_is_kafkas_34_bytes():
    assert ENTRY_SIZE == 34
    assert encode([A]).hex() == (
        "00000000000000000007000000000000000a000000000000000f000000000000000a"
    )


@given(
    st.lists(
        st.tuples(
            st.integers(0, 2**40), st.integers(0, 1000), st.integers(1, 1000), st.integers(0, 2**40)
        ),
        max_size=20,
    )
)
def test_entries_round_trip(raw):
    entries, last = [], -1
    for producer_id, length, gap, lso in raw:
        end = last + gap
        entries.append(AbortedTransaction(producer_id, max(0, end - length), end, lso))
        last = end
    assert decode(encode(entries), "t.txnindex") == entries


def test_appends_out_of_marker_order_are_a_bug():
    with pytest.raises(ValueError, match="marker order"):
        encode([B, A])
    with pytest.raises(ValueError, match="marker order"):
        encode([A], after_last_offset=15)


@pytest.mark.parametrize(
    ("data", "names"),
    [
        (encode([A])[:-1], "whole number"),
        (b"\x00\x01" + encode([A])[2:], "unknown version 1"),
        (encode([B]) + encode([A]), "entry 1"),
    ],
)
def test_corrupt_files_are_named(data, names):
    with pytest.raises(CorruptIndexError, match=names) as caught:
        decode(data, "00000000000000000000.txnindex")
    assert "00000000000000000000.txnindex" in str(caught.value)


def test_an_entry_below_the_segments_base_offset_is_corrupt():
    with pytest.raises(CorruptIndexError, match="base offset 20"):
        decode(encode([A]), "x.txnindex", base_offset=20)


def test_a_fetch_is_told_of_the_transactions_it_overlaps():
    # A spans 10..15, B 12..30
    assert overlapping([A, B], 0, 10).found == ()  # ends before A starts
    assert overlapping([A, B], 0, 11).found == (A,)
    assert overlapping([A, B], 16, 40).found == (B,)  # A ended before the fetch
    assert overlapping([A, B], 13, 14).found == (A, B)


def test_the_search_stops_at_an_entry_whose_lso_reaches_the_bound():
    result = overlapping([A, B], 0, 16)
    assert result.complete and result.found == (A, B)
    result = overlapping([A, B], 0, 17)
    assert not result.complete  # a later segment may hold one that began below 17
