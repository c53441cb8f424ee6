"""Property: after random appends to a log with small segments, every read equals a naive model
computed from the list of appended batches (docs/design/storage.md#segment-roll by size,
#reads)."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st
from storage_helpers import (
    NO_SYNC_FS,
    T0,
    make_batch,
    open_log,
    small_config,
    split_batches,
    stamped,
)

from replog.errors import OffsetOutOfRangeError
from replog.record import read_header
from replog.testing import ManualClock

SEGMENT_BYTES = 1024


@dataclass
class LogModel:
    """Segments as lists of (base offset, last offset, bytes), rolled by Kafka's size rule."""

    segment_bytes: int
    segments: list[list[tuple[int, int, bytes]]] = field(default_factory=lambda: [[]])
    end: int = 0

    def append(self, batch: bytes) -> None:
        header = read_header(batch)
        active = self.segments[-1]
        if sum(len(b) for _, _, b in active) > self.segment_bytes - len(batch):
            self.segments.append([])
        self.segments[-1].append((header.base_offset, header.last_offset, batch))
        self.end = header.next_offset

    def bases(self) -> list[int]:
        return [seg[0][0] for seg in self.segments if seg]

    def read(
        self, start: int, max_bytes: int, bound: int | None, min_one_message: bool
    ) -> list[bytes]:
        bound = self.end if bound is None else min(bound, self.end)
        if start >= bound:
            return []
        segment = next(seg for seg in reversed(self.segments) if seg and seg[0][0] <= start)
        candidates = [b for _, last, b in segment if start <= last < bound]
        if not candidates:
            return []
        budget = max(max_bytes, len(candidates[0])) if min_one_message else max_bytes
        taken: list[bytes] = []
        used = 0
        for batch in candidates:
            if used + len(batch) > budget:
                break
            taken.append(batch)
            used += len(batch)
        return taken


appends = st.lists(
    st.tuples(
        st.integers(1, 6), st.integers(0, 140)
    ),  # (records, value size): a batch fits a segment
    min_size=1,
    max_size=40,
)


@settings(max_examples=60, deadline=None)
@given(appends=appends, data=st.data())
def test_reads_equal_the_naive_model(appends: list[tuple[int, int]], data: st.DataObject) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        log = open_log(
            f"{tmp}/model-0",
            small_config(segment_bytes=SEGMENT_BYTES, index_interval_bytes=128),
            clock=ManualClock(T0),
            fs=NO_SYNC_FS,
        )
        model = LogModel(SEGMENT_BYTES)
        for i, (records, value_size) in enumerate(appends):
            batch = make_batch(records, value_size=value_size, tag=i)
            info = log.append_as_leader(batch, 3)
            model.append(stamped(batch, info.first_offset, 3))
        assert log.log_end_offset == model.end
        assert [s.base_offset for s in log.segments()] == model.bases()

        for _ in range(25):
            start = data.draw(st.integers(0, model.end), label="start")
            max_bytes = data.draw(st.integers(0, 3 * SEGMENT_BYTES), label="max_bytes")
            bound = data.draw(st.none() | st.integers(0, model.end + 3), label="bound")
            min_one = data.draw(st.booleans(), label="min_one_message")
            got = split_batches(log.read(start, max_bytes, bound, min_one_message=min_one))
            assert got == model.read(start, max_bytes, bound, min_one)

        beyond = data.draw(st.integers(model.end + 1, model.end + 1000), label="beyond")
        try:
            log.read(beyond, 1000)
        except OffsetOutOfRangeError:
            pass
        else:
            raise AssertionError(f"read at {beyond} past the end {model.end} did not fail")
        log.close()
