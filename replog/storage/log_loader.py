"""Opening a partition's log: housekeeping, segment loading, and crash recovery.

Rules (docs/design/storage.md#log-recovery):
- A log cleaner's swap a crash interrupted (`<base>.log.swap`) is completed first
  (`segment_swap`); then leftovers of interrupted work are removed: `*.deleted`, `*.cleaned`,
  other `*.swap` files and index files whose `.log` is gone.
- After a clean shutdown nothing is rescanned, so opening costs O(number of segments), not
  O(bytes): the active segment's end is found from its last index entry (or, in a segment no
  longer than one index interval, from its few batches, without reading its indexes: they
  load on first use, `LogSegment`).
- After an unclean shutdown every segment from the one holding the recovery point onwards is
  validated batch by batch (framing, magic, CRC-32C, dense offsets, leader epochs) and its
  indexes rebuilt. The log is cut at the first invalid or partial batch, and every later
  segment is deleted: nothing after a gap can be trusted. In a log whose policy has
  `compact`, offsets need only increase, within and between segments: the cleaner removes
  records and leaves their offsets unused (`LogSegment.recover`). Each cut is logged with
  the file, the offset and the number of bytes.
- A segment with a missing `.index` or `.timeindex` gets its indexes rebuilt even after a
  clean shutdown.
- The `.txnindex` of every segment recovery validates is emptied, and when those segments hold
  a control batch the log names the first of them (`Log.txn_index_rebuild_from`): its entries
  need the transactions of the batches before it, which the producer state's load replays and
  writes back (`Log.rebuild_aborted_transactions`, docs/storage.md "Transactions in the log").
  Without a control batch there is nothing to write back, and the load starts where it would.
- The leader-epoch cache is then cut to the log end and to the log start; if its checkpoint is
  unreadable, or missing or empty while the log holds records, it is rebuilt from the batch
  headers of the whole log (and then witnesses nothing: below). The cut at the end drops the
  entries starting at or past the log end (Kafka's rule), except after a clean shutdown with a
  trusted checkpoint, where only those past it go: an entry starting exactly at the log end
  (a leader that took its epoch and appended nothing) is the state the log closed in, and
  keeping it spares every idle leader's checkpoint a rewrite at each restart.
- The log start offset is max(checkpoint, first segment base, start of the leader-epoch
  checkpoint's first entry); the high watermark is clamped to [log start, log end]; the
  recovery point never exceeds the log end. The epoch checkpoint is written synchronously
  whenever the log start moves (`LeaderEpochCache.truncate_from_start`), the log-start-offset
  checkpoint only periodically; without the third term a crash in between brought back
  records DeleteRecords had removed while the epochs that covered them stayed gone, and such
  a replica, leading, answered a follower's last fetched epoch with a boundary past the
  follower's divergent records, which it then kept. (Kafka writes epoch truncations
  asynchronously: there both checkpoints go back together, and the deleted records come back
  with their epochs. replog keeps them deleted.) The third term applies only when the log's
  first batch carries a leader epoch: a standalone log may begin with batches appended
  without one, which no epoch entry covers.
"""

from __future__ import annotations

import functools
import logging
import os
import random
from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple
from uuid import UUID

from replog.checkpoints.leader_epoch_checkpoint import EpochEntry, render_leader_epoch_checkpoint
from replog.checkpoints.partition_metadata import PARTITION_METADATA, render_partition_metadata
from replog.clock import Clock
from replog.errors import (
    CorruptCheckpointError,
    CorruptRecordError,
    KafkaStorageError,
    ReplogError,
)
from replog.record.header import BatchHeader
from replog.storage.checkpoint_file import LeaderEpochCheckpointFile
from replog.storage.fs import FileSystem, make_dirs_durably
from replog.storage.leader_epoch_cache import LeaderEpochCache
from replog.storage.log_config import LogConfig
from replog.storage.segment import DELETED_SUFFIX, LogSegment, segment_file_prefix
from replog.storage.segment_map import SegmentMap
from replog.storage.segment_swap import CLEANED_SUFFIX, SWAP_SUFFIX, complete_interrupted_swaps
from replog.storage.standalone_state import StandaloneState, read_state, write_state

if TYPE_CHECKING:
    from replog.storage.log import Log

log = logging.getLogger("replog.storage")

