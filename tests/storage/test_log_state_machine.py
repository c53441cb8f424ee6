"""Stateful property: random appends (with leader changes), high-watermark moves, DeleteRecords
with retention, truncations, clean and unclean reopens and bounded reads keep a log equal to a
model that knows nothing about segments (docs/design/storage.md#reads,
docs/design/replication.md#leader-epoch-cache, #low-watermark, docs/design/storage.md#retention)."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from storage_helpers import (
    NO_SYNC_FS,
    T0,
    epoch_pairs,
    make_batch,
    open_log,
    read_all,
    small_config,
    split_batches,
    stamped,
)

from replog.record import read_header
from replog.storage import Log
from replog.storage.offset_moves import OffsetMoves
from replog.testing import ManualClock

CONFIG = small_config(segment_bytes=700, index_interval_bytes=90, retention_ms=-1)


class LogMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="replog-sm-"))
        self.clock = ManualClock(T0)
        self.log: Log = open_log(self.tmp / "sm-0", CONFIG, clock=self.clock, fs=NO_SYNC_FS)
        self.watch_offset_moves()
        self.batches: list[bytes] = []  # every batch not truncated away, in offset order
        self.start = 0
        self.end = 0
        self.hw = 0
        self.epoch = 0
        self.epochs: list[tuple[int, int]] = []  # the leader-epoch cache Kafka would hold

    def watch_offset_moves(self) -> None:
        """What the log reports moving (a LogManager's periodic checkpoints skip their walk
        while nothing moved: offset_moves.py), checked against what did move."""
        self.moves = OffsetMoves()
        self.log.report_offset_moves_to(self.moves)
        log = self.log
        self.moves_seen = (log.high_watermark, log.recovery_point, log.log_start_offset)

    def teardown(self) -> None:
        self.log.close_without_flush()
        shutil.rmtree(self.tmp, ignore_errors=True)

    # --- the model -------------------------------------------------------------------------------

    def visible(self) -> list[bytes]:
        return [b for b in self.batches if read_header(b).last_offset >= self.start]

    # Kafka's cache operations (docs/design/replication.md#leader-epoch-cache), applied where Kafka
    # applies them.

    def assign_epoch(self, epoch: int, start: int) -> None:
        if self.epochs and self.epochs[-1][0] == epoch and self.epochs[-1][1] <= start:
            return
        while self.epochs and (self.epochs[-1][0] >= epoch or self.epochs[-1][1] >= start):
            self.epochs.pop()
        self.epochs.append((epoch, start))

    def epochs_truncated_from_end(self, end: int) -> None:
        self.epochs = [e for e in self.epochs if e[1] < end]

    def epochs_truncated_from_start(self, start: int) -> None:
        dropped = [e for e in self.epochs if e[1] <= start]
        if dropped:
            self.epochs = [(dropped[-1][0], start), *self.epochs[len(dropped) :]]

    # --- rules -----------------------------------------------------------------------------------

    @rule(
        count=st.integers(1, 8),
        records=st.integers(1, 4),
        value_size=st.integers(0, 120),
        new_leader=st.booleans(),
    )
    def append(self, count: int, records: int, value_size: int, new_leader: bool) -> None:
        if new_leader:
            self.epoch += 1
        for _ in range(count):
            batch = make_batch(records, value_size=value_size, tag=self.end, timestamp=self.clock())
            info = self.log.append_as_leader(batch, self.epoch)
            self.assign_epoch(self.epoch, self.end)
            assert info.first_offset == self.end
            self.batches.append(stamped(batch, self.end, self.epoch))
            self.end += records

    @rule(fraction=st.floats(0, 1))
    def advance_high_watermark(self, fraction: float) -> None:
        target = self.hw + round((self.end - self.hw) * fraction)
        self.log.high_watermark = target
        self.hw = target

    @precondition(lambda self: self.hw > self.start)
    @rule(fraction=st.floats(0, 1))
    def delete_records(self, fraction: float) -> None:
        target = self.start + round((self.hw - self.start) * fraction)
        assert self.log.increment_log_start_offset(target) == (target > self.start)
        if target > self.start:
            self.start = target
            self.epochs_truncated_from_start(target)
        passed_over = self.log.has_no_retention_to_do  # what LogManager.run_retention skips
        assert not (self.log.delete_old_segments() and passed_over)

    @rule(fraction=st.floats(0, 1.1))
    def truncate(self, fraction: float) -> None:
        target = round(self.end * fraction)
        changed = self.log.truncate_to(target)
        assert changed == (target < self.end)
        if target >= self.end:  # drops an epoch a new leader recorded before writing
            self.epochs_truncated_from_end(self.end)
            return
        if target < self.start:
            self.batches = []
            self.epochs = []
            self.start = self.end = self.hw = target
            return
        dropped = [b for b in self.batches if read_header(b).last_offset >= target]
        self.batches = self.batches[: len(self.batches) - len(dropped)]
        self.end = read_header(dropped[0]).base_offset  # a straddling batch goes whole
        self.start = min(self.start, self.end)
        self.hw = min(self.hw, self.end)
        self.epochs_truncated_from_end(self.end)

    @rule()
    def flush(self) -> None:
        self.log.flush()

    @rule(clean=st.booleans())
    def reopen(self, clean: bool) -> None:
        bases = [s.base_offset for s in self.log.segments()]
        recovered_from = max([b for b in bases if b <= self.log.recovery_point] or bases[:1])
        if clean:
            self.log.close()
        else:
            self.log.close_without_flush()
        self.log = open_log(self.tmp / "sm-0", CONFIG, clock=self.clock, fs=NO_SYNC_FS)
        self.watch_offset_moves()
        # Recovery assigns epochs newer than the cache's latest: docs/design/storage.md#log-recovery
        if not clean:
            for batch in self.batches:
                header = read_header(batch)
                latest = self.epochs[-1][0] if self.epochs else -1
                if header.base_offset >= recovered_from and header.partition_leader_epoch > latest:
                    self.assign_epoch(header.partition_leader_epoch, header.base_offset)
        # Then loading cuts the cache (step 7): from the log end, or, after a clean close,
        # past it (docs/storage.md, "Leader epochs at a clean open"): an entry starting at
        # the log end stays, such as the first entry moved there by DeleteRecords of all.
        self.epochs_truncated_from_end(self.end + 1 if clean else self.end)
        self.epochs_truncated_from_start(self.start)
        if clean:
            assert self.log.high_watermark == self.hw
        else:  # the high watermark is an initial value: it may come back older, never newer
            assert self.start <= self.log.high_watermark <= self.hw
            self.hw = self.log.high_watermark

    @rule(
        start_fraction=st.floats(0, 1),
        max_bytes=st.integers(0, 2000),
        bound_delta=st.none() | st.integers(-30, 5),
        min_one=st.booleans(),
    )
    def read(
        self, start_fraction: float, max_bytes: int, bound_delta: int | None, min_one: bool
    ) -> None:
        start = self.start + round((self.end - self.start) * start_fraction)
        bound = None if bound_delta is None else max(0, self.hw + bound_delta)
        got = split_batches(self.log.read(start, max_bytes, bound, min_one_message=min_one))
        limit = self.end if bound is None else min(bound, self.end)
        candidates = [
            b
            for b in self.batches
            if read_header(b).last_offset >= start and read_header(b).last_offset < limit
        ]
        assert got == candidates[: len(got)]  # whole batches, in order, from the one holding start
        if got:
            assert sum(map(len, got)) <= max(max_bytes, len(got[0]) if min_one else 0)
        elif candidates:  # nothing returned although something is readable: only for size
            assert len(candidates[0]) > max_bytes and not min_one
        # The same bound twice: the cached bound position must agree.
        again = split_batches(self.log.read(start, max_bytes, bound, min_one_message=min_one))
        assert again == got

    # --- invariants ------------------------------------------------------------------------------

    @invariant()
    def every_offset_move_is_reported(self) -> None:
        log = self.log
        now = (log.high_watermark, log.recovery_point, log.log_start_offset)
        seen_high_watermark, seen_recovery_point, seen_start = self.moves_seen
        assert self.moves.high_watermarks or now[0] == seen_high_watermark
        assert self.moves.recovery_points or now[1] == seen_recovery_point
        assert self.moves.log_start_offsets or now[2] == seen_start
        moves = self.moves
        moves.high_watermarks = moves.recovery_points = moves.log_start_offsets = False
        self.moves_seen = now

    @invariant()
    def matches_the_model(self) -> None:
        log = self.log
        assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (
            self.start,
            self.end,
            self.hw,
        )
        assert read_all(log) == self.visible()
        assert epoch_pairs(log) == self.epochs
        # And the cache agrees with the batches: each epoch starts at its first batch.
        for epoch, start in self.epochs:
            if start > self.start:
                first = next(
                    b for b in self.batches if read_header(b).partition_leader_epoch == epoch
                )
                assert read_header(first).base_offset == start
        assert log.recovery_point <= log.log_end_offset
        bases = [s.base_offset for s in log.segments()]
        assert bases == sorted(bases) and bases[0] <= self.start


LogMachine.TestCase.settings = settings(max_examples=60, stateful_step_count=30, deadline=None)
TestLogMachine = LogMachine.TestCase
