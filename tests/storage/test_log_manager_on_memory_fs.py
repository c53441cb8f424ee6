"""The real `LogManager` on a `MemoryFileSystem` that loses what was not synced at each crash:
logs created, appended to, flushed, rolled (their rolls synced by the background task), cut,
deleted, their high watermarks checkpointed, and the broker crashing (with and without torn
tails) or stopping cleanly. After a crash the next manager has every log created (a creation
syncs its log dir), each with its flushed batches, whole batches only, a high watermark no
higher than the last checkpoint, and no log whose deletion was made durable
(docs/storage.md, "Recovery" and "The file-system seam")."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from storage_helpers import T0, append_batches, read_all, small_config

from replog.record import read_header
from replog.storage import Log
from replog.storage.log_manager import LogManager, LogManagerConfig
from replog.storage.memory_fs import MemoryFileSystem
from replog.testing import ManualClock

CONFIG = small_config(segment_bytes=600, index_interval_bytes=90, retention_ms=-1)
LOG_DIRS = ["/var/replog/d0", "/var/replog/d1"]
PARTITIONS = st.sampled_from([("orders", 0), ("orders", 1), ("payments", 0)])


@dataclass
class ModelLog:
    batches: list[bytes] = field(default_factory=list)
    durable: int = 0  # how many of the first batches were synced and not cut since
    ever: set[bytes] = field(default_factory=set)  # every batch once written
    high_watermark_checkpoint: int = 0


class LogManagerOnMemoryMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.clock = ManualClock(T0)
        self.fs = MemoryFileSystem(clock=self.clock)
        self.manager = self.start()
        self.logs: dict[tuple[str, int], ModelLog] = {}
        self.deleting: dict[tuple[str, int], ModelLog] = {}  # renamed aside, not yet synced
        self.epoch = 0

    def start(self) -> LogManager:
        return LogManager(
            LOG_DIRS,
            LogManagerConfig(log=CONFIG),
            fs=self.fs,
            clock=self.clock,
            task_clock=self.clock,
        )

    def teardown(self) -> None:
        self.manager.close_after_failure()

    def log(self, tp: tuple[str, int]) -> Log:
        return self.manager.get_log(*tp)

    # --- operations ------------------------------------------------------------------------

    @rule(tp=PARTITIONS)
    def create(self, tp: tuple[str, int]) -> None:
        if tp in self.logs or tp in self.deleting:
            return
        self.manager.get_or_create_log(*tp)
        self.logs[tp] = ModelLog()

    @rule(tp=PARTITIONS, count=st.integers(1, 4))
    def append(self, tp: tuple[str, int], count: int) -> None:
        if tp not in self.logs:
            return
        written = append_batches(self.log(tp), count, epoch=self.epoch, timestamp=self.clock())
        model = self.logs[tp]
        model.batches += written
        model.ever.update(written)
        self.clock.advance(1)

    @rule()
    def new_leader_epoch(self) -> None:
        self.epoch += 1

    @rule(tp=PARTITIONS)
    def flush(self, tp: tuple[str, int]) -> None:
        if tp in self.logs:
            self.log(tp).flush()
            self.logs[tp].durable = len(self.logs[tp].batches)

    @rule()
    def sync_rolled_segments(self) -> None:
        """The background task: rolled segments synced, recovery points checkpointed."""
        self.manager.flush_rolled_segments()
        self.manager.checkpoint_recovery_points()
        for tp, model in self.logs.items():
            active = self.log(tp).active_segment.base_offset
            below = sum(1 for b in model.batches if read_header(b).base_offset < active)
            model.durable = max(model.durable, below)

    @rule(tp=PARTITIONS)
    def checkpoint_high_watermark(self, tp: tuple[str, int]) -> None:
        if tp not in self.logs:
            return
        log = self.log(tp)
        log.high_watermark = log.log_end_offset
        self.manager.checkpoint_high_watermarks()
        for other, model in self.logs.items():
            model.high_watermark_checkpoint = self.log(other).high_watermark

    @rule(tp=PARTITIONS, data=st.data())
    def truncate(self, tp: tuple[str, int], data: st.DataObject) -> None:
        model = self.logs.get(tp)
        if model is None or not model.batches:
            return
        keep = data.draw(st.integers(0, len(model.batches) - 1))
        self.manager.truncate_to(*tp, read_header(model.batches[keep]).base_offset)
        del model.batches[keep:]
        model.durable = min(model.durable, keep)

    @rule(tp=PARTITIONS)
    def delete(self, tp: tuple[str, int]) -> None:
        if tp in self.logs:
            self.manager.delete_log(*tp)
            self.deleting[tp] = self.logs.pop(tp)

    @precondition(lambda self: self.deleting)
    @rule()
    def remove_deleted(self) -> None:
        self.manager.remove_deleted_logs()
        self.deleting.clear()

    @rule()
    def clean_restart(self) -> None:
        self.manager.shutdown()
        self.manager = self.start()
        self.deleting.clear()  # a start finishes every deletion
        for tp, model in self.logs.items():
            assert read_all(self.log(tp)) == model.batches
            model.durable = len(model.batches)

    @rule(seed=st.none() | st.integers(0, 2**32))
    def crash(self, seed: int | None) -> None:
        self.fs = self.fs.crash(None if seed is None else random.Random(seed))
        self.manager.close_after_failure()
        self.manager = self.start()
        found = set(self.manager.all_logs())
        assert set(self.logs) <= found, "a created log is gone"
        for tp in found - set(self.logs):
            # Only a deletion not yet durable comes back.
            assert tp in self.deleting, tp
            self.logs[tp] = self.deleting[tp]
        self.deleting.clear()
        for tp, model in self.logs.items():
            log = self.log(tp)
            recovered = read_all(log)
            assert recovered[: model.durable] == model.batches[: model.durable], tp
            assert set(recovered) <= model.ever, tp
            offset = 0
            for batch in recovered:
                assert read_header(batch).base_offset == offset
                offset = read_header(batch).next_offset
            assert log.log_end_offset == offset
            assert log.high_watermark <= model.high_watermark_checkpoint
            model.batches = recovered
            model.durable = len(recovered)
            model.high_watermark_checkpoint = log.high_watermark

    @invariant()
    def the_logs_hold_the_model(self) -> None:
        assert set(self.manager.all_logs()) == set(self.logs)
        for tp, model in self.logs.items():
            assert read_all(self.log(tp)) == model.batches


LogManagerOnMemoryMachine.TestCase.settings = settings(
    max_examples=100, stateful_step_count=30, deadline=None
)
test_the_log_manager_survives_crashes_on_a_memory_file_system = LogManagerOnMemoryMachine.TestCase


def test_a_new_log_dir_survives_a_crash_with_the_logs_made_in_it() -> None:
    """The first start makes the log dirs and syncs their parents: a log created in one (its
    creation syncs the log dir) and flushed is there after a crash."""
    clock = ManualClock(T0)
    fs = MemoryFileSystem(clock=clock)
    manager = LogManager(LOG_DIRS[:1], LogManagerConfig(log=CONFIG), fs=fs, clock=clock)
    log = manager.get_or_create_log("orders", 0)
    written = append_batches(log, 3)
    log.flush()
    fs = fs.crash()
    manager.close_after_failure()
    again = LogManager(LOG_DIRS[:1], LogManagerConfig(log=CONFIG), fs=fs, clock=clock)
    assert read_all(again.get_log("orders", 0)) == written
    again.shutdown()