LEADER_EPOCH_FILE = "leader-epoch-checkpoint"
_LEFTOVER_SUFFIXES = (DELETED_SUFFIX, CLEANED_SUFFIX, SWAP_SUFFIX)
_INDEX_SUFFIXES = (".index", ".timeindex", ".txnindex")


def load_log(
    log_class: type[Log],
    directory: str,
    config: LogConfig,
    *,
    fs: FileSystem,
    clock: Clock,
    recovery_point: int | None,
    log_start_offset: int | None,
    high_watermark: int | None,
    had_clean_shutdown: bool | None,
    on_truncate: Callable[[Log], None] | None,
    rng: random.Random | None = None,
) -> Log:
    try:
        if had_clean_shutdown is None:
            # Standalone use opens or creates; a log manager opens directories it listed.
            make_dirs_durably(fs, directory)
        return _load(
            log_class,
            directory,
            config,
            fs,
            clock,
            recovery_point,
            log_start_offset,
            high_watermark,
            had_clean_shutdown,
            on_truncate,
            rng,
        )
    except (OSError, KafkaStorageError) as exc:
        raise KafkaStorageError(f"{directory}: cannot open log: {exc}") from exc


_FIRST_SEGMENT_LOG = os.sep + segment_file_prefix(0) + ".log"
_PARTITION_METADATA = os.sep + PARTITION_METADATA
_LEADER_EPOCH_FILE = os.sep + LEADER_EPOCH_FILE


@functools.lru_cache(maxsize=1024)
def _partition_metadata_bytes(topic_id: UUID) -> bytes:
    return render_partition_metadata(topic_id)


@functools.lru_cache(maxsize=1024)
def _first_epoch_bytes(leader_epoch: int) -> bytes:
    return render_leader_epoch_checkpoint((EpochEntry(leader_epoch, 0),))


class NewLogFiles(NamedTuple):
    """What `make_new_log_files` made for a new log, as plain data: a worker thread makes the
    files, and the log's objects are built from this where the log is to be used
    (`build_new_log`), so the thread holds the GIL only between its system calls."""

    directory: str
    created_ms: int
    topic_id: UUID | None  # its `partition.metadata`, if written
    leader_epoch: int | None  # its epoch checkpoint's one entry (the epoch at offset 0), if any


def new_log_file_contents(
    directory: str, *, topic_id: UUID | None = None, leader_epoch: int | None = None
) -> list[tuple[str, bytes]]:
    """The files `make_new_log_files` makes in a new log's `directory`, in its order, with
    their bytes: the empty first segment, then `partition.metadata` and the leader-epoch
    checkpoint where given (what another maker of those files, `file_maker_process`, writes)."""
    # Paths joined by hand and the small files' bytes rendered once per topic or epoch: this
    # runs for every replica of a large creation, holding the GIL between system calls.
    files = [(directory + _FIRST_SEGMENT_LOG, b"")]
    if topic_id is not None:
        files.append((directory + _PARTITION_METADATA, _partition_metadata_bytes(topic_id)))
    if leader_epoch is not None:
        files.append((directory + _LEADER_EPOCH_FILE, _first_epoch_bytes(leader_epoch)))
    return files


def make_new_log_files(
    directory: str,
    fs: FileSystem,
    now_ms: int,
    *,
    topic_id: UUID | None = None,
    leader_epoch: int | None = None,
) -> NewLogFiles:
    """Make the files of a new, empty log of a `LogManager` in `directory`, which must not
    exist yet: the directory, its empty first segment and, if given, its `partition.metadata`
    and a leader-epoch checkpoint whose one entry starts `leader_epoch` at offset 0 (nothing to
    look for, load or recover): `new_log_file_contents`. System calls only; the small files as
    `write_new_file` writes them (synced, or by the caller's `deferred_sync` block).
    FileExistsError (unwrapped) if the directory exists; any other failure is a
    KafkaStorageError naming the file (`cannot_create_log`)."""
    path = directory
    try:
        fs.make_dir(directory)  # FileExistsError (unwrapped) if it exists: open it instead
        segment, *small = new_log_file_contents(
            directory, topic_id=topic_id, leader_epoch=leader_epoch
        )
        path = segment[0]
        fs.create_empty_file(path)
        for path, data in small:
            fs.write_new_file(path, data)
    except FileExistsError:
        raise
    except OSError as exc:
        raise cannot_create_log(path, exc) from exc
    return NewLogFiles(directory, now_ms, topic_id, leader_epoch)


