"""The broker's log cleaner (Kafka's `LogCleaner` and `LogCleanerManager`): which compacted log
is cleaned next, passes on threads of their own, the `cleaner-offset-checkpoint` files, and
the pauses that truncations, deletions and retention need.

Rules:
- Candidates: the open logs whose policy has compact, in no cleaning state, not marked
  uncleanable, whose producer state is known (`producer_last_batches` answers, else the log
  waits). Nothing at or past a partition's first open transaction is cleanable
  (`first_unstable_offset`: the last stable offset bounds a pass, as in Kafka). Each is
  measured from its checkpoint entry (`cleanable.log_to_clean` over
  `log_summary.summarize_with_config`), outside the manager's lock; the filthiest qualifying
  one is started (`CleaningStates.start`) under the lock, so no two threads clean one log.
  An entry out of the log's range is reset to the log start (Kafka's forced update).
- A pass runs for a cleaner thread with that thread's key map (the dedupe buffer split among
  `log.cleaner.threads`), reading through the shared I/O throttle (a child reports its reads
  only while the throttle `limits`: unthrottled, they cost the thread no turn): with
  `use_processes`, in the thread's child process (`cleaning_process`, started at its first pass:
  one that cannot start is a WARNING and the threads clean from then on), else on the thread
  itself (`log_cleaning.clean_log`). It stops at its next batch once its cleaning is aborted,
  its log stops compacting (a policy change) or the cleaner shuts down; a throttle's wait ends
  at once for the first and last, and an abort or the shutdown wakes a thread waiting on its
  child. A child that dies abandons its pass (the log stays cleanable, the entry does not move);
  the thread's next pass starts another.
- The pass's end (Kafka's `doneCleaning`), under the lock: when it was neither abandoned nor
  aborted, the log's entry moves to the offset it reached; the state ends (an aborted one
  becomes paused) and whoever waits in `abort_and_pause` wakes.
- A pass abandoned on a batch that did not parse while the log's truncation count stayed the
  same (so no truncation rewrote what it read) marks the log uncleanable (Kafka's
  `markPartitionUncleanable`), as does any other failure of its pass but a storage error, which
  stops the threads and goes to `on_storage_error` (the broker fail-stops). A log stays
  uncleanable until it is removed.
- `abort_and_pause` (before a truncation, a deletion, a move) waits until no pass runs on the
  log and keeps new ones off it until `resume`. A pass runs its swaps under the log's lock, and
  a swap of segments a truncation changed is refused (`Log.replace_with_cleaned`), so the
  pause is what Kafka does rather than what correctness needs. `pause_if_idle` is retention's
  (Kafka's deletable logs): a log a pass is cleaning is skipped this round.
- The checkpoint entries live here and are written by the cleaner threads after each pass
  and by `write_checkpoints` (the log manager's background tasks, its shutdown): a removal or
  a truncation's lowered entry is never an fsync on the caller's thread. A crash that loses a
  lowered entry leaves one above offsets rewritten since, which only makes the next pass
  treat them as clean (kept unless a later record of their key is in its map).
- Stats (Kafka's metrics): the largest dirty ratio among the candidates of the last choice,
  each thread's last pass (recopy percent: bytes written over bytes read; its duration; its
  key map's use), the time of the last run, the uncleanable logs per log dir.
- A thread that finds nothing to clean sleeps `log.cleaner.backoff.ms`, or until `wake`. The
  pass's CPU runs at a lower priority than the event loop: in a child, the pass's
  (`pass_priority`: `SCHED_IDLE` until its log has waited `log.cleaner.idle.max.wait.ms`,
  grown too far or passed `max.compaction.lag.ms`, then `CLEANER_NICE`; each round's
  measures feed the since-when of every log, and an idle pass still running at its
  `promotion_ms`, or whose log reached its `promotion_bytes`, is promoted), a thread keeping
  one child, set to each pass's priority (`CleaningProcess.set_priority`; another where it
  cannot be raised); on the threads, their own `CLEANER_NICE` (not idle: a pass on a thread
  hands the interpreter's lock over between two batches, and the loop would wait for it to
  get a core). A thread whose passes run in a child keeps the loop's priority: it swaps
  segments in under the log's lock, which the loop waits for (a thread at nice 10 holding it
  while it waited for a core kept appends waiting). `shutdown` closes the
  children.
- `reconfigure` (a dynamic broker config, `cleaner_config.reconfigured`) changes a running
  cleaner without a restart: the throttle's rate at once (a thread waiting on the throttle stops
  waiting, a child's pass starts or stops reporting its reads), the backoff at each thread's
  next sleep (sleeping threads wake), more threads start at once, fewer end at their next round
  (a running pass ends first, and a thread's child goes with it), and a thread's key map is made
  again at its next pass when its share of the buffer changed.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace

from replog.clock import Clock, monotonic_ms, wall_clock_ms
from replog.common import TopicPartitionKey
from replog.errors import CleaningProcessGoneError, CorruptCheckpointError, KafkaStorageError
from replog.storage.cleaner.batch_filter import ProducerLastBatch
from replog.storage.cleaner.cleanable import LogToClean, filthiest, log_to_clean
from replog.storage.cleaner.cleaner_checkpoint import CleanerCheckpoint
from replog.storage.cleaner.cleaner_config import CleanerConfig
from replog.storage.cleaner.cleaning_process import CLEANER_NICE, CleaningProcess
from replog.storage.cleaner.cleaning_state import ABORTED, IN_PROGRESS, CleaningStates
from replog.storage.cleaner.log_cleaning import CleaningPass, prepare_pass, run_pass
from replog.storage.cleaner.log_summary import summarize_with_config
from replog.storage.cleaner.offset_map import ENTRY_BYTES, OffsetMap
from replog.storage.cleaner.pass_priority import (
    URGENT,
    CleanableSince,
    pass_priority,
    promotion_bytes,
    promotion_ms,
)
from replog.storage.cleaner.throttle import Throttle
from replog.storage.fs import LOCAL_FS, FileSystem
from replog.storage.log import Log

log = logging.getLogger("replog.storage.cleaner")

LogEntry = tuple[TopicPartitionKey, str, Log]  # the partition, its log dir, its log
ProducerSource = Callable[[TopicPartitionKey], Mapping[int, ProducerLastBatch] | None]


# The first offset of the partition's lowest open transaction, None when none is open.
UnstableSource = Callable[[TopicPartitionKey], int | None]


def _no_producers(partition: TopicPartitionKey) -> Mapping[int, ProducerLastBatch]:
    return {}


def _no_transactions(partition: TopicPartitionKey) -> int | None:
    return None


@dataclass(slots=True)
class _PassRun:
    """One pass's priority (a child's, as it goes), when or at which log size an idle one is
    promoted, and whether it was."""

    priority: str
    promote_at_ms: int
    promote_at_bytes: int | None
    promoted: bool = False


@dataclass(frozen=True, slots=True)
class PassReport:
    """One pass a thread ran: which log, what it did, how long it took."""

    partition: TopicPartitionKey
    log_dir: str
    candidate: LogToClean
    result: CleaningPass
    elapsed_ms: int
    priority: str = URGENT  # the child's at the pass's end (a thread's pass: `CLEANER_NICE`)
    promoted: bool = False

    @property
    def recopy_percent(self) -> float:
        read = self.result.stats.bytes_read
        return 100.0 * self.result.stats.bytes_written / read if read else 0.0


@dataclass(frozen=True, slots=True)
class CleanerStats:
    """What the metrics read (Kafka's `LogCleaner` and `LogCleanerManager` gauges)."""

    max_dirty_percent: float
    recopy_percent: float  # the mean of each thread's last pass, as Kafka's
    max_clean_time_s: float
    max_buffer_utilization_percent: float
    time_since_last_run_ms: int
    uncleanable_partitions: Mapping[str, int] = field(default_factory=dict)  # per log dir


class LogCleaner:
    """The cleaner of the logs `logs` lists (module Rules)."""

    def __init__(
        self,
        config: CleanerConfig,
        log_dirs: Iterable[str],
        logs: Callable[[], Iterable[LogEntry]],
        *,
        fs: FileSystem = LOCAL_FS,
        clock: Clock = wall_clock_ms,
        timer: Clock = monotonic_ms,
        use_processes: bool = False,
    ) -> None:
        self.config = config
        self._logs = logs
        self._clock = clock
        self._timer = timer
        self.producer_last_batches: ProducerSource = _no_producers
        self.first_unstable_offset: UnstableSource = _no_transactions
        self._lock = threading.Condition()
        self._states = CleaningStates()
        self._since: CleanableSince[TopicPartitionKey] = CleanableSince()  # under `_lock`
        self._checkpoints = {d: CleanerCheckpoint(d, fs) for d in log_dirs}
        self._offsets: dict[str, dict[TopicPartitionKey, int]] = {}
        for log_dir, checkpoint in self._checkpoints.items():
            try:
                self._offsets[log_dir] = checkpoint.read()
            except CorruptCheckpointError as exc:  # every log is dirty from its start
                log.warning("%s; its compacted logs are cleaned from their starts", exc)
                self._offsets[log_dir] = {}
        self._unwritten: set[str] = set()
        self._file_lock = threading.Lock()  # orders the checkpoint files' writers
        self._uncleanable: dict[str, set[TopicPartitionKey]] = {d: set() for d in self._offsets}
        self._maps: list[OffsetMap | None] = [None] * config.threads  # made at first use
        self._use_processes = use_processes
        # Each thread's child, by thread index (a dict: the number of threads may change).
        self._processes: dict[int, CleaningProcess] = {}
        self._throttle = Throttle(config.io_max_bytes_per_second, timer())
        self._throttle_lock = threading.Lock()
        self._max_dirty_ratio = 0.0
        self._last: list[PassReport | None] = [None] * config.threads
        self._last_run_ms = clock()
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._threads: list[threading.Thread] = []
        self._started = False
        self._running: set[int] = set()  # the indexes of the live threads, under `_lock`
        self._on_storage_error: Callable[[KafkaStorageError], object] | None = None

    # --- one pass -----------------------------------------------------------------------------

    def clean_once(self, thread: int = 0, now_ms: int | None = None) -> PassReport | None:
        """Choose the filthiest log and clean it with thread `thread`'s key map; None when no
        log qualifies (module Rules). Synchronous: the threads call it, and so may a test."""
        now = self._clock() if now_ms is None else now_ms
        chosen = self._grab_filthiest(now)
        self._last_run_ms = self._clock()
        if chosen is None:
            return None
        tp, log_dir, target, candidate, last_batches, since = chosen
        wait = self.config.idle_max_wait_ms
        pass_run = _PassRun(
            pass_priority(candidate, since, now, wait),
            promotion_ms(candidate, since, wait),
            promotion_bytes(candidate),
        )
        truncations = target.truncation_count
        began = self._timer()
        result: CleaningPass | None = None
        try:
            result = self._run_pass(thread, tp, target, candidate, now, last_batches, pass_run)
        except KafkaStorageError:
            raise
        except Exception:
            log.exception("%s: cleaning failed; the log is marked uncleanable", target.name)
        finally:
            self._done(tp, log_dir, target, result, truncations)
        self._write_checkpoints()
        if result is None:
            return None
        report = PassReport(
            tp,
            log_dir,
            candidate,
            result,
            self._timer() - began,
            pass_run.priority,
            pass_run.promoted,
        )
        self._last[thread] = report
        self._last_run_ms = self._clock()
        log.info(
            "%s: cleaned offsets %d to %d in %d ms: %d of %d bytes kept (%.1f%%), %s%s%s; "
            "%d segment groups swapped, %d unchanged",
            target.name,
            candidate.first_dirty,
            result.end_offset,
            report.elapsed_ms,
            result.stats.bytes_written,
            result.stats.bytes_read,
            report.recopy_percent,
            pass_run.priority,
            ", promoted" if pass_run.promoted else "",
            ", abandoned" if result.abandoned else "",
            result.groups_swapped,
            result.groups_kept,
        )
        return report

    def _run_pass(
        self,
        thread: int,
        tp: TopicPartitionKey,
        target: Log,
        candidate: LogToClean,
        now_ms: int,
        last_batches: Mapping[int, ProducerLastBatch],
        pass_run: _PassRun,
    ) -> CleaningPass:
        """One pass over `target`, in thread `thread`'s child at `pass_run`'s priority (which
        notes a promotion) or on this thread (module Rules)."""
        prepared = prepare_pass(
            target,
            first_dirty=candidate.first_dirty,
            first_uncleanable=candidate.first_uncleanable,
            now_ms=now_ms,
            delete_retention_ms=target.config.delete_retention_ms,
            last_batches=last_batches,
            # Kafka's: the aborted transactions of the whole range the pass rewrites, so it
            # removes their data (`transactions.CleanedTransactions`).
            aborted=target.collect_aborted_transactions(
                target.log_start_offset, candidate.first_uncleanable
            ),
        )

        def should_stop() -> bool:
            return self._states.is_aborted(tp) or self._stop.is_set() or not target.config.compacts

        def should_promote() -> bool:
            grown = pass_run.promote_at_bytes
            pass_run.promoted = self._clock() >= pass_run.promote_at_ms or (
                grown is not None and target.size_in_bytes >= grown
            )
            return pass_run.promoted

        process = self._process(thread, pass_run.priority)
        if process is None:
            pass_run.priority = URGENT  # the thread's own nice value
            return run_pass(
                prepared.plan,
                self._offset_map(thread),
                fs=target.file_system,
                open_segment=prepared.open_segment,
                swap=prepared.swap,
                should_stop=should_stop,
                on_read=lambda size: self._throttled(tp, size, hand_over=True),
            )
        try:
            return process.run(
                prepared,
                self.config.buffer_per_thread,
                should_stop=should_stop,
                on_read=lambda size: self._throttled(tp, size, hand_over=False),
                should_promote=should_promote,
                throttled=self._throttle_limits,
            )
        except CleaningProcessGoneError as exc:  # the next pass starts another (`_process`)
            log.error("%s", exc)
            first_dirty = candidate.first_dirty
            return CleaningPass(first_dirty, first_dirty, abandoned=True)
        finally:
            pass_run.priority = process.priority

    def _process(self, thread: int, priority: str) -> CleaningProcess | None:
        """Thread `thread`'s child for a pass at `priority`: its child, set to that priority,
        or a new one if it has none, or one that died or cannot be raised to it (discarded
        first: one key map a thread is the bound); None: the thread cleans."""
        if not self._use_processes:
            return None
        process = self._processes.get(thread)
        if process is not None and (process.gone or not process.set_priority(priority)):
            with self._lock:
                del self._processes[thread]
            process.discard()  # not waited for: an idle or killed child may wait for a core
            process = None
        if process is None:
            try:
                process = CleaningProcess.start(priority)
            except OSError as exc:
                log.warning("the log cleaner cleans on its threads: no process: %s", exc)
                self._use_processes = False
                return None
            with self._lock:
                if self._stop.is_set():  # `shutdown` closed the others already
                    process.close()
                    return None
                self._processes[thread] = process
            log.info(
                "log cleaner thread %d: %s passes run in process %d", thread, priority, process.pid
            )
        return process

    def _interrupt_processes(self) -> None:
        """Wake the threads waiting on their children: a pass may have to stop."""
        for process in self._processes.values():
            process.interrupt()

    def _grab_filthiest(
        self, now_ms: int
    ) -> (
        tuple[TopicPartitionKey, str, Log, LogToClean, Mapping[int, ProducerLastBatch], int] | None
    ):
        """The filthiest qualifying log, started, with since when it has been cleanable."""
        candidates: list[tuple[LogToClean, LogEntry, Mapping[int, ProducerLastBatch]]] = []
        offsets = {d: dict(o) for d, o in self._offsets.items()}  # a snapshot, read unlocked
        for entry in list(self._logs()):
            tp, log_dir, target = entry
            if (
                target.closed
                or not target.config.compacts
                or self._states.state(tp) is not None
                or tp in self._uncleanable.get(log_dir, ())
            ):
                continue
            last_batches = self.producer_last_batches(tp)
            if last_batches is None:
                continue  # its producer state is not loaded yet
            # Kafka's: nothing at or past an open transaction is cleanable (its outcome is
            # not known), so the last stable offset bounds the pass, not the HW.
            unstable = self.first_unstable_offset(tp)
            try:
                summary = summarize_with_config(
                    target, None if unstable is None else min(unstable, target.high_watermark)
                )
            except Exception as exc:  # closed or changed meanwhile: the next round sees it
                log.debug("%s: not measured for cleaning: %s", target.name, exc)
                continue
            candidate = log_to_clean(summary, offsets.get(log_dir, {}).get(tp), now_ms)
            if candidate.force_checkpoint_update:
                self._set_offset(log_dir, tp, candidate.first_dirty, only_if=offsets)
            candidates.append((candidate, entry, last_batches))
        self._max_dirty_ratio = max((c.dirty_ratio for c, _, _ in candidates), default=0.0)
        with self._lock:
            self._since.observe(((e[0], c.qualifies) for c, e, _ in candidates), now_ms)
        best = filthiest(c for c, _, _ in candidates)
        if best is None:
            return None
        for candidate, (tp, log_dir, target), last_batches in candidates:
            if candidate is best:
                with self._lock:
                    if self._stop.is_set() or not self._states.start(tp):
                        return None  # paused meanwhile: the next round chooses again
                    since = self._since.since(tp, now_ms)
                return tp, log_dir, target, candidate, last_batches, since
        return None

    def _done(
        self,
        tp: TopicPartitionKey,
        log_dir: str,
        target: Log,
        result: CleaningPass | None,
        truncations: int,
    ) -> None:
        with self._lock:
            in_progress = self._states.state(tp) == IN_PROGRESS
            if result is None:
                self._uncleanable.setdefault(log_dir, set()).add(tp)
            elif not result.abandoned and in_progress and not target.closed:
                self._offsets.setdefault(log_dir, {})[tp] = result.end_offset
                self._unwritten.add(log_dir)
                self._since.cleaned(tp)
            elif (
                result.corrupt is not None
                and in_progress
                and not target.closed
                and target.truncation_count == truncations
            ):
                log.error(
                    "%s: marked uncleanable: %s (it is not cleaned again until it is removed)",
                    target.name,
                    result.corrupt,
                )
                self._uncleanable.setdefault(log_dir, set()).add(tp)
            self._states.done(tp)
            self._lock.notify_all()

    def _offset_map(self, thread: int) -> OffsetMap:
        offset_map = self._maps[thread]
        memory = self.config.buffer_per_thread
        if offset_map is None or offset_map.slots != memory // ENTRY_BYTES:
            # An anonymous mapping: only the pages the keys touch become resident.
            offset_map = self._maps[thread] = OffsetMap(memory)
        return offset_map

    def _throttle_limits(self) -> bool:
        with self._throttle_lock:
            return self._throttle.limits

    def _throttled(self, tp: TopicPartitionKey, size: int, *, hand_over: bool) -> None:
        """Note `size` bytes read by `tp`'s pass, and sleep as the throttle says; `hand_over`:
        the pass runs on this thread (below)."""
        with self._throttle_lock:
            sleep_ms = self._throttle.observe(size, self._timer())
            rate = self._throttle.rate
        if sleep_ms > 0:
            # Cut short by an abort or the shutdown: whoever waits in `abort_and_pause` (a
            # truncation on the event loop) must not wait out the throttle; and by a new
            # rate, which the next batch is measured against.
            with self._lock:
                self._lock.wait_for(
                    lambda: (
                        self._stop.is_set()
                        or self._states.is_aborted(tp)
                        or self._throttle.rate != rate
                    ),
                    sleep_ms / 1000,
                )
        elif hand_over:
            # Hand the interpreter's lock over between two batches: a thread waiting for it
            # (the event loop) would otherwise wait out the 5 ms switch interval each time.
            time.sleep(0)

    # --- the checkpoint entries --------------------------------------------------------------

    def checkpoint_offset(self, log_dir: str, tp: TopicPartitionKey) -> int | None:
        """The log's entry: where its next pass starts (None: from its log start)."""
        return self._offsets.get(log_dir, {}).get(tp)

    def _set_offset(
        self,
        log_dir: str,
        tp: TopicPartitionKey,
        offset: int,
        only_if: Mapping[str, Mapping[TopicPartitionKey, int]] | None = None,
    ) -> None:
        with self._lock:
            current = self._offsets.setdefault(log_dir, {})
            if only_if is not None and current.get(tp) != only_if.get(log_dir, {}).get(tp):
                return  # moved since it was read: that move stands
            current[tp] = offset
            self._unwritten.add(log_dir)

    def truncated(self, log_dir: str, tp: TopicPartitionKey, log_end_offset: int) -> None:
        """A truncation cut the log to `log_end_offset`: its entry goes no higher (Kafka's
        `maybeTruncateCheckpoint`)."""
        with self._lock:
            current = self._offsets.get(log_dir, {})
            if current.get(tp, -1) > log_end_offset:
                current[tp] = log_end_offset
                self._unwritten.add(log_dir)

    def write_checkpoints(self) -> None:
        """Write the checkpoint files whose entries changed since their last write."""
        self._write_checkpoints()

    def _write_checkpoints(self) -> None:
        with self._file_lock:
            with self._lock:
                due = {d: dict(self._offsets.get(d, {})) for d in self._unwritten}
                self._unwritten.clear()
            try:
                for log_dir, offsets in due.items():
                    self._checkpoints[log_dir].write(offsets)
            except BaseException:
                with self._lock:
                    self._unwritten |= due.keys()  # the next write tries again
                raise

    # --- pauses -------------------------------------------------------------------------------

    def abort_and_pause(self, tp: TopicPartitionKey) -> None:
        """Stop cleaning `tp` until `resume`: waits for a running pass to stop (module Rules)."""
        with self._lock:
            if self._states.abort_and_pause(tp):
                self._lock.notify_all()  # a pass waiting on the throttle stops now
                self._interrupt_processes()
                while not self._states.is_paused(tp):
                    self._lock.wait()

    def resume(self, tp: TopicPartitionKey) -> None:
        with self._lock:
            self._states.resume(tp)
        self._wake.set()

    @contextlib.contextmanager
    def paused(self, tp: TopicPartitionKey) -> Iterator[None]:
        """No pass runs on `tp` inside the block."""
        self.abort_and_pause(tp)
        try:
            yield
        finally:
            self.resume(tp)

    def pause_if_idle(self, tp: TopicPartitionKey) -> bool:
        """Pause `tp` unless it is in any cleaning state; whether it did (then `resume`)."""
        with self._lock:
            if self._states.state(tp) is not None:
                return False
            self._states.abort_and_pause(tp)
            return True

    def remove(self, log_dir: str, tp: TopicPartitionKey) -> None:
        """The log is gone (deleted, set aside): stop its pass, forget its state and entry."""
        self.abort_and_pause(tp)
        with self._lock:
            self._states.forget(tp)
            self._since.cleaned(tp)
            if self._offsets.get(log_dir, {}).pop(tp, None) is not None:
                self._unwritten.add(log_dir)
            self._uncleanable.get(log_dir, set()).discard(tp)

    def is_cleaning(self, tp: TopicPartitionKey) -> bool:
        """Whether a pass runs on `tp` (aborted or not)."""
        return self._states.state(tp) in (IN_PROGRESS, ABORTED)

    def is_uncleanable(self, log_dir: str, tp: TopicPartitionKey) -> bool:
        return tp in self._uncleanable.get(log_dir, ())

    # --- stats --------------------------------------------------------------------------------

    def stats(self, now_ms: int | None = None) -> CleanerStats:
        now = self._clock() if now_ms is None else now_ms
        reports = self._last[: self.config.threads]
        recopy = [r.recopy_percent if r is not None else 0.0 for r in reports]
        return CleanerStats(
            max_dirty_percent=100.0 * self._max_dirty_ratio,
            recopy_percent=sum(recopy) / len(recopy),
            max_clean_time_s=max((r.elapsed_ms / 1000 for r in reports if r), default=0.0),
            max_buffer_utilization_percent=max(
                (100.0 * r.result.map_utilization for r in reports if r), default=0.0
            ),
            time_since_last_run_ms=max(0, now - self._last_run_ms),
            uncleanable_partitions={d: len(s) for d, s in self._uncleanable.items()},
        )

    # --- threads ------------------------------------------------------------------------------

    def wake(self) -> None:
        """Look for work now rather than after the backoff (a policy change, a resume)."""
        self._wake.set()

    def start(self, on_storage_error: Callable[[KafkaStorageError], object] | None = None) -> None:
        """Run `log.cleaner.threads` cleaner threads until `shutdown` (when enabled)."""
        if self._started or not self.config.enable:
            return
        self._started = True
        self._on_storage_error = on_storage_error
        self._start_threads()

    def _start_threads(self) -> None:
        """Start a thread for each index below `log.cleaner.threads` that has none running."""
        with self._lock:
            for index in range(self.config.threads):
                if index in self._running or self._stop.is_set():
                    continue
                thread = threading.Thread(
                    target=self._run,
                    args=(index, self._on_storage_error),
                    name=f"replog-log-cleaner-{index}",
                    daemon=True,
                )
                self._running.add(index)
                self._threads.append(thread)
                thread.start()

    def reconfigure(self, config: CleanerConfig) -> None:
        """Take `config`'s threads, dedupe buffer, I/O rate and backoff on a running cleaner
        (module Rules; Kafka's `LogCleaner.reconfigure`). `enable` stays the start's."""
        with self._lock:
            self.config = replace(config, enable=self.config.enable)
            missing = config.threads - len(self._maps)
            if missing > 0:
                self._maps.extend([None] * missing)
                self._last.extend([None] * missing)
            with self._throttle_lock:
                rate_changed = config.io_max_bytes_per_second != self._throttle.rate
                if rate_changed:
                    self._throttle.set_rate(config.io_max_bytes_per_second, self._timer())
            self._lock.notify_all()  # a thread waiting on the throttle
            if rate_changed:
                self._interrupt_processes()  # a child's reports start or stop
        if self._started:
            self._start_threads()
        self._wake.set()  # sleeping threads: the new backoff, or their end

    def _run(
        self, index: int, on_storage_error: Callable[[KafkaStorageError], object] | None
    ) -> None:
        lowered = False
        while not self._stop.is_set():
            if not lowered and not self._use_processes:  # (module Rules)
                _lower_priority()
                lowered = True
            with self._lock:
                if index >= self.config.threads:  # fewer threads since (`reconfigure`)
                    self._running.discard(index)
                    self._maps[index] = None  # its key map's memory goes with it
                    self._last[index] = None
                    process = self._processes.pop(index, None)
                    ending = True
                else:
                    ending = False
            if ending:
                if process is not None:
                    process.close()
                return
            try:
                cleaned = self.clean_once(index)
            except KafkaStorageError as error:
                if on_storage_error is None:
                    log.critical("log cleaner thread %d stops: %s", index, error)
                else:
                    on_storage_error(error)
                return
            except Exception:  # a bug of one round must not stop the cleaner for good
                log.exception("log cleaner thread %d: a round failed", index)
                cleaned = None
            if cleaned is None and not self._stop.is_set():
                self._wake.wait(self.config.backoff_ms / 1000)
                self._wake.clear()

    def shutdown(self, *, write: bool = True) -> None:
        """Stop the threads (a running pass stops at its next batch) and write the entries
        (not after a storage error: `write=False`)."""
        self._stop.set()
        self._wake.set()
        with self._lock:
            self._lock.notify_all()  # a pass waiting on the throttle
            self._interrupt_processes()
        for thread in self._threads:
            if thread is not threading.current_thread():  # a storage error's own thread
                thread.join()
        self._threads = []
        with self._lock:
            processes = list(self._processes.values())
            self._processes.clear()
        for process in processes:
            process.close()
        if write:
            self._write_checkpoints()


def _lower_priority() -> None:
    """Run the calling thread at `CLEANER_NICE` (Linux sets a priority per thread)."""
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), CLEANER_NICE)
    except (AttributeError, OSError) as exc:  # not Linux, or not allowed: the default then
        log.debug("the log cleaner thread keeps its priority: %s", exc)
