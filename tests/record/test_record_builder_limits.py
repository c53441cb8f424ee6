"""`BatchBuilder.try_append`: a batch.size decision on the record's exact encoded size."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from record_test_support import record_lists

from replog.record import RECORD_BATCH_OVERHEAD, BatchBuilder, build_batch


@settings(max_examples=200)
@given(record_lists, st.integers(min_value=0, max_value=4000))
def test_try_append_fills_up_to_the_limit_and_changes_nothing_when_full(
    records: list[tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]],
    limit: int,
) -> None:
    builder = BatchBuilder()
    accepted = []
    for record in records:
        before = (builder.size_in_bytes, builder.records_count)
        offset_delta = builder.try_append(*record, size_limit=limit)
        if offset_delta < 0:
            assert (builder.size_in_bytes, builder.records_count) == before
            assert before[1] > 0  # the first record always fits
            plain = BatchBuilder()
            plain.extend([*accepted, record])
            assert plain.size_in_bytes > limit  # it really did not fit
            break
        assert offset_delta == len(accepted)
        accepted.append(record)
        assert builder.size_in_bytes <= limit or len(accepted) == 1
    # what was accepted builds the same bytes as appending it plainly
    assert builder.build() == build_batch(accepted)


def test_a_rejected_record_leaves_the_timestamps_alone() -> None:
    builder = BatchBuilder()
    builder.append(1_000, None, b"a")
    assert builder.try_append(9_000, None, b"b" * 100, size_limit=RECORD_BATCH_OVERHEAD + 20) < 0
    assert builder.build() == build_batch([(1_000, None, b"a", ())])


def test_a_timestamp_delta_out_of_range_raises_without_a_trace() -> None:
    builder = BatchBuilder()
    builder.append(-(2**62), None, b"a")
    with pytest.raises(ValueError, match="varlong"):
        builder.try_append(2**62, None, b"b", size_limit=10**6)
    assert builder.records_count == 1
    assert builder.build() == build_batch([(-(2**62), None, b"a", ())])