def cannot_create_log(path: str, error: OSError) -> KafkaStorageError:
    """A new log's file that could not be made, `path`, as the storage error it is."""
    return KafkaStorageError(f"{path}: cannot create log: {error}")


def build_new_log(
    log_class: type[Log],
    files: NewLogFiles,
    config: LogConfig,
    *,
    fs: FileSystem,
    clock: Clock,
    on_truncate: Callable[[Log], None] | None,
    rng: random.Random | None = None,
) -> Log:
    """The log `make_new_log_files` made, without a system call (an empty segment holds no
    descriptor, and its indexes are empty)."""
    directory = files.directory
    # Its indexes are made empty on first use (`LogSegment.__getattr__`).
    segment = LogSegment(directory, 0, config, fs, files.created_ms, create=False, made_empty=True)
    epoch = files.leader_epoch
    checkpoint = LeaderEpochCheckpointFile(directory + _LEADER_EPOCH_FILE, fs, new=epoch is None)
    return log_class(
        directory,
        config,
        SegmentMap.of_one(0, segment),
        LeaderEpochCache(
            checkpoint, name=directory, entries=() if epoch is None else (EpochEntry(epoch, 0),)
        ),
        log_start_offset=0,
        recovery_point=0,
        high_watermark=0,
        fs=fs,
        clock=clock,
        on_truncate=on_truncate,
        persist_standalone_state=None,
        rng=rng,
    )


def _load(
    log_class: type[Log],
    directory: str,
    config: LogConfig,
    fs: FileSystem,
    clock: Clock,
    recovery_point: int | None,
    log_start_offset: int | None,
    high_watermark: int | None,
    had_clean_shutdown: bool | None,
    on_truncate: Callable[[Log], None] | None,
    rng: random.Random | None,
) -> Log:
    standalone = had_clean_shutdown is None
    persist: Callable[[Log, bool], None] | None = None
    if standalone:
        state = read_state(directory, fs)
        had_clean_shutdown = state.clean_shutdown
        recovery_point = state.recovery_point if recovery_point is None else recovery_point
        log_start_offset = state.log_start_offset if log_start_offset is None else log_start_offset
        high_watermark = state.high_watermark if high_watermark is None else high_watermark
        # Mark the log open before touching anything, so a crash from here on is unclean.
        write_state(
            directory, fs, StandaloneState(False, recovery_point, log_start_offset, high_watermark)
        )

        def persist(log_: Log, clean: bool) -> None:
            write_state(
                directory,
                fs,
                StandaloneState(
                    clean, log_.recovery_point, log_.log_start_offset, log_.high_watermark
                ),
            )

    recovery_point = recovery_point or 0
    log_start_offset = log_start_offset or 0
    high_watermark = high_watermark or 0
    assert had_clean_shutdown is not None

    # One listing serves every step below (a restart opens thousands of logs).
    names = _remove_leftovers(directory, fs.list_dir(directory), fs)
    segments: SegmentMap[LogSegment] = SegmentMap()
    try:
        _open_segments(segments, directory, names, config, fs, clock)
        return _load_opened(
            log_class,
            directory,
            names,
            segments,
            config,
            fs,
            clock,
            recovery_point=recovery_point,
            log_start_offset=log_start_offset,
            high_watermark=high_watermark,
            had_clean_shutdown=had_clean_shutdown,
            on_truncate=on_truncate,
            persist=persist,
            rng=rng,
        )
    except BaseException:
        # Whatever failed, the descriptors opened so far are not left behind: the caller
        # (a log manager, an embedding application) lives on after the error.
        for segment in segments.values():
            segment.log_file.close()
        raise


