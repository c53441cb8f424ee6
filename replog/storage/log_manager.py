"""Many partitions' logs across one or more log dirs, with Kafka's background tasks.

Rules (docs/design/storage.md#clean-shutdown, #checkpoint-files, #retention):
- Each log dir holds `<topic>-<partition>` directories plus three checkpoint files
  (`recovery-point-offset-checkpoint`, `replication-offset-checkpoint` for high watermarks,
  `log-start-offset-checkpoint`) and, after a clean shutdown, the `.kafka_cleanshutdown` marker.
- A directory named `__cluster_metadata*` is the Raft metadata log's (it may share the first
  log dir): never loaded, never touched.
- At startup the marker is read and deleted before any log is loaded, so a crash during loading
  counts as unclean next time. The checkpoints give each log its recovery point, log start
  offset and high watermark. A checkpoint file that cannot be parsed is reported (the error
  names file, line and reason) and treated as empty, which is safe: logs then recover from
  offset 0, high watermarks restart at the log start, log starts at the first segment.
- Tasks and their periods (Kafka's names): `log.flush.offset.checkpoint.interval.ms` 60000
  (recovery points), `replica.high.watermark.checkpoint.interval.ms` 5000 (high watermarks),
  `log.flush.start.offset.checkpoint.interval.ms` 60000 (log start offsets, only for logs whose
  start lies inside their first segment), `log.flush.scheduler.interval.ms` (time-based flush),
  `log.retention.check.interval.ms` 300000 (retention), all first run after
  `log.initial.task.delay.ms` 30000, except the high-watermark checkpoint, which starts at once
  as Kafka's ReplicaManager does. A truncation rewrites the recovery points at once. Every
  period is at least 1 ms and the initial delay at least 0 (`LogManagerConfig`);
  `log.flush.interval.ms` left unset is `log.flush.scheduler.interval.ms`, as in Kafka.
- Rolled segments are fsynced asynchronously (Kafka's flush of rolled segments): the manager
  turns on `Log.enable_async_roll_flush` for every log it loads or creates, a roll wakes the
  background thread, which runs `flush_rolled_segments` at once (so does `run_due_tasks`), and
  a log's recovery point moves only after that fsync returned. Standalone logs sync on roll.
- Deleting a partition (Kafka's asynchronous delete): its directory is renamed at once to
  `<topic>-<partition>.<id>-delete` (durable: the parent directory is fsynced); the background
  tasks then rewrite its log dir's checkpoints without its entries and remove the files. The
  rewrite is six fsyncs, which on the broker's event loop stalled every request for 60-200 ms
  per deletion (measured: docs/benchmarks.md, "Produce path"); until it runs, a stale entry is
  harmless, since loading applies entries only to logs it finds, but a partition of that name
  created meanwhile would inherit it after a crash, so creating a log rewrites any stale
  checkpoints first. Removing a large log takes the kernel tens to hundreds of ms,
  which on the broker's event loop stalled every request. Kafka waits `file.delete.delay.ms`
  (60 s) first, because a fetch may still be sending from the old files; here reads copy under
  the log's lock, so nothing can, and waiting would only let the kernel write the deleted
  data's dirty pages back to disk (measured: it cost a following workload a third of its
  throughput). A `-delete` directory found at startup (a deletion the last run did not finish)
  is removed while loading; so is one whose files nobody removed (a manager whose tasks never
  ran: no `start()`, no `run_due_tasks`), since the rename alone is the deletion.
- Setting a stray log aside (Kafka's `-stray` rename; the broker decides what is stray,
  `ReplicaManager`): the directory is renamed to `<topic>-<partition>.<id>-stray` and its
  checkpoint entries go as a deletion's, but its files stay. Loading never opens such a
  directory and warns about each one at every start, until an operator removes it.
- The log cleaner (`cleaner`, `replog/storage/cleaner/log_cleaner.py`) cleans the compacted
  logs on threads `start` starts (their passes in child processes when the process asks and
  the file system is the plain one, `cleaning_process`); a truncation, a deletion or a stray
  log set aside pauses its log's cleaning first (a pass under way stops), retention skips a
  compacted log a pass is cleaning, the background tasks write what changed of each dir's
  `cleaner-offset-checkpoint`, and shutdown stops the cleaner before the logs close.
- Clean shutdown: flush and close every log, write the three checkpoints, then the marker
  (`Log.close` flushes from the recovery point, so it covers a pending roll flush too).
- A background task that fails on the disk (a KafkaStorageError or an OSError: a full disk
  under a rolled segment's index or a checkpoint) ends the background thread and is handed to
  `start`'s `on_storage_error` (the broker fail-stops, as Kafka's does once its only log dir
  is offline), or logged as CRITICAL without one. Retrying a failed disk at every pass would
  only log a traceback every few seconds while the broker served on.
  Any other exception is a bug in one task: logged, and the tasks go on.

Theory of operation: `run_due_tasks(now_ms)` runs whatever is due and returns when to call it
next; `start()` runs it on a background thread (the broker's, and an embedding application's
unless it calls `run_due_tasks` itself), which sleeps until then unless a roll or a deletion
wakes it at once. It never polls: each wake of a thread in a node takes the interpreter's lock
from the event loop and, on a loaded machine, keeps the loop waiting for a core until that
thread has run (docs/benchmarks.md, "Partition creation and restart").
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import NamedTuple
from uuid import UUID

from replog.checkpoints import (
    CLEAN_SHUTDOWN_MARKER,
    LOG_START_OFFSET_CHECKPOINT,
    NO_BROKER_EPOCH,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    parse_clean_shutdown_marker,
    render_clean_shutdown_marker,
)
from replog.clock import Clock, monotonic_ms, wall_clock_ms
from replog.common import TopicPartitionKey
from replog.config import integer_settings
from replog.errors import (
    ConfigError,
    CorruptCheckpointError,
    InvalidTopicError,
    KafkaStorageError,
    ReplogError,
    UnknownTopicOrPartitionError,
)
from replog.storage.checkpoint_file import OffsetCheckpointFile, atomic_replace
from replog.storage.cleaner.cleaner_config import CleanerConfig
from replog.storage.cleaner.cleaning_process import cleaning_in_processes
from replog.storage.cleaner.log_cleaner import LogCleaner
from replog.storage.fs import LOCAL_FS, FileSystem, OsFileSystem, Unsynced, make_dirs_durably
from replog.storage.log import Log
from replog.storage.log_config import LONG_MAX, LogConfig
from replog.storage.log_dir_names import (
    DELETE_DIR_SUFFIX,
    STRAY_DIR_SUFFIX,
    parse_topic_partition,
)
from replog.storage.log_loader import NewLogFiles, make_new_log_files, new_log_file_contents
from replog.storage.offset_moves import OffsetMoves
from replog.topic_names import CLUSTER_METADATA_TOPIC, check_topic_name

log = logging.getLogger("replog.storage")

# How many logs loading opens between two reports to `on_logs_loaded`: a node freezes the
# garbage collector's view after each (CPython's full collections walk every object loaded so
# far, a fifth of the CPU of opening 10,000 logs without it).
LOADED_REPORT_EVERY = 100

# Kafka's broker property -> LogManagerConfig field, for the log manager's own timers.
PROPERTY_NAMES = {
    "log.flush.offset.checkpoint.interval.ms": "flush_offset_checkpoint_interval_ms",
    "replica.high.watermark.checkpoint.interval.ms": "high_watermark_checkpoint_interval_ms",
    "log.flush.start.offset.checkpoint.interval.ms": "flush_start_offset_checkpoint_interval_ms",
    "log.flush.scheduler.interval.ms": "flush_scheduler_interval_ms",
    "log.retention.check.interval.ms": "retention_check_interval_ms",
    "log.initial.task.delay.ms": "initial_task_delay_ms",
}


def clean_shutdown_broker_epoch(log_dirs: Sequence[str], fs: FileSystem = LOCAL_FS) -> int:
    """The broker epoch that every log dir's clean-shutdown marker records (KIP-966's previous
    broker epoch, which a broker's registration sends), read before any log loads; -1 unless
    all of them hold the same one. Reads only: loading a log dir removes its marker."""
    epochs: set[int] = set()
    for log_dir in log_dirs:
        path = os.path.join(log_dir, CLEAN_SHUTDOWN_MARKER)
        try:
            data = fs.read_bytes(path)
            if data is None:
                return NO_BROKER_EPOCH
            epochs.add(parse_clean_shutdown_marker(data, source=path))
        except (OSError, CorruptCheckpointError):
            return NO_BROKER_EPOCH  # said when the logs load (`LogManager._load_dir`)
    return epochs.pop() if len(epochs) == 1 else NO_BROKER_EPOCH


@dataclass(frozen=True, slots=True)
class LogManagerConfig:
    """Broker-level settings of the log manager (Kafka's names in the field docs)."""

    flush_offset_checkpoint_interval_ms: int = 60000  # log.flush.offset.checkpoint.interval.ms
    high_watermark_checkpoint_interval_ms: int = (
        5000  # replica.high.watermark.checkpoint.interval.ms
    )
    flush_start_offset_checkpoint_interval_ms: int = (
        60000  # log.flush.start.offset.checkpoint.interval.ms
    )
    flush_scheduler_interval_ms: int = LONG_MAX  # log.flush.scheduler.interval.ms
    retention_check_interval_ms: int = 300000  # log.retention.check.interval.ms
    initial_task_delay_ms: int = 30000  # log.initial.task.delay.ms
    log: LogConfig = field(default_factory=LogConfig)
    cleaner: CleanerConfig = field(default_factory=CleanerConfig)  # log.cleaner.*

    def __post_init__(self) -> None:
        # Kafka's bounds: log.initial.task.delay.ms >= 0, log.retention.check.interval.ms >= 1.
        # Every other period is at least 1 too, where Kafka allows 0 (the checkpoints) or
        # anything (the flush task, the HW checkpoint): Kafka's scheduler runs a task whose
        # period is 0 or less once, and here such a task would run on every pass.
        for key, attribute in PROPERTY_NAMES.items():
            minimum = 0 if attribute == "initial_task_delay_ms" else 1
            value = getattr(self, attribute)
            if value < minimum:
                raise ConfigError(f"{key}={value}: must be at least {minimum}")
        # Kafka's broker refuses to start with these defaults in conflict (its
        # `LogConfig.validateBrokerLogConfigValues`), as its controller refuses a topic's.
        low, high = self.log.min_compaction_lag_ms, self.log.max_compaction_lag_ms
        if low > high:
            raise ConfigError(
                f"conflict topic config setting log.cleaner.min.compaction.lag.ms ({low}) > "
                f"log.cleaner.max.compaction.lag.ms ({high})"
            )

    @classmethod
    def from_properties(cls, properties: Mapping[str, object]) -> LogManagerConfig:
        """The broker's log manager settings and the default `LogConfig` of its logs.

        `log.flush.interval.ms` left unset is `log.flush.scheduler.interval.ms`, as in Kafka:
        a broker that sets only the flush task's period flushes each log that often.
        """
        config = cls(
            log=LogConfig.from_properties(properties),
            cleaner=CleanerConfig.from_properties(properties),
            **integer_settings(properties, PROPERTY_NAMES),
        )
        flush_ms_set = any(key in properties for key in ("log.flush.interval.ms", "flush.ms"))
        if "log.flush.scheduler.interval.ms" in properties and not flush_ms_set:
            flush_ms = config.flush_scheduler_interval_ms
            config = replace(config, log=replace(config.log, flush_interval_ms=flush_ms))
        return config


# Logs one step of a retention pass visits, and the rest between two steps: a pass over 33,000
# logs held the GIL some 35 ms at a stretch in the task thread, which the event loop then waited
# for at every turn that let it go (some 200 waits per node in a perf trace of a creation); a
# step of 1,000 is about 1 ms, and the rest leaves the GIL to the loop.
RETENTION_SLICE = 1_000
SLICE_REST_S = 0.005
# A pass soon: the first after `start` (for what the load left: stale checkpoints, the first
# high-watermark checkpoint), and the next after rolled segments a race left unsynced.
SOON_MS = 100


def _sleep_s(until_due_ms: int, cap_ms: int | None) -> float | None:
    """How long the task thread sleeps when the next task is due in `until_due_ms` (None:
    until woken, no task being due ever)."""
    if cap_ms is not None:
        until_due_ms = min(until_due_ms, cap_ms)
    if until_due_ms >= LONG_MAX // 2:
        return None
    return max(0, until_due_ms) / 1000


class _Task:
    """A periodic task: its period and when it is next due."""

    __slots__ = ("due_ms", "period_ms")

    def __init__(self, period_ms: int, first_due_ms: int) -> None:
        self.period_ms = period_ms
        self.due_ms = first_due_ms

    def take(self, now_ms: int) -> bool:
        if self.period_ms >= LONG_MAX or now_ms < self.due_ms:
            return False
        self.due_ms = now_ms + self.period_ms
        return True


class NewLog(NamedTuple):
    """A new log's files, made by `LogManager.make_new_log` and not yet its log."""

    topic: str
    partition: int
    log_dir: str
    files: NewLogFiles


class NewLogPlace(NamedTuple):
    """Where a new log is to be made, reserved for it by `LogManager.reserve_new_logs`."""

    topic: str
    partition: int
    log_dir: str
    directory: str


class LogLoadingAborted(Exception):
    """The loading of the logs ended early: its `abort` was set (`LogManager`)."""


class LogManager:
    """Owns every partition log under `log_dirs` and their checkpoint files."""

    def __init__(
        self,
        log_dirs: list[str] | str,
        config: LogManagerConfig | LogConfig | None = None,
        *,
        fs: FileSystem = LOCAL_FS,
        clock: Clock = wall_clock_ms,
        task_clock: Clock = monotonic_ms,
        topic_configs: Mapping[str, LogConfig] | None = None,
        on_logs_loaded: Callable[[int], None] | None = None,
        abort: threading.Event | None = None,
        rng: random.Random | None = None,
    ) -> None:
        """`rng`: the random choices of its logs (`Log`'s); None: a fresh source.
        `on_logs_loaded(count)`, if given, hears from the loading thread after every
        `LOADED_REPORT_EVERY` logs opened, and once for the rest (a node freezes the garbage
        collector's view of what it loaded: `replog.server.runtime.collector`). `abort`, once set,
        ends the loading before its next log with `LogLoadingAborted` (a node stopping while
        it loads 100,000 logs stops at once, not after them). After an abort or a failed
        load the logs it opened are closed and no clean-shutdown marker is written (the next
        load recovers)."""
        if isinstance(config, LogConfig):
            config = LogManagerConfig(log=config)
        self.config = config or LogManagerConfig()
        self.log_dirs = [log_dirs] if isinstance(log_dirs, str) else list(log_dirs)
        if not self.log_dirs:
            raise ConfigError("log.dirs: at least one log directory is required")
        self._fs = fs
        self._clock = clock
        self._task_clock = task_clock
        self._rng = rng
        self._topic_configs: dict[str, LogConfig] = dict(topic_configs or {})
        self._lock = threading.RLock()
        # Guards the recovery-point checkpoint's writes, and nothing is locked under it: a
        # truncation writes that file from inside its log's lock (`_on_truncate`), and the
        # manager's lock, which is held while taking log locks (retention, flushes, closes),
        # may not be taken there (a lock-order deadlock).
        self._recovery_points_lock = threading.Lock()
        self._logs: dict[TopicPartitionKey, Log] = {}
        self._dir_of: dict[TopicPartitionKey, str] = {}
        # Logs `make_new_log` made and `add_new_log` has not taken yet: their log dirs, which
        # count as theirs in `_emptiest_log_dir`.
        self._making: dict[TopicPartitionKey, str] = {}
        self._previous_broker_epochs: dict[str, int] = {}
        self._closed = False
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        # Wakes the background thread: a log rolled and left its old segments to sync, or a
        # partition was deleted and its files are to go.
        self._work_wanted = threading.Event()
        # Logs a roll left old segments to sync (`_on_roll_flush_pending`), taken by the next
        # `flush_rolled_segments`: a pass visits these, not all the logs (a broker's 100,000
        # idle ones cost every 100 ms poll a scan of them all). Its own lock: the hook runs
        # under the rolled log's lock, where the manager's may not be taken.
        self._rolled: set[Log] = set()
        self._rolled_lock = threading.Lock()
        # What each checkpoint file (log dir, name) was last written with: an unchanged file is
        # not written again (`_write_offsets`).
        self._written: dict[tuple[str, str], dict[TopicPartitionKey, int]] = {}
        # Orders the writers of the high-watermark checkpoint files. The periodic write reads
        # the offsets under the manager's lock and renders and writes them under this one
        # only (`checkpoint_high_watermarks`); taken after the manager's lock, never before.
        self._high_watermarks_lock = threading.Lock()
        # What moved since the periodic checkpoints last read the offsets (offset_moves.py).
        self._offset_moves = OffsetMoves()
        # Deleted partitions' renamed directories, for the background thread to remove.
        self._doomed: list[str] = []
        # Log dirs whose checkpoint files still name a log no longer here (`delete_log`,
        # `set_aside_stray_log`, or one of those just before a crash: `_load_dir`).
        self._stale_checkpoints: set[str] = set()
        self._on_logs_loaded = on_logs_loaded
        self._loaded_unreported = 0
        self._abort = abort
        now = task_clock()
        first = now + self.config.initial_task_delay_ms
        self._tasks = {
            "flush": _Task(self.config.flush_scheduler_interval_ms, first),
            "recovery_points": _Task(self.config.flush_offset_checkpoint_interval_ms, first),
            # Kafka's ReplicaManager schedules the HW checkpoint with no initial delay, so a
            # restarted broker's HWs are at most one period stale, even in its first 30 s.
            "high_watermarks": _Task(self.config.high_watermark_checkpoint_interval_ms, now),
            "log_start_offsets": _Task(
                self.config.flush_start_offset_checkpoint_interval_ms, first
            ),
            "retention": _Task(self.config.retention_check_interval_ms, first),
        }
        try:
            for log_dir in self.log_dirs:
                self._load_dir(log_dir)
            # Reads each dir's cleaner-offset-checkpoint, which loading may not have made.
            self.cleaner = LogCleaner(
                self.config.cleaner,
                self.log_dirs,
                self._cleaner_logs,
                fs=fs,
                clock=clock,
                timer=task_clock,
                # A child reads and writes files itself: never past a fault-injecting one.
                use_processes=cleaning_in_processes() and self.plain_file_system,
            )
        except BaseException:
            # An aborted or failed load: the error is what the caller hears of, and the
            # descriptors of the logs opened so far do not outlive it.
            self._close_logs()
            raise
        self._report_loaded(0)

    # --- loading ------------------------------------------------------------------------------

    def _checkpoint(self, log_dir: str, name: str) -> OffsetCheckpointFile:
        return OffsetCheckpointFile(os.path.join(log_dir, name), self._fs)

    def _read_checkpoint(self, log_dir: str, name: str) -> dict[TopicPartitionKey, int]:
        try:
            return self._checkpoint(log_dir, name).read()
        except CorruptCheckpointError as exc:
            log.warning("%s; using no entries from it (logs recover from their start)", exc)
            return {}

    def _load_dir(self, log_dir: str) -> None:
        try:
            make_dirs_durably(self._fs, log_dir)
            marker_path = os.path.join(log_dir, CLEAN_SHUTDOWN_MARKER)
            marker = self._fs.read_bytes(marker_path)
            had_clean_shutdown = marker is not None
            if marker is not None:
                try:
                    self._previous_broker_epochs[log_dir] = parse_clean_shutdown_marker(
                        marker, source=marker_path
                    )
                except CorruptCheckpointError as exc:
                    log.warning("%s; treating the shutdown as unclean", exc)
                    had_clean_shutdown = False
                # Delete before loading: a crash while loading must count as unclean.
                self._fs.remove(marker_path)
                self._fs.fsync_dir(log_dir)
            recovery_points = self._read_checkpoint(log_dir, RECOVERY_POINT_CHECKPOINT)
            start_offsets = self._read_checkpoint(log_dir, LOG_START_OFFSET_CHECKPOINT)
            high_watermarks = self._read_checkpoint(log_dir, REPLICATION_OFFSET_CHECKPOINT)
            checkpoints = (recovery_points, start_offsets, high_watermarks)
            # What loading writes (a leader-epoch file cut back to its log's end, ...) derives
            # from files already on disk and is written again by the next load if lost, so one
            # sync of the dir's file system at the end covers it: an fsync per file cost a
            # restart of 10,000 logs most of a minute. The marker's removal is durable above.
            with self._fs.deferred_sync():
                self._load_logs(log_dir, checkpoints, had_clean_shutdown)
            loaded = {tp for tp, where in self._dir_of.items() if where == log_dir}
            if any(set(entries) - loaded for entries in checkpoints):
                # Entries of a log deleted or set aside just before a crash, whose rewrite never
                # ran: a partition of that name created later must not inherit them.
                self._stale_checkpoints.add(log_dir)
        except OSError as exc:
            raise KafkaStorageError(f"log dir {log_dir}: cannot load: {exc}") from exc

    def _load_logs(
        self,
        log_dir: str,
        checkpoints: tuple[dict[TopicPartitionKey, int], ...],
        had_clean_shutdown: bool,
    ) -> None:
        """Open every log of `log_dir`, finishing deletions and skipping what is no log."""
        recovery_points, start_offsets, high_watermarks = checkpoints
        for name in self._fs.list_subdirs(log_dir):
            if self._abort is not None and self._abort.is_set():
                raise LogLoadingAborted(
                    f"log dir {log_dir}: loading aborted after {len(self._logs)} logs"
                )
            path = os.path.join(log_dir, name)
            if name.endswith(DELETE_DIR_SUFFIX):
                log.info("%s: finishing the deletion of %s", log_dir, name)
                self._fs.remove_tree(path)
                continue
            if name.endswith(STRAY_DIR_SUFFIX):
                log.warning(
                    "%s: stray log %s kept aside, not served; remove it once nothing in it "
                    "is wanted",
                    log_dir,
                    name,
                )
                continue
            tp = parse_topic_partition(path)
            if tp is None:
                log.warning(
                    "%s: ignoring directory %s, not a <topic>-<partition> name", log_dir, name
                )
                continue
            if tp[0] == CLUSTER_METADATA_TOPIC:
                # The Raft metadata log (`__cluster_metadata-0`) may share this log dir;
                # it is not a partition this manager owns (a topic named like
                # `__cluster_metadata_x` is).
                continue
            if tp in self._logs:
                raise KafkaStorageError(
                    f"{tp[0]}-{tp[1]} is in both {self._dir_of[tp]} and {log_dir}"
                )
            self._logs[tp] = Log.open(
                path,
                self._config_for(tp[0]),
                fs=self._fs,
                clock=self._clock,
                recovery_point=recovery_points.get(tp, 0),
                log_start_offset=start_offsets.get(tp, 0),
                high_watermark=high_watermarks.get(tp, 0),
                had_clean_shutdown=had_clean_shutdown,
                on_truncate=self._on_truncate,
                rng=self._rng,
            )
            self._logs[tp].enable_async_roll_flush(self._on_roll_flush_pending)
            self._logs[tp].report_offset_moves_to(self._offset_moves)
            self._dir_of[tp] = log_dir
            self._report_loaded(LOADED_REPORT_EVERY)

    def _report_loaded(self, at_least: int) -> None:
        """Count one log more (`at_least` > 0), or end the load (0): tell `on_logs_loaded`
        once at least `at_least` logs are unreported."""
        if at_least:
            self._loaded_unreported += 1
        if self._on_logs_loaded is not None and self._loaded_unreported >= max(at_least, 1):
            self._on_logs_loaded(self._loaded_unreported)
            self._loaded_unreported = 0

    def _config_for(self, topic: str) -> LogConfig:
        return self._topic_configs.get(topic, self.config.log)

    # --- access -------------------------------------------------------------------------------

    def previous_broker_epoch(self, log_dir: str | None = None) -> int:
        """The broker epoch the last clean shutdown recorded (-1 if it was not clean)."""
        return self._previous_broker_epochs.get(log_dir or self.log_dirs[0], NO_BROKER_EPOCH)

    def all_logs(self) -> dict[TopicPartitionKey, Log]:
        with self._lock:
            return dict(self._logs)

    def get_log(self, topic: str, partition: int) -> Log:
        with self._lock:
            found = self._logs.get((topic, partition))
            if found is None:
                raise UnknownTopicOrPartitionError(f"{topic}-{partition}: no log on this node")
            return found

    def get_or_create_log(self, topic: str, partition: int, config: LogConfig | None = None) -> Log:
        """The log of topic-partition, created in the log dir holding the fewest logs."""
        with self._lock:
            existing = self._open_log(topic, partition, config)
            if existing is not None:
                return existing
            if (topic, partition) in self._making:
                raise KafkaStorageError(f"{topic}-{partition}: its log is being made")
            log_dir, path = self._new_log_path(topic, partition)
            try:
                created = Log.create(
                    path,
                    self._config_for(topic),
                    fs=self._fs,
                    clock=self._clock,
                    on_truncate=self._on_truncate,
                    rng=self._rng,
                )
            except FileExistsError:  # a directory loading did not take: opened, as it is
                created = Log.open(
                    path,
                    self._config_for(topic),
                    fs=self._fs,
                    clock=self._clock,
                    recovery_point=0,
                    log_start_offset=0,
                    high_watermark=0,
                    had_clean_shutdown=True,
                    on_truncate=self._on_truncate,
                    rng=self._rng,
                )
            except OSError as exc:
                raise KafkaStorageError(f"{path}: cannot create log: {exc}") from exc
            self._fs.fsync_dir(log_dir)
            return self._add(topic, partition, log_dir, created)

    def make_new_log(
        self,
        topic: str,
        partition: int,
        config: LogConfig,
        *,
        topic_id: UUID | None = None,
        leader_epoch: int | None = None,
    ) -> NewLog | None:
        """Make the files of a new log of topic-partition (`log_loader.make_new_log_files`,
        with its `partition.metadata` and first epoch if given) in the log dir holding the
        fewest logs, as `get_or_create_log` would, and return them as plain data for
        `add_new_log`, which builds the log: system calls only, for a worker thread that
        should hold the GIL as little as possible. None, doing nothing, when the log is open
        already (`get_or_create_log` then); FileExistsError when its directory exists, not
        loaded (`get_or_create_log` opens it). Until `add_new_log`, the log is not this
        manager's (a start after a stop in between loads it from its files). The manager's
        lock is held only to pick the log dir, not while the files are made: `add_new_log`
        on the event loop takes it too."""
        with self._lock:
            place = self._reserve_new_log(topic, partition, config)
        if place is None:
            return None
        try:
            files = make_new_log_files(
                place.directory,
                self._fs,
                self._clock(),
                topic_id=topic_id,
                leader_epoch=leader_epoch,
            )
            self._fs.fsync_dir(place.log_dir)
        except BaseException:
            self.cancel_new_logs([place])
            raise
        return NewLog(topic, partition, place.log_dir, files)

    def _reserve_new_log(self, topic: str, partition: int, config: LogConfig) -> NewLogPlace | None:
        """Under the lock: the place of a new log of topic-partition in the log dir holding
        the fewest logs, marked as being made; None when the log is open already.
        KafkaStorageError when it is being made already; `_open_log`'s errors as it raises
        them (a refused name)."""
        if self._open_log(topic, partition, config) is not None:
            return None
        if (topic, partition) in self._making:
            raise KafkaStorageError(f"{topic}-{partition}: its log is being made already")
        log_dir, directory = self._new_log_path(topic, partition)
        self._making[(topic, partition)] = log_dir
        return NewLogPlace(topic, partition, log_dir, directory)

    def reserve_new_logs(
        self, wanted: Sequence[tuple[str, int, LogConfig]]
    ) -> list[NewLogPlace | None] | None:
        """The first half of `make_new_log` for many logs at once, for their files to be made
        elsewhere (`new_log_made` then): per (topic, partition, config) a log dir and
        directory, reserved as `make_new_log` reserves them, or None where `make_new_log`
        would not make one (the log is open, being made, or its name refused: the caller
        takes that log the old way). None for all, reserving nothing, while another thread
        holds the manager's lock (an event loop must not wait: `add_new_log`) or a log dir
        still has stale checkpoints (`rewrite_stale_checkpoints` first, off the loop)."""
        if not self._lock.acquire(blocking=False):
            return None
        try:
            if self._stale_checkpoints:
                return None
            places: list[NewLogPlace | None] = []
            for topic, partition, config in wanted:
                try:
                    places.append(self._reserve_new_log(topic, partition, config))
                except ReplogError:  # being made, or a refused name: the old way raises it
                    places.append(None)
            return places
        finally:
            self._lock.release()

    @property
    def has_stale_checkpoints(self) -> bool:
        """Whether a log dir's checkpoints still name a log no longer here."""
        return bool(self._stale_checkpoints)

    @property
    def plain_file_system(self) -> bool:
        """Whether its file system is the plain `OsFileSystem`, whose files another process
        may make; a subclass (tests' fault injection) or one in memory must see every file
        operation."""
        return type(self._fs) is OsFileSystem

    def new_log_files(
        self, place: NewLogPlace, *, topic_id: UUID | None, leader_epoch: int | None
    ) -> list[tuple[str, bytes]]:
        """The files (path, bytes) `make_new_log` would make at `place`, after its directory."""
        return new_log_file_contents(place.directory, topic_id=topic_id, leader_epoch=leader_epoch)

    def new_log_made(
        self, place: NewLogPlace, *, topic_id: UUID | None, leader_epoch: int | None
    ) -> NewLog:
        """The `NewLog` for `add_new_log` once `new_log_files` were made at `place` and synced,
        as `make_new_log` returns it."""
        files = NewLogFiles(place.directory, self._clock(), topic_id, leader_epoch)
        return NewLog(place.topic, place.partition, place.log_dir, files)

    def cancel_new_logs(self, places: Sequence[NewLogPlace], *, wait: bool = True) -> bool:
        """Give up reservations of `reserve_new_logs`; with `wait` False, False at once (nothing
        done) while another thread holds the manager's lock."""
        if not self._lock.acquire(blocking=wait):
            return False
        try:
            for place in places:
                self._making.pop((place.topic, place.partition), None)
            return True
        finally:
            self._lock.release()

    def add_new_log(self, new: NewLog, *, wait: bool = True) -> Log | None:
        """The log whose files `make_new_log` made, built without a system call and managed
        from now on. With `wait` False, None at once (nothing done) while another thread
        holds the manager's lock: its task thread holds it through a pass over every log
        (flushes, retention, checkpoints: up to a second at 100,000 logs), which an event
        loop must not wait for."""
        if not self._lock.acquire(blocking=wait):
            return None
        try:
            created = Log.from_new_files(
                new.files,
                self._config_for(new.topic),
                fs=self._fs,
                clock=self._clock,
                on_truncate=self._on_truncate,
                rng=self._rng,
            )
            self._making.pop((new.topic, new.partition), None)
            if self._logs.get((new.topic, new.partition)) is not None:
                raise KafkaStorageError(f"{created.name}: another log is open")
            return self._add(new.topic, new.partition, new.log_dir, created)
        finally:
            self._lock.release()

    def _open_log(self, topic: str, partition: int, config: LogConfig | None) -> Log | None:
        """Check the name and take `config` as the topic's (under the lock); the open log of
        topic-partition, with `config` applied, or None."""
        check_topic_name(topic)
        if topic == CLUSTER_METADATA_TOPIC:
            # Its partition directory is the Raft metadata log's (the controller refuses the
            # name; this keeps any other path from writing into that log).
            raise InvalidTopicError(f"{topic}-{partition}: the metadata log's name, not a topic's")
        if partition < 0:
            raise UnknownTopicOrPartitionError(f"{topic}-{partition}: partition must be >= 0")
        self._check_open()
        if config is not None:
            self._topic_configs[topic] = config
        existing = self._logs.get((topic, partition))
        # A log recovered at start-up is opened with the broker defaults (its topic's config
        # is not known yet); it takes that config as soon as the broker knows it.
        if existing is not None and config is not None and existing.update_config(config):
            log.info("%s-%d: topic config applied", topic, partition)
        return existing

    def _new_log_path(self, topic: str, partition: int) -> tuple[str, str]:
        """(log dir, directory) of a new log of topic-partition (under the lock)."""
        log_dir = self._emptiest_log_dir()
        # A deleted namesake's entries in this dir must not outlive its deletion into this
        # log's life (loading applies a dir's entries only to the logs in that dir).
        self._rewrite_stale_checkpoints(log_dir)
        return log_dir, os.path.join(log_dir, f"{topic}-{partition}")

    def _add(self, topic: str, partition: int, log_dir: str, created: Log) -> Log:
        created.enable_async_roll_flush(self._on_roll_flush_pending)
        created.report_offset_moves_to(self._offset_moves)
        self._logs[(topic, partition)] = created
        self._dir_of[(topic, partition)] = log_dir
        return created

    def _emptiest_log_dir(self) -> str:
        """The log dir holding the fewest logs (one pass over the logs only when there are
        several dirs: a broker creating 10,000 replicas in one dir did 10,000 passes)."""
        if len(self.log_dirs) == 1:
            return self.log_dirs[0]
        counts = dict.fromkeys(self.log_dirs, 0)
        for d in self._dir_of.values():
            counts[d] += 1
        for d in self._making.values():
            counts[d] += 1
        return min(self.log_dirs, key=lambda d: counts[d])

    def delete_log(self, topic: str, partition: int) -> None:
        """Remove a partition's log. The directory is renamed at once and the rename made
        durable by the background tasks (one fsync of the log dir for every deletion since
        the last pass) before any file goes; its checkpoint entries and files go at the next
        `run_due_tasks`, at once on `start()`'s thread, or, if no task runs before, at
        shutdown (the entries) and the next load (the files); a log created meanwhile
        rewrites the checkpoints first (module docstring). KafkaStorageError if the rename
        fails."""
        with self._lock:  # `remove_deleted_logs` swaps the list under it
            self._doomed.append(
                self._rename_aside(topic, partition, DELETE_DIR_SUFFIX, durable=False)
            )
        self._work_wanted.set()

    def collect_unsynced(self) -> contextlib.AbstractContextManager[Unsynced]:
        """`FileSystem.collect_unsynced`: writes (new leaders' epoch checkpoints) that the
        caller syncs later, off its thread, with `sync_unsynced`."""
        return self._fs.collect_unsynced()

    def sync_unsynced(self, unsynced: Unsynced, *, each_up_to: int = 0) -> None:
        try:
            self._fs.sync_unsynced(unsynced, each_up_to=each_up_to)
        except OSError as exc:
            raise KafkaStorageError(f"syncing {sorted(unsynced.paths)}: {exc}") from exc

    def deferred_sync(self) -> contextlib.AbstractContextManager[None]:
        """A block in which creating logs (and writing their small files) syncs nothing until
        its end, which syncs their file systems once (`FileSystem.deferred_sync`)."""
        return self._fs.deferred_sync()

    def rewrite_stale_checkpoints(self) -> None:
        """Rewrite, durably and now, the checkpoints of log dirs that still name logs no
        longer here; a caller about to create logs in a `deferred_sync` block calls this
        first, so that no crash can give a new log a deleted namesake's entries."""
        with self._lock:
            self._rewrite_stale_checkpoints()

    def set_aside_stray_log(self, topic: str, partition: int) -> str:
        """Stop managing a stray log without deleting it (Kafka's `-stray` rename): its
        directory is renamed to `<topic>-<partition>.<id>-stray`, which no later load opens,
        and its checkpoint entries go as a deletion's do; its files stay for an operator to
        inspect or remove. Returns the new path. KafkaStorageError if the rename fails."""
        path = self._rename_aside(topic, partition, STRAY_DIR_SUFFIX)
        self._work_wanted.set()
        return path

    def _rename_aside(
        self, topic: str, partition: int, suffix: str, *, durable: bool = True
    ) -> str:
        # Its pass stops first, outside the manager's lock (a pass never takes that lock, but
        # it takes the log's to swap), and its cleaner entry goes.
        log_dir = self._dir_of.get((topic, partition))
        if log_dir is not None:
            self.cleaner.remove(log_dir, (topic, partition))
        with self._lock:
            gone = self._logs.get((topic, partition))
            if gone is None:
                raise UnknownTopicOrPartitionError(f"{topic}-{partition}: no log on this node")
            # Renamed first: if that fails the directory is still the partition's, and so
            # are its checkpoint entries (the node stops on the KafkaStorageError).
            path = gone.close_and_rename(suffix, sync_parent=durable)
            del self._logs[(topic, partition)]
            self._stale_checkpoints.add(self._dir_of.pop((topic, partition)))
            return path

    def remove_deleted_logs(self) -> int:
        """Remove the files of deleted partitions; returns how many directories went. Runs
        without the manager's lock: nothing else uses those files any more."""
        with self._lock:
            due, self._doomed = self._doomed, []
        # The renames first, durably: a crash must never find a partition's directory under
        # its own name with some of its files removed. An fsync that fails is the disk's.
        for parent in sorted({os.path.dirname(path) for path in due}):
            self._fs.fsync_dir(parent)
        for path in due:
            try:
                self._fs.remove_tree(path)
            except OSError as exc:  # left for the next start, which removes `-delete` dirs
                log.warning("cannot remove the deleted partition directory %s: %s", path, exc)
        return len(due)

    def truncate_to(self, topic: str, partition: int, offset: int) -> bool:
        """Truncate the log, its cleaning paused meanwhile (Kafka's `abortAndPauseCleaning`:
        a pass running on it stops first); its cleaner checkpoint entry goes no higher than
        the new log end."""
        target = self.get_log(topic, partition)
        tp = (topic, partition)
        with self.cleaner.paused(tp):
            cut = target.truncate_to(offset)
        log_dir = self._dir_of.get(tp)
        if cut and log_dir is not None:
            self.cleaner.truncated(log_dir, tp, target.log_end_offset)
        return cut

    def truncate_fully_and_start_at(self, topic: str, partition: int, offset: int) -> None:
        """Empty the log and restart it at `offset`, its cleaning paused meanwhile (as
        `truncate_to`); its cleaner entry then lies below the log start and is reset."""
        target = self.get_log(topic, partition)
        with self.cleaner.paused((topic, partition)):
            target.truncate_fully_and_start_at(offset)

    def _cleaner_logs(self) -> list[tuple[TopicPartitionKey, str, Log]]:
        """The open logs with their log dirs, for the cleaner's thread (a snapshot, read
        without the manager's lock: one C-level copy under the GIL)."""
        dir_of = self._dir_of
        return [
            (tp, log_dir, lg)
            for tp, lg in list(self._logs.items())
            if (log_dir := dir_of.get(tp)) is not None
        ]

    def _on_truncate(self, truncated: Log) -> None:
        """A truncation moved a recovery point back: record it before anything else happens.
        Called under the truncated log's lock, so without the manager's (see `__init__`)."""
        if truncated.topic_partition is None:
            return
        log_dir = self._dir_of.get(truncated.topic_partition)
        if log_dir is not None:
            # Durable at once even in a round of deferred writes: a recovery point above a
            # truncation that a crash undid would skip checking the records it brought back.
            with self._fs.undeferred():
                self._write_recovery_points(log_dir)

    # --- checkpoints --------------------------------------------------------------------------

    def _logs_in(self, log_dir: str) -> dict[TopicPartitionKey, Log]:
        # A snapshot (one C-level copy under the GIL): `_on_truncate` reads it without the
        # manager's lock while another thread may add or remove logs.
        if len(self.log_dirs) == 1:  # every log is in it: no test per log (100,000 of them)
            return dict(self._logs) if log_dir == self.log_dirs[0] else {}
        dir_of = self._dir_of
        return {tp: lg for tp, lg in list(self._logs.items()) if dir_of.get(tp) == log_dir}

    def _write_recovery_points(self, log_dir: str, *, new_zeros_wait: bool = False) -> None:
        # The offsets are read inside the lock, so that of two writers the later write holds
        # the later values (a truncation's lowered point is never overwritten by an older one).
        with self._recovery_points_lock:
            offsets = {tp: lg.recovery_point for tp, lg in self._logs_in(log_dir).items()}
            self._write_offsets(
                log_dir, RECOVERY_POINT_CHECKPOINT, offsets, new_zeros_wait=new_zeros_wait
            )

    def _high_watermarks_in(self, log_dir: str) -> dict[TopicPartitionKey, int]:
        return {tp: lg.high_watermark for tp, lg in self._logs_in(log_dir).items()}

    def _write_high_watermarks(self, log_dir: str) -> None:
        with self._high_watermarks_lock:
            offsets = self._high_watermarks_in(log_dir)
            self._write_offsets(log_dir, REPLICATION_OFFSET_CHECKPOINT, offsets)

    def _write_offsets(
        self,
        log_dir: str,
        name: str,
        offsets: dict[TopicPartitionKey, int],
        *,
        new_zeros_wait: bool = False,
    ) -> None:
        """Write a checkpoint file, unless it was last written with exactly `offsets`: the
        periodic checkpoints of a broker with 100,000 idle partitions would otherwise render
        and replace megabytes every 5 s to say what the file says. With `new_zeros_wait`
        (the periodic tasks), also unless `offsets` only adds entries at 0 to what was
        written: a missing entry means 0 to this manager's load and to Kafka's, so a new
        log's entry says nothing until its offset moves, and a creation of thousands of
        partitions re-rendered the whole file every 5 s for them (0.1 s of Python a pass at
        100,000, holding the GIL the event loop shares). They go into the next write, and a
        shutdown or a stale checkpoint's rewrite writes every entry. What the last write left
        is durable, or is made so by the sync of the `deferred_sync` block it ran in."""
        written = self._written.get((log_dir, name))
        if written == offsets:
            return
        if (
            new_zeros_wait
            and written is not None
            and written.items() <= offsets.items()  # every written entry unchanged
            and not any(offsets[tp] for tp in offsets.keys() - written.keys())
        ):
            return
        self._written.pop((log_dir, name), None)  # unknown while the write may fail halfway
        self._checkpoint(log_dir, name).write(offsets)
        self._written[(log_dir, name)] = offsets

    def _write_log_start_offsets(self, log_dir: str) -> None:
        # A log start offset of 0 is never above a segment's base: no copy of its segments.
        offsets = {
            tp: start
            for tp, lg in self._logs_in(log_dir).items()
            if (start := lg.log_start_offset) and start > lg.segments()[0].base_offset
        }
        self._write_offsets(log_dir, LOG_START_OFFSET_CHECKPOINT, offsets)

    def _write_checkpoints(self, log_dir: str) -> None:
        self._write_recovery_points(log_dir)
        self._write_log_start_offsets(log_dir)
        self._write_high_watermarks(log_dir)

    def _rewrite_stale_checkpoints(self, only: str | None = None) -> None:
        """Rewrite the checkpoints of log dirs that still name deleted logs (all, or `only`
        that dir if it does), durably even inside a `deferred_sync` block; call under the
        lock."""
        for log_dir in sorted(self._stale_checkpoints):
            if only is None or log_dir == only:
                with self._fs.undeferred():
                    self._write_checkpoints(log_dir)
                self._stale_checkpoints.discard(log_dir)  # once written: a failure retries

    def checkpoint_recovery_points(self) -> None:
        """Write each log dir's recovery-point checkpoint (unless unchanged), walking the logs
        only if a recovery point moved since the last pass (`OffsetMoves`)."""
        with self._lock, self._offset_moves.taken("recovery_points") as moved:
            if moved:
                for log_dir in self.log_dirs:
                    self._write_recovery_points(log_dir, new_zeros_wait=True)

    def checkpoint_high_watermarks(self) -> None:
        """Write each log dir's high-watermark checkpoint (unless unchanged). The offsets are
        read under the manager's lock, but the file is rendered and written outside it: at
        100,000 logs that is a few MB every 5 s, and creating a log (which takes the lock)
        would wait for it. A writer that needs the file current under the manager's lock (a
        stale checkpoint's rewrite, the shutdown) takes `_high_watermarks_lock` after it, so
        it waits for a write under way and then writes later offsets over it: no offsets read
        before a log's deletion are written after the rewrite that drops its entry. Nothing is
        read unless a high watermark moved since the last pass (`OffsetMoves`): a creation of
        thousands of logs moves none, and the walk took 7-25 ms of the GIL every 5 s at
        33,000 logs."""
        with self._offset_moves.taken("high_watermarks") as moved:
            if not moved:
                return
            with self._lock:
                taken = [(d, self._high_watermarks_in(d)) for d in self.log_dirs]
                self._high_watermarks_lock.acquire()
            try:
                for log_dir, offsets in taken:
                    self._write_offsets(
                        log_dir, REPLICATION_OFFSET_CHECKPOINT, offsets, new_zeros_wait=True
                    )
            finally:
                self._high_watermarks_lock.release()

    def checkpoint_log_start_offsets(self) -> None:
        """Write each log dir's log-start checkpoint (unless unchanged), walking the logs only
        if a log start offset moved since the last pass (`OffsetMoves`)."""
        with self._lock, self._offset_moves.taken("log_start_offsets") as moved:
            if moved:
                for log_dir in self.log_dirs:
                    self._write_log_start_offsets(log_dir)

    # --- background tasks ---------------------------------------------------------------------

    def _on_roll_flush_pending(self, rolled: Log) -> None:
        with self._rolled_lock:
            self._rolled.add(rolled)
        self._work_wanted.set()

    def flush_rolled_segments(self) -> int:
        """Sync the segments rolls left unsynced, log by log, and move their recovery points;
        returns how many logs' recovery points moved. The manager's lock is not held while
        syncing, nor a log's lock during its fsyncs (`Log.flush_rolled_segments`)."""
        with self._lock:
            if self._closed:
                return 0
            with self._rolled_lock:
                rolled, self._rolled = self._rolled, set()
        moved = 0
        try:
            for lg in rolled:
                if lg.has_pending_roll_flush and lg.flush_rolled_segments():
                    moved += 1
        finally:
            # What a truncation or a deletion raced, or a failure left, is tried again at the
            # next pass, as before it was taken.
            left = {lg for lg in rolled if lg.has_pending_roll_flush}
            if left:
                with self._rolled_lock:
                    self._rolled |= left
        return moved

    def run_due_tasks(self, now_ms: int | None = None) -> int:
        """Run every task that is due; return the task-clock time the next one is due.

        Rolled segments waiting for their fsync are synced first, whatever is due."""
        now = self._task_clock() if now_ms is None else now_ms
        # Cleared before the work it stands for is taken: a roll or deletion after this point
        # wakes the next pass.
        self._work_wanted.clear()
        self.flush_rolled_segments()
        self.remove_deleted_logs()
        self.cleaner.write_checkpoints()  # what removals and truncations changed
        with self._lock:
            if self._closed:
                return LONG_MAX
            self._rewrite_stale_checkpoints()
            tasks = self._tasks
            if tasks["flush"].take(now):
                wall_now = self._clock()
                for lg in self._logs.values():
                    lg.maybe_flush(wall_now)
            # Run after the lock is let go: it takes the lock a step at a time (`run_retention`).
            retention_due = tasks["retention"].take(now)
            if tasks["recovery_points"].take(now):
                self.checkpoint_recovery_points()
            if tasks["log_start_offsets"].take(now):
                self.checkpoint_log_start_offsets()
            high_watermarks_due = tasks["high_watermarks"].take(now)
            next_due = min(t.due_ms for t in tasks.values() if t.period_ms < LONG_MAX)
        with self._rolled_lock:
            if self._rolled:
                next_due = min(next_due, now + SOON_MS)
        if high_watermarks_due:
            self.checkpoint_high_watermarks()  # takes the manager's lock only to read
        if retention_due:
            self.run_retention()
        return next_due

    def run_retention(self) -> int:
        """One retention pass over every log; returns the number of segments deleted. Logs
        with nothing to delete are passed over without a call: most of a broker's logs, just
        after it created thousands, and a full pass took 3 us a log (0.1 s of the GIL at
        33,000 logs, 30 s into a creation of 100,000 partitions). Call it without the
        manager's lock: it takes it for `RETENTION_SLICE` logs at a time and rests
        `SLICE_REST_S` between two steps without it."""
        deleted = 0
        wall_now = self._clock()
        with self._lock:
            logs = list(self._logs.values())
        for start in range(0, len(logs), RETENTION_SLICE):
            if start:
                time.sleep(SLICE_REST_S)
                if self._stop.is_set():  # a shutdown waits for no more steps
                    break
            with self._lock:  # a log is closed (deleted, shut down) only under it
                for lg in logs[start : start + RETENTION_SLICE]:
                    if not lg.closed and not lg.has_no_retention_to_do:
                        deleted += self._delete_old_segments(lg, wall_now)
        return deleted

    def _delete_old_segments(self, lg: Log, wall_now: int) -> int:
        """One log's retention; a compacted log a pass is cleaning waits for the next round
        (Kafka's cleaner deletes only from logs it is not cleaning)."""
        tp = lg.topic_partition
        if tp is None or not lg.config.compacts:
            return lg.delete_old_segments(wall_now)
        if not self.cleaner.pause_if_idle(tp):
            return 0
        try:
            return lg.delete_old_segments(wall_now)
        finally:
            self.cleaner.resume(tp)

    def start(
        self,
        poll_interval_ms: int | None = None,
        *,
        on_storage_error: Callable[[KafkaStorageError], object] | None = None,
    ) -> None:
        """Run the background tasks on a daemon thread until `shutdown` or a storage error,
        which goes to `on_storage_error`, called on that thread (module docstring). The thread
        sleeps until the next task is due, or a roll or a deletion wakes it; a test with a
        task clock of its own may cap each sleep at `poll_interval_ms`."""
        if self._thread is not None:
            return
        first_pass_ms = SOON_MS if poll_interval_ms is None else poll_interval_ms

        def loop() -> None:
            # A roll or a deletion wakes the thread at once (`_work_wanted`), so old segments
            # are synced and deleted files removed promptly; nothing else needs it before the
            # next task is due.
            next_due_ms: int | None = self._task_clock() + first_pass_ms
            while next_due_ms is not None and not self._stop.is_set():
                self._work_wanted.wait(_sleep_s(next_due_ms - self._task_clock(), poll_interval_ms))
                next_due_ms = self.background_pass(on_storage_error)

        self._thread = threading.Thread(target=loop, name="replog-log-manager", daemon=True)
        self._thread.start()
        self.cleaner.start(on_storage_error)

    def background_pass(
        self, on_storage_error: Callable[[KafkaStorageError], object] | None = None
    ) -> int | None:
        """One pass of the background tasks, as `start`'s thread runs them (a simulation runs
        it on its loop instead): the task-clock time the next one is due, or None once they
        stop (`shutdown`, or a storage error handed to `on_storage_error`)."""
        if self._stop.is_set():
            return None
        try:
            return self.run_due_tasks()
        except (KafkaStorageError, OSError) as exc:
            error = (
                exc
                if isinstance(exc, KafkaStorageError)
                else KafkaStorageError(f"log manager background task: {exc}")
            )
            if on_storage_error is None:
                log.critical("log manager: background tasks stop: %s", error)
            else:
                on_storage_error(error)
            return None
        except Exception:  # a bug in one task must not silently stop all the others
            log.exception("log manager background task failed")
            return self._task_clock() + SOON_MS  # not a pass at once, again

    # --- shutdown -----------------------------------------------------------------------------

    def shutdown(self, broker_epoch: int = NO_BROKER_EPOCH) -> None:
        """Clean shutdown: flush and close every log, write checkpoints, then the markers."""
        self._stop_thread()
        with self._lock:
            if self._closed:
                return
            self.cleaner.shutdown()
            # Also syncs what rolls left to `flush_rolled_segments`: `close` flushes the
            # whole log from its recovery point, directory included.
            failure = self._close_logs()
            if failure is not None:
                # Every log's files are released all the same; no checkpoint or marker is
                # written (the next load recovers), nor by a second call.
                self._closed = True
                raise failure
            for log_dir in self.log_dirs:
                self._write_checkpoints(log_dir)
                atomic_replace(
                    self._fs,
                    os.path.join(log_dir, CLEAN_SHUTDOWN_MARKER),
                    render_clean_shutdown_marker(broker_epoch),
                )
            self._stale_checkpoints.clear()  # every dir's were just written
            self._closed = True

    close = shutdown

    def close_after_failure(self) -> None:
        """After a storage error: release every log's files as a crash would leave them (no
        flush, which a failed disk may fail or stall, no checkpoint, no marker: the next load
        recovers). Idempotent."""
        self._stop_thread()
        self.cleaner.shutdown(write=False)
        with self._lock:
            if not self._closed:
                self._closed = True
                for lg in self._logs.values():
                    lg.close_without_flush()

    def _stop_thread(self) -> None:
        self._stop.set()
        self._work_wanted.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _close_logs(self) -> KafkaStorageError | None:
        """Close every log, each whatever the others' closes raised; the first failure."""
        failure: KafkaStorageError | None = None
        for lg in self._logs.values():
            try:
                lg.close()
            except KafkaStorageError as exc:
                failure = failure or exc
        return failure

    def _check_open(self) -> None:
        if self._closed:
            raise KafkaStorageError("the log manager is shut down")

    def __enter__(self) -> LogManager:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.shutdown()