def _load_opened(
    log_class: type[Log],
    directory: str,
    names: set[str],
    segments: SegmentMap[LogSegment],
    config: LogConfig,
    fs: FileSystem,
    clock: Clock,
    *,
    recovery_point: int,
    log_start_offset: int,
    high_watermark: int,
    had_clean_shutdown: bool,
    on_truncate: Callable[[Log], None] | None,
    persist: Callable[[Log, bool], None] | None,
    rng: random.Random | None,
) -> Log:
    """The rest of `_load` once the directory's `segments` are open: the epoch cache,
    recovery or the clean tail's check, and the offsets (module Rules)."""
    epoch_cache, epochs_trusted = _open_epoch_cache(directory, fs)
    # Whether the log holds records is known only once recovery cut a torn tail (below).
    epochs_missing = epochs_trusted and epoch_cache.earliest_entry is None
    # The epoch checkpoint is written whenever the log start moves, the log start's own
    # checkpoint only now and then: after a crash the first epoch's start can be the later
    # witness of where the log started (module Rules).
    earliest = epoch_cache.earliest_entry if epochs_trusted else None
    if (
        earliest is not None
        and earliest.start_offset > log_start_offset
        and _first_batch_has_an_epoch(segments)
    ):
        log.info(
            "%s: log start offset %d from the leader-epoch checkpoint (the log start "
            "checkpoint says %d)",
            directory,
            earliest.start_offset,
            log_start_offset,
        )
        log_start_offset = earliest.start_offset

    def assign_newer_epoch(header: BatchHeader) -> None:
        epoch = header.partition_leader_epoch
        latest = epoch_cache.latest_epoch
        if epoch >= 0 and (latest is None or epoch > latest):
            epoch_cache.assign(epoch, header.base_offset)

    # Whether recovery validated a control batch: only then can a rescanned `.txnindex` have
    # held anything, and only then is a replay needed to rebuild it.
    markers_recovered = False

    def tail_recovered(header: BatchHeader) -> None:
        nonlocal markers_recovered
        markers_recovered = markers_recovered or header.is_control
        assign_newer_epoch(header)

    recovered_from: int | None = None
    if not had_clean_shutdown and segments:
        epoch_starts: list[EpochEntry] = []  # where each epoch begins in the batches recovered

        def recovered(header: BatchHeader) -> None:
            nonlocal markers_recovered
            markers_recovered = markers_recovered or header.is_control
            epoch = header.partition_leader_epoch
            if epoch >= 0 and (not epoch_starts or epoch_starts[-1].leader_epoch != epoch):
                epoch_starts.append(EpochEntry(epoch, header.base_offset))
            assign_newer_epoch(header)

        recovered_from = _recover(directory, segments, recovery_point, recovered, fs)
        _match_recovered_epochs(
            epoch_cache, recovered_from, epoch_starts, segments.peekitem(-1)[1].next_offset
        )
    _rebuild_missing_indexes(segments, recovered_from, names)
    # The first segment whose `.txnindex` waits for a replay of the log's transactions.
    txn_rebuild_from = recovered_from
    if recovered_from is None:
        txn_rebuild_from = _verify_clean_tail(directory, segments, tail_recovered, fs)
    if not markers_recovered:
        txn_rebuild_from = None  # no marker among the batches rescanned: nothing to rebuild
    if epochs_missing and _holds_records(segments, log_start_offset):
        # Gone (or never written) while the log holds records: a first entry made later
        # would start above the log start and pass for the witness below. Rebuilt instead.
        log.warning("%s: no leader epochs for a log with records; rebuilding them", directory)
        epochs_trusted = False

    if segments:
        log_end_offset = segments.peekitem(-1)[1].next_offset
        if log_end_offset < log_start_offset:
            log.warning(
                "%s: log end offset %d is below the log start offset %d (from the "
                "checkpoints); deleting all segments",
                directory,
                log_end_offset,
                log_start_offset,
            )
            for segment in segments.values():
                segment.delete()
            segments.clear()
            # As Kafka's LogLoader does: the epochs described data that is gone.
            epoch_cache.clear_and_flush()
    if not segments:
        segment = LogSegment(directory, log_start_offset, config, fs, clock(), create=True)
        segment.offset_index.reset()
        segment.time_index.reset()
        segments[log_start_offset] = segment
    first_base = segments.peekitem(0)[0]
    log_end_offset = segments.peekitem(-1)[1].next_offset
    log_start_offset = max(log_start_offset, first_base)
    recovery_point = log_end_offset if had_clean_shutdown else min(recovery_point, log_end_offset)

    if not epochs_trusted:
        epoch_cache.clear_and_flush()
        for segment in segments.values():
            for _, header in segment._walk_headers(0):
                assign_newer_epoch(header)
    # After a clean shutdown the checkpoint is the cache the log closed with, and an entry
    # starting at the log end is a leader's epoch with nothing appended yet, a state the
    # running log was in: kept, it is not rewritten at every restart of an idle leader. After
    # a crash (or a rebuild) Kafka's cut stands: from the log end (docs/storage.md,
    # "Leader epochs at a clean open").
    kept_at_end = had_clean_shutdown and recovered_from is None and epochs_trusted
    epoch_cache.truncate_from_end(log_end_offset + 1 if kept_at_end else log_end_offset)
    epoch_cache.truncate_from_start(log_start_offset)

    opened = log_class(
        directory,
        config,
        segments,
        epoch_cache,
        log_start_offset=log_start_offset,
        recovery_point=recovery_point,
        high_watermark=high_watermark,
        fs=fs,
        clock=clock,
        on_truncate=on_truncate,
        persist_standalone_state=persist,
        rng=rng,
    )
    if txn_rebuild_from is not None and txn_rebuild_from in segments:
        opened.txn_index_rebuild_from = txn_rebuild_from
    return opened


def _remove_leftovers(directory: str, names: list[str], fs: FileSystem) -> set[str]:
    """Complete an interrupted cleaner's swap (`segment_swap`), then remove what an interrupted
    operation left in `directory` (whose listing is `names`); the names that remain."""
    names = complete_interrupted_swaps(directory, names, fs)
    logs = {name[: -len(".log")] for name in names if name.endswith(".log")}
    remaining = set(names)
    for name in names:
        path = os.path.join(directory, name)
        if name.endswith(_LEFTOVER_SUFFIXES):
            log.info("%s: removing leftover %s", directory, name)
            fs.remove(path)
            remaining.discard(name)
        elif name.endswith(_INDEX_SUFFIXES) and name.rsplit(".", 1)[0] not in logs:
            log.info("%s: removing index %s whose log file is gone", directory, name)
            fs.remove(path)
            remaining.discard(name)
    return remaining


def _open_segments(
    segments: SegmentMap[LogSegment],
    directory: str,
    names: set[str],
    config: LogConfig,
    fs: FileSystem,
    clock: Clock,
) -> None:
    """Open the segments among `names` into `segments`, which holds those opened so far if
    one fails."""
    now = clock()
    # In offset order (the names' digits are zero-padded): each one is added after the last.
    for name in sorted(names):
        stem, _, suffix = name.partition(".")
        if suffix != "log" or len(stem) != 20 or not stem.isdigit():
            continue
        segment = LogSegment(directory, int(stem), config, fs, now, create=False)
        segments[segment.base_offset] = segment


def _rebuild_missing_indexes(
    segments: SegmentMap[LogSegment], recovered_from: int | None, names: set[str]
) -> None:
    """Rebuild indexes whose file is gone (not among the directory's `names`), in segments
    recovery did not already rebuild."""
    for base, segment in segments.items():
        if recovered_from is not None and base >= recovered_from:
            break
        # A missing .timeindex counts too (Kafka only recreates it empty): without it the
        # segment's largest timestamp, which time-based retention uses, would be lost.
        indexes = (segment.offset_index.path, segment.time_index.path)
        if segment.size > 0 and not all(os.path.basename(path) in names for path in indexes):
            log.warning("%s: index missing, rebuilding it", segment.log_path)
            segment.rebuild_indexes()


def _first_batch_has_an_epoch(segments: SegmentMap[LogSegment]) -> bool:
    """Whether the log's first batch carries a leader epoch (>= 0). Only then does the epoch
    cache cover the log from its start: a standalone log may begin with batches appended
    without one (epoch -1, which the cache never records), and its first entry, made by a later
    append, is no witness that those records were deleted. (Epochs never decrease along a log,
    so only such a prefix can lack them.) A first batch that cannot be read counts as having
    one: the witness is what protects a crashed log."""
    for segment in segments.values():
        if segment.size == 0:
            continue
        try:
            first = next(segment._walk_headers(0), None)
        except ReplogError:
            return True
        return first is None or first[1].partition_leader_epoch >= 0
    return True


def _holds_records(segments: SegmentMap[LogSegment], log_start_offset: int) -> bool:
    """Whether the segments hold records at or above the log start (those below it, which
    DeleteRecords left in the first segment, need no leader epoch: a truncation to the log
    start empties the cache of such a log, and its reopening must keep it empty)."""
    if not segments:
        return False
    first = max(segments.peekitem(0)[0], log_start_offset)
    return bool(segments.peekitem(-1)[1].next_offset > first)


def _open_epoch_cache(directory: str, fs: FileSystem) -> tuple[LeaderEpochCache, bool]:
    """The cache and whether its file could be trusted (False: rebuild from the log)."""
    checkpoint = LeaderEpochCheckpointFile(os.path.join(directory, LEADER_EPOCH_FILE), fs)
    try:
        return LeaderEpochCache(checkpoint, name=directory), True
    except CorruptCheckpointError as exc:
        log.warning("%s; rebuilding leader epochs from the log", exc)
        fs.remove(checkpoint.path)
        return LeaderEpochCache(checkpoint, name=directory), False


def _match_recovered_epochs(
    cache: LeaderEpochCache, start: int, epoch_starts: list[EpochEntry], end: int
) -> None:
    """Make the cache's entries from `start` (where recovery began) to `end` (where it ended)
    the ones the recovered batches imply, `epoch_starts` (each epoch's first batch from
    `start`), when they differ: a cut is not synced (Kafka's is not either) while the cache's
    checkpoint is, so a crash can bring back cut batches of an older epoch under an entry of a
    newer one. Rewritten only then: an unclean start of thousands of logs writes nothing here
    for a log whose cache agrees."""
    kept = [e for e in cache.entries() if e.start_offset < start]
    expected = list(kept)
    for entry in epoch_starts:
        if not expected or entry.leader_epoch > expected[-1].leader_epoch:
            expected.append(entry)
    if [e for e in cache.entries() if e.start_offset < end] == expected:
        return
    cache.truncate_from_end(start)
    for entry in expected[len(kept) :]:
        cache.assign(entry.leader_epoch, entry.start_offset)


def _recover(
    directory: str,
    segments: SegmentMap[LogSegment],
    recovery_point: int,
    on_batch: Callable[[BatchHeader], None],
    fs: FileSystem,
) -> int:
    """Validate every segment from the one holding the recovery point; cut at the first bad
    byte. Returns the base offset recovery started from."""
    start: int = next(
        segments.irange(maximum=recovery_point, reverse=True), segments.peekitem(0)[0]
    )
    unflushed = list(segments.irange(minimum=start))
    log.info(
        "%s: unclean shutdown, recovering %d segment(s) from offset %d",
        directory,
        len(unflushed),
        start,
    )
    for i, base in enumerate(unflushed):
        segment: LogSegment = segments[base]
        # Its aborted transactions are rebuilt from a replay of the log's transactions by
        # whoever keeps them (`Log.txn_index_rebuild_from`).
        segment.txn_index.reset()
        result = segment.recover(on_batch)
        if result.truncated_bytes:
            log.warning(
                "%s: cut %d byte(s) at byte %d (offset %d): %s",
                segment.log_path,
                result.truncated_bytes,
                result.valid_bytes,
                result.next_offset,
                result.reason,
            )
        later = unflushed[i + 1 :]
        next_base = later[0] if later else None
        # A compacted log's cleaned segments may end before the next one's base (module Rules).
        if result.truncated_bytes or (
            next_base is not None
            and (
                next_base < result.next_offset
                or (next_base > result.next_offset and not segment.config.compacts)
            )
        ):
            for doomed in later:
                log.warning(
                    "%s: deleting %s, which follows a cut or a gap at offset %d",
                    directory,
                    segments[doomed].log_path,
                    result.next_offset,
                )
                segments.pop(doomed).delete()
            break
    return start


def _verify_clean_tail(
    directory: str,
    segments: SegmentMap[LogSegment],
    on_batch: Callable[[BatchHeader], None],
    fs: FileSystem,
) -> int | None:
    """After a clean shutdown, find the active segment's end; recover it if that fails.
    Returns the base offset of the segment recovered, if any."""
    if not segments:
        return None
    active: LogSegment = segments.peekitem(-1)[1]
    try:
        active.next_offset  # noqa: B018 - loads the tail state, raising on damage
    except CorruptRecordError as exc:
        log.warning(
            "%s: clean shutdown recorded but %s; recovering the active segment", directory, exc
        )
        active.txn_index.reset()  # rebuilt as `_recover`'s are
        result = active.recover(on_batch)
        if result.truncated_bytes:
            log.warning(
                "%s: cut %d byte(s) at byte %d (offset %d): %s",
                active.log_path,
                result.truncated_bytes,
                result.valid_bytes,
                result.next_offset,
                result.reason,
            )
        return active.base_offset
    return None
