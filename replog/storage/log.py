"""One partition's log: an ordered run of segments with Kafka's append, read, truncation,
retention and recovery rules.

Rules (docs/design/storage.md#leader-validation-on-produce, #segment-files-and-names, #log-recovery,
docs/design/replication.md):
- Offsets are dense as appended; in a compacted log the cleaner removes records below the
  high watermark without renumbering the rest (`replace_with_cleaned`), leaving gaps.
  `log_start_offset <= high_watermark <= log_end_offset`; the log start offset and the
  recovery point only move forward, except that truncation pulls them back.
- A leader append validates every batch's header and CRC-32C (never its records), gives each
  batch its base offset and the leader epoch in its header, and appends the bytes. A rejected
  append leaves the log unchanged, and the caller's buffer is never changed.
- A follower append writes the leader's bytes verbatim; its first offset must equal the log end
  offset (no gaps, except in a compacted log, whose leader's cleaner leaves some; an empty log
  whose start falls inside the first batch restarts at its base),
  epochs never fall within it nor pass the sending leader's (when given), and it records each
  batch's leader epoch in the leader-epoch cache.
- Reads return whole batches, starting with the one that holds `start_offset`, and never a
  batch holding an offset at or above `upper_bound_offset` (the broker passes the high
  watermark for consumers). A start below the log start or above the end is out of range.
- Retention never deletes anything at or above the high watermark; the active segment goes only
  when it is not empty and wholly below it, after a new empty segment replaced it.
- The recovery point moves only after an fsync returned: everything below it is on disk.
- Rolls: a standalone log (the Raft metadata log) fsyncs the old segments on the roll, under
  its lock, so the recovery point reaches the new base at once. A log under a LogManager
  (`enable_async_roll_flush`) does as Kafka does (docs/design/storage.md#log-recovery,
  #crash-scenarios, S8 item 4): the roll only records the offset to reach, and
  `flush_rolled_segments`, on the manager's background thread, fsyncs the old segments and the
  directory without the lock (appends go on), then moves the recovery point unless a truncation, a
  deletion or a close came in between. A crash before that rescans from the old segment.

Theory of operation: `Log.open` loads segments (`log_loader`), recovering those at or after the
recovery point after an unclean shutdown. Every public method holds the log's lock, so a log
can be shared by threads (an embedding application, a background task runner).

The append path is the hot path (docs/benchmarks.md measures it against a plain file). The
stamped fields (bytes 0-15: base offset, batch length, leader epoch) are not covered by the
CRC, so a leader append writes a fresh 16-byte prefix and then the caller's bytes from byte 16
on, in one gather write: no batch is copied to be stamped. Only LogAppendTime, which changes
CRC-covered fields, stamps a copy. The one-batch append, by far the most common, has a path of
its own without the general path's per-batch lists.
"""

from __future__ import annotations

import logging
import os
import random
import struct
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence, Sized
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from contextlib import contextmanager
from itertools import pairwise
from typing import TYPE_CHECKING, NoReturn, TypeVar

from crc32c import crc32c

from replog.checkpoints.partition_metadata import PARTITION_METADATA
from replog.clock import Clock, wall_clock_ms
from replog.errors import (
    CorruptCheckpointError,
    CorruptIndexError,
    CorruptRecordError,
    FencedLeaderEpochError,
    InvalidRecordError,
    KafkaStorageError,
    LogClosedError,
    MessageSizeTooLargeError,
    OffsetOutOfRangeError,
    OffsetsOutOfOrderError,
    RecordBatchTooLargeError,
    UnexpectedAppendOffsetError,
)
from replog.record.control_record import EndTxnMarker, batch_marker
from replog.record.header import (
    ATTRIBUTES_OFFSET,
    COMPRESSION_CODEC_MASK,
    CONTROL_FLAG_MASK,
    CRC_OFFSET,
    LOG_OVERHEAD,
    RECORD_BATCH_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    BatchHeader,
    check_crc_and_count,
    compute_crc,
    iter_frames,
    read_frame,
    read_header,
    stamp_batch,
    validate_batch,
)
from replog.storage.aborted_transactions import AbortedTransaction
from replog.storage.checkpoint_file import PartitionMetadataFile
from replog.storage.file_region import Region
from replog.storage.fs import LOCAL_FS, Buffer, FileSystem, OsFileSystem
from replog.storage.log_append_info import LogAppendInfo
from replog.storage.log_config import LogConfig
from replog.storage.offset_moves import OffsetMoves
from replog.storage.segment import INT32_MAX, LogSegment
from replog.storage.segment_map import SegmentMap
from replog.storage.segment_swap import (
    cancel_swaps,
    complete_swap,
    discard_cleaned,
    finish_swap,
    mark_swap,
)

if TYPE_CHECKING:
    from replog.storage.leader_epoch_cache import LeaderEpochCache
    from replog.storage.log_loader import NewLogFiles

log = logging.getLogger("replog.storage")

_MAX_TIMESTAMP_OFFSET = 35
# Bytes 0-15 of a batch as a leader writes them: base offset, batch length, leader epoch.
_STAMPED_PREFIX = struct.Struct(">qii")
# The smallest record: length, attributes, timestamp delta, offset delta, key length, value
# length and header count, one byte each (null key, null value, no headers).
MIN_RECORD_BYTES = 7
_BATCH_LENGTH = struct.Struct(">i")
_new_tuple = tuple.__new__  # builds a named tuple from its fields without a Python-level call
# Bytes no one can change while they are validated and written: `bytes`, or a byte view of one.
Unchangeable = bytes | memoryview


_NOT_PLAIN_NAMES = ("", ".", "..")  # a path ending in a separator, `.` or `..`


def parse_topic_partition(directory: str) -> tuple[str, int] | None:
    """(topic, partition) from a `<topic>-<partition>` directory name, or None."""
    name = directory.rpartition(os.sep)[2]  # as below, a few times faster, for a plain path
    if name in _NOT_PLAIN_NAMES:
        name = os.path.basename(os.path.normpath(directory))
    topic, sep, partition = name.rpartition("-")
    if not sep or not topic or not partition.isdigit():
        return None
    return topic, int(partition)


# A deleted partition's directory ends with this until its files are removed (Kafka's name).
DELETE_DIR_SUFFIX = "-delete"
# A stray log's directory (a partition of a deleted topic, or one this broker no longer holds,
# found at start-up) ends with this; it is kept for an operator, never opened (Kafka's name).
STRAY_DIR_SUFFIX = "-stray"
RENAMED_DIR_SUFFIXES = (DELETE_DIR_SUFFIX, STRAY_DIR_SUFFIX)
# How many bytes one read of a header walk (`batch_headers`) asks for. The walk keeps only
# headers, so this bounds the memory of a producer-state rebuild.
HEADER_WALK_CHUNK_BYTES = 1 << 20
_DIR_NAME_BYTES_MAX = 255  # a file name's limit on common file systems


def renamed_dir_name(
    directory: str, suffix: str = DELETE_DIR_SUFFIX, *, rng: random.Random | None = None
) -> str:
    """Kafka's name for a partition's directory renamed aside: `<topic>-<partition>.<id>-delete`
    for a deleted one, `...-stray` for a stray one (`RENAMED_DIR_SUFFIXES`), the id unique (so
    a re-created partition can be renamed aside again before the first one is gone; 128 random
    bits, from `rng` when given, a simulation's seeded one) and the topic cut short where the
    whole name would not fit in 255 bytes."""
    if suffix not in RENAMED_DIR_SUFFIXES:
        raise ValueError(f"{suffix!r} is not one of {RENAMED_DIR_SUFFIXES}")
    name = os.path.basename(os.path.normpath(directory))
    topic, _, partition = name.rpartition("-")
    unique = uuid.uuid4().hex if rng is None else f"{rng.getrandbits(128):032x}"
    ending = f"-{partition}.{unique}{suffix}"
    room = _DIR_NAME_BYTES_MAX - len(ending.encode())
    kept = topic.encode()[:room].decode(errors="ignore")
    return kept + ending


def renamed_topic_partition(
    directory: str, suffixes: tuple[str, ...] = RENAMED_DIR_SUFFIXES
) -> tuple[str, int] | None:
    """(topic, partition) from a `renamed_dir_name` ending in one of `suffixes` (the topic as
    kept there), or None for any other name."""
    name = os.path.basename(os.path.normpath(directory))
    if not name.endswith(suffixes):
        return None
    return parse_topic_partition(name.rpartition(".")[0])


class Log:
    """A partition's segmented log. Open it with `Log.open`."""

    def __init__(
        self,
        directory: str,
        config: LogConfig,
        segments: SegmentMap[LogSegment],
        leader_epoch_cache: LeaderEpochCache,
        *,
        log_start_offset: int,
        recovery_point: int,
        high_watermark: int,
        fs: FileSystem,
        clock: Clock,
        on_truncate: Callable[[Log], None] | None,
        persist_standalone_state: Callable[[Log, bool], None] | None,
        rng: random.Random | None = None,
    ) -> None:
        """`rng`: where the log's random choices come from (its roll jitter, the id of its
        directory's name when renamed aside); None: a fresh source (a simulation passes
        its seeded one)."""
        self.directory = directory
        self._rng = rng
        self.config = config
        self._segments = segments  # base offset -> LogSegment
        # The last segment, cached: `peekitem(-1)` costs about 0.4 µs and every append and read
        # asks. Whatever changes `_segments` sets this to None first; `active_segment` refills it.
        self._active: LogSegment | None = None
        self.leader_epoch_cache = leader_epoch_cache
        self._fs = fs
        self._clock = clock
        self._lock = threading.RLock()
        self._closed = False
        self._on_truncate = on_truncate
        self._persist_standalone_state = persist_standalone_state
        active: LogSegment = segments.peekitem(-1)[1]
        self._log_end_offset = active.next_offset
        self._log_start_offset = log_start_offset
        self._recovery_point = min(recovery_point, self._log_end_offset)
        self._high_watermark = max(log_start_offset, min(high_watermark, self._log_end_offset))
        # Told of every move of the three (a LogManager's, shared by its logs: offset_moves.py).
        self._offset_moves = OffsetMoves()
        self._last_flush_ms = clock()
        # Made by `create` in a directory that did not exist: it holds no records, no producer
        # snapshot and no epoch, so nothing of it needs reading.
        self.created_empty = False
        # `partition.metadata`'s topic id once read or written, in a 1-tuple (None: not yet).
        self._known_topic_id: tuple[uuid.UUID | None] | None = None
        # The segment holding the recovery point when the standalone state was last written.
        self._persisted_recovery_base = -2
        # Asynchronous roll flush (off for a standalone log; a LogManager turns it on): a roll
        # only records the offset the next `flush_rolled_segments` must bring the recovery
        # point to, and `_on_roll_flush_pending` wakes whoever runs it.
        self._async_roll_flush = False
        self._on_roll_flush_pending: Callable[[Log], None] | None = None
        self._roll_flush_pending = 0
        # Counts truncations, so an unlocked roll flush can tell that one happened meanwhile.
        self._truncations = 0
        # A cleaner's swap between its two locked steps (`replace_with_cleaned`): its cleaned
        # log files and its first replaced segment's base offset.
        self._pending_swap: tuple[tuple[str, ...], int] | None = None
        # segment.jitter.ms: drawn again for every new active segment, as Kafka does.
        self._roll_jitter_ms = _random_roll_jitter(config, rng)
        # (bound offset, segment base, byte position) of the last upper bound a read resolved.
        self._bound_cache: tuple[int, int, int] | None = None
        # The base of the first segment recovery rescanned, whose `.txnindex` and later ones'
        # wait for a replay of the log's transactions (`rebuild_aborted_transactions`); None
        # when every index stands.
        self.txn_index_rebuild_from: int | None = None
        tp = parse_topic_partition(directory)
        self.topic_partition = tp
        self.name = f"{tp[0]}-{tp[1]}" if tp else os.path.basename(os.path.normpath(directory))
        assert self._log_start_offset <= self._high_watermark <= self._log_end_offset

    # --- opening ------------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        directory: str,
        config: LogConfig | None = None,
        *,
        fs: FileSystem = LOCAL_FS,
        clock: Clock = wall_clock_ms,
        recovery_point: int | None = None,
        log_start_offset: int | None = None,
        high_watermark: int | None = None,
        had_clean_shutdown: bool | None = None,
        on_truncate: Callable[[Log], None] | None = None,
        rng: random.Random | None = None,
    ) -> Log:
        """Open (creating if needed) the log in `directory`, recovering it if it was not closed
        cleanly.

        Standalone use passes only `directory` and `config`: the log keeps its recovery point,
        log start offset, high watermark and clean-shutdown flag in a state file of its own.
        A `LogManager` passes those values from its per-dir checkpoint files instead.
        """
        from replog.storage.log_loader import load_log

        return load_log(
            cls,
            directory,
            config or LogConfig(),
            fs=fs,
            clock=clock,
            recovery_point=recovery_point,
            log_start_offset=log_start_offset,
            high_watermark=high_watermark,
            had_clean_shutdown=had_clean_shutdown,
            on_truncate=on_truncate,
            rng=rng,
        )

    @classmethod
    def create(
        cls,
        directory: str,
        config: LogConfig,
        *,
        fs: FileSystem = LOCAL_FS,
        clock: Clock = wall_clock_ms,
        on_truncate: Callable[[Log], None] | None = None,
        rng: random.Random | None = None,
    ) -> Log:
        """A new, empty log in `directory`, which must not exist (a `LogManager`'s new
        partition: `log_loader.make_new_log_files`)."""
        from replog.storage.log_loader import make_new_log_files

        files = make_new_log_files(directory, fs, clock())
        return cls.from_new_files(
            files, config, fs=fs, clock=clock, on_truncate=on_truncate, rng=rng
        )

    @classmethod
    def from_new_files(
        cls,
        files: NewLogFiles,
        config: LogConfig,
        *,
        fs: FileSystem = LOCAL_FS,
        clock: Clock = wall_clock_ms,
        on_truncate: Callable[[Log], None] | None = None,
        rng: random.Random | None = None,
    ) -> Log:
        """The new log whose files `log_loader.make_new_log_files` made, built without a
        system call (`build_new_log`)."""
        from replog.storage.log_loader import build_new_log

        created = build_new_log(
            cls, files, config, fs=fs, clock=clock, on_truncate=on_truncate, rng=rng
        )
        created._known_topic_id = (files.topic_id,)
        created.created_empty = True
        return created

    # --- offsets ------------------------------------------------------------------------------

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._log_end_offset

    @property
    def recovery_point(self) -> int:
        return self._recovery_point

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @high_watermark.setter
    def high_watermark(self, value: int) -> None:
        self.update_high_watermark(value)

    def update_high_watermark(self, value: int) -> int:
        """Set the high watermark, clamped to [log_start_offset, log_end_offset]; returns it."""
        with self._lock:
            new = max(self._log_start_offset, min(value, self._log_end_offset))
            if new != self._high_watermark:
                self._high_watermark = new
                self._offset_moves.high_watermarks = True
            return new

    @property
    def segment_count(self) -> int:
        return len(self._segments)

    @property
    def has_no_retention_to_do(self) -> bool:
        """Whether a retention pass would find nothing to delete because the log is one empty
        segment (the active segment goes only when it is not empty). Under the log's lock:
        `active_segment` may refill the cache a roll is changing."""
        with self._lock:
            return len(self._segments) == 1 and self.active_segment.size == 0

    @property
    def size_in_bytes(self) -> int:
        with self._lock:
            return sum(segment.size for segment in self._segments.values())

    def segments(self) -> list[LogSegment]:
        with self._lock:
            return list(self._segments.values())

    @property
    def active_segment(self) -> LogSegment:
        segment = self._active
        if segment is None:
            segment = self._active = self._segments.peekitem(-1)[1]
        return segment

    @property
    def latest_leader_epoch(self) -> int | None:
        return self.leader_epoch_cache.latest_epoch

    def __repr__(self) -> str:
        return (
            f"Log({self.name!r}, start={self._log_start_offset}, hw={self._high_watermark}, "
            f"end={self._log_end_offset}, segments={len(self._segments)})"
        )

    # --- appends ------------------------------------------------------------------------------

    def append_as_leader(
        self,
        batch_bytes: bytes | bytearray | memoryview,
        leader_epoch: int,
        *,
        allow_control: bool = False,
    ) -> LogAppendInfo:
        """Validate client batches, give them offsets from the log end and stamp `leader_epoch`.

        Each batch must be a valid v2 batch with base offset 0, no larger than
        `max.message.bytes`; the whole append must fit in a segment. Control batches, and
        producer batches without a sequence, are accepted only with `allow_control`: an append
        that is no client's (the Raft leader's own control records, a transaction
        coordinator's markers, the group coordinator's transactional offset commits; Kafka
        checks both of clients' batches only).
        """
        with self._lock:
            # Calls are the dearest part of this path (with a 16 KiB write evicting Python's
            # working set from the caches, each costs ~0.3 µs), so the common case calls only
            # what it must: here `_check_open` only to raise, and `_immutable` only for what
            # is not `bytes`.
            if self._closed:
                self._check_open()
            data = batch_bytes if type(batch_bytes) is bytes else _immutable(batch_bytes)
            if (
                len(data) >= OVERLAPPED_CRC_BYTES_MIN
                and not self.config.log_append_time
                and _single_batch(data)
            ):
                return self._append_large_batch(data, leader_epoch, allow_control)
            headers = self._validate_leader_batches(data, allow_control)
            latest = self._check_leader_epoch(leader_epoch)
            now_ms = self._clock()
            if leader_epoch >= 0 and leader_epoch != latest:
                # (An equal epoch is already the latest entry, starting at or below the end.)
                self.leader_epoch_cache.assign(leader_epoch, self._log_end_offset)
            if len(headers) == 1 and not self.config.log_append_time:
                return self._append_one_batch(data, headers[0][1], leader_epoch, now_ms)
            offset = self._log_end_offset
            stamped: list[BatchHeader] = []
            prefixes: list[bytes] | None = None
            if self.config.log_append_time:
                # LogAppendTime changes CRC-covered fields, so the batches are stamped in a copy.
                buf = bytearray(data)
                for position, header in headers:
                    stamp_batch(buf, position, offset, leader_epoch)
                    _set_log_append_time(buf, position, header.size_in_bytes, now_ms)
                    stamped.append(read_header(buf, position))  # new attributes, time and CRC
                    offset += header.records_count
                view = memoryview(buf)
                append_time = now_ms
            else:
                # Stamping changes only bytes 0-15 of each batch (base offset, leader epoch),
                # none of them CRC-covered: write a fresh 16-byte prefix and the caller's bytes
                # after it in one gather write, instead of copying every batch to stamp it (on
                # the benchmark machine a 1 MiB copy took 40-140 µs, writing it to the page
                # cache about 280 µs).
                prefixes = []
                for _, header in headers:
                    prefixes.append(_STAMPED_PREFIX.pack(offset, header.batch_length, leader_epoch))
                    stamped.append(_restamped(header, offset, leader_epoch))
                    offset += header.records_count
                view = memoryview(data)
                append_time = -1
            return self._append_validated(view, stamped, prefixes, now_ms, append_time)

    def _append_large_batch(
        self, data: Unchangeable, leader_epoch: int, allow_control: bool
    ) -> LogAppendInfo:
        """One large batch: its CRC-32C is computed on a worker thread while the bytes are
        written, and checked before anything records them.

        Why: for a 1 MiB batch the CRC costs about a fifth of the page-cache write, and
        `crc32c` releases the GIL, so on a second core it is hidden behind the write. Nothing is
        visible before the check passes (the log end offset, the indexes and the leader-epoch
        cache move only after it); a failed check cuts the bytes off again, and a crash in
        between leaves bytes past the log end that recovery's own CRC check removes.
        """
        self._check_append_size(len(data))
        try:
            header = validate_batch(data, 0, where=self.name, defer_crc=True)
        except (CorruptRecordError, InvalidRecordError):
            self._raise_naming_batch("append", data, (), 0)
        self._check_leader_batch(header, (), 0, allow_control, self.config.max_message_bytes)
        latest = self._check_leader_epoch(leader_epoch)
        crc = _crc_worker(self._fs).submit(crc32c, memoryview(data)[ATTRIBUTES_OFFSET:])
        start_offset = self._log_end_offset

        def verify() -> None:
            check_crc_and_count(header, crc.result(), self._where("append", (), 0))
            self._check_records_fit(header, (), 0)
            if leader_epoch >= 0 and leader_epoch != latest:
                self.leader_epoch_cache.assign(leader_epoch, start_offset)

        try:
            return self._append_one_batch(data, header, leader_epoch, self._clock(), verify)
        finally:
            crc.cancel()  # only matters when the write failed before the check waited for it

    def _append_one_batch(
        self,
        data: Unchangeable,
        header: BatchHeader,
        leader_epoch: int,
        now_ms: int,
        verify: Callable[[], None] | None = None,
    ) -> LogAppendInfo:
        """The usual leader append, one validated batch, CreateTime.

        Does what `_append_validated` does for this case without its lists and loops, which
        saved about 1 µs of the ~25 µs a 16 KiB append took on the benchmark machine.
        """
        offset = self._log_end_offset
        last_offset = offset + header.last_offset_delta
        max_timestamp = header.max_timestamp
        # The gather write of a stamped prefix and the caller's bytes, as above.
        prefix = _STAMPED_PREFIX.pack(offset, header.batch_length, leader_epoch)
        parts: list[Buffer] = [prefix, memoryview(data)[_STAMPED_PREFIX.size :]]
        segment = self._active if self._active is not None else self.active_segment  # no call
        try:
            if segment.should_roll(
                len(data), max_timestamp, last_offset, now_ms, self._roll_jitter_ms
            ):
                if verify is not None:
                    # A roll changes the files: check the batch first, so a rejected one
                    # leaves everything as it was.
                    verify()
                    verify = None
                segment = self._roll(offset)
            segment.append(parts, last_offset, max_timestamp, last_offset, last_offset + 1, verify)
        except OSError as exc:
            raise KafkaStorageError(
                f"{self.name}: append at offset {offset} to {segment.log_path} failed: {exc}"
            ) from exc
        self._log_end_offset = last_offset + 1
        self._after_append(now_ms)
        # `_restamped(header, offset, leader_epoch)`, inlined (see append_as_leader).
        stamped = _new_tuple(BatchHeader, (offset, header[1], leader_epoch, *header[3:]))
        # (tuple.__new__ skips the named tuples' Python-level constructors.)
        return _new_tuple(
            LogAppendInfo,
            (
                offset,
                last_offset,
                max_timestamp,
                last_offset,
                -1,
                self._log_start_offset,
                last_offset + 1 - offset,
                len(data),
                leader_epoch,
                (stamped,),
            ),
        )

    def _validate_leader_batches(
        self, data: Unchangeable, allow_control: bool
    ) -> list[tuple[int, BatchHeader]]:
        size = len(data)
        if not size:
            raise InvalidRecordError(f"{self.name}: an append needs at least one batch")
        self._check_append_size(size)
        max_message_bytes = self.config.max_message_bytes
        headers: list[tuple[int, BatchHeader]] = []
        position = 0
        while position < size:
            try:
                header = validate_batch(data, position, where=self.name)
            except (CorruptRecordError, InvalidRecordError):
                self._raise_naming_batch("append", data, headers, position)
            batch_size = header.batch_length + LOG_OVERHEAD
            self._check_leader_batch(header, headers, position, allow_control, max_message_bytes)
            self._check_records_fit(header, headers, position)
            headers.append((position, header))
            position += batch_size
        if len(headers) > 1 and sum(h.records_count for _, h in headers) > INT32_MAX:
            # No segment could hold them: offsets are stored relative to a segment's base
            # offset in 32 bits (a single batch is bounded by its own count field).
            raise InvalidRecordError(
                f"{self.name}: an append of {len(headers)} batches claims more than {INT32_MAX} "
                "records"
            )
        return headers

    def _check_leader_epoch(self, leader_epoch: int) -> int | None:
        """Refuse a leader epoch older than the log's latest; return the latest (or None)."""
        latest = self.leader_epoch_cache.latest_epoch
        if latest is not None and leader_epoch < latest:
            raise FencedLeaderEpochError(
                f"{self.name}: leader epoch {leader_epoch} is older than the log's latest "
                f"leader epoch {latest}"
            )
        return latest

    def _check_append_size(self, size: int) -> None:
        """A whole append must fit in one segment (Kafka's RecordBatchTooLargeException)."""
        if size > self.config.segment_bytes:
            raise RecordBatchTooLargeError(
                f"{self.name}: append of {size} bytes exceeds segment.bytes "
                f"{self.config.segment_bytes}"
            )

    def _check_leader_batch(
        self,
        header: BatchHeader,
        headers: Sized,
        position: int,
        allow_control: bool,
        max_message_bytes: int,
    ) -> None:
        """The rules a client batch must follow beyond being a valid batch
        (docs/design/storage.md#leader-validation-on-produce)."""
        if header.base_offset != 0:
            raise InvalidRecordError(
                f"{self._where('append', headers, position)}: base offset must be 0, got "
                f"{header.base_offset}"
            )
        if header.attributes & CONTROL_FLAG_MASK and not allow_control:
            raise InvalidRecordError(
                f"{self._where('append', headers, position)}: clients may not append "
                "control batches"
            )
        # A coordinator's batch (a marker, a transactional offset commit) carries no sequence
        # (Kafka checks it of clients' batches only).
        if header.producer_id >= 0 and header.base_sequence < 0 and not allow_control:
            raise InvalidRecordError(
                f"{self._where('append', headers, position)}: idempotent batch (producer id "
                f"{header.producer_id}) has base sequence {header.base_sequence}"
            )
        batch_size = header.batch_length + LOG_OVERHEAD
        if batch_size > max_message_bytes:
            raise MessageSizeTooLargeError(
                f"{self._where('append', headers, position)}: batch of {batch_size} bytes "
                f"exceeds max.message.bytes {max_message_bytes}"
            )

    def _check_records_fit(self, header: BatchHeader, headers: Sized, position: int) -> None:
        """Records are not decoded here, but an uncompressed client batch that claims more
        records than its bytes can hold would take that many offsets and fail every reader.
        After the CRC check (a flipped count is corruption first)."""
        records_bytes = header.batch_length + LOG_OVERHEAD - RECORD_BATCH_OVERHEAD
        if (
            not header.attributes & COMPRESSION_CODEC_MASK
            and records_bytes < MIN_RECORD_BYTES * header.records_count
        ):
            raise InvalidRecordError(
                f"{self._where('append', headers, position)}: claims {header.records_count} "
                f"records in {records_bytes} bytes of uncompressed records (each takes at "
                f"least {MIN_RECORD_BYTES})"
            )

    def _where(self, kind: str, headers: Sized, position: int) -> str:
        """Names a batch of an append in error messages."""
        return f"{self.name} {kind}, batch {len(headers)} at byte {position}"

    def _raise_naming_batch(
        self, kind: str, data: Unchangeable, headers: Sized, position: int
    ) -> NoReturn:
        """Check a batch that just failed validation again, to raise with the batch named.

        Appends validate with only the log's name, because formatting the batch's name costs
        about as much as checking a small batch; the full name is made only for a bad one.
        """
        try:
            validate_batch(data, position, where=self._where(kind, headers, position))
        except (CorruptRecordError, InvalidRecordError) as exc:
            raise exc from None
        raise AssertionError(f"{self.name}: batch at byte {position} failed only once")

    def _cleaned_batch(self, data: Unchangeable, headers: Sized, position: int) -> BatchHeader:
        """The header of a batch at `position` that failed the strict check: valid as a batch
        the log cleaner rewrote (fewer records than offsets, or none) in a compacted log, else
        the strict check's error, the batch named."""
        if self.config.compacts:
            try:
                return validate_batch(data, position, where=self.name, sparse=True)
            except (CorruptRecordError, InvalidRecordError):
                pass
        self._raise_naming_batch("follower append", data, headers, position)

    def append_as_follower(
        self, batches_bytes: bytes | bytearray | memoryview, *, leader_epoch: int | None = None
    ) -> LogAppendInfo:
        """Append a leader's batches verbatim; they must start exactly at the log end offset
        and follow each other without gaps, except in a compacted log, whose leader's cleaner
        leaves gaps: there they need only start at or past it and increase.

        The one exception (Kafka's): an empty log whose start offset falls inside the first
        batch (DeleteRecords landed mid-batch on the leader) restarts at that batch's base.
        With `leader_epoch`, the epoch of the leader that sent them, no batch may carry a
        later one (no leader holds a batch of an epoch after its own): the batch's epoch
        field is outside its CRC, and a bit flipped there on the way would otherwise be
        stored and enter the leader-epoch cache.
        """
        with self._lock:
            self._check_open()
            buf = _immutable(batches_bytes)
            headers = self._validate_follower_batches(buf, leader_epoch)
            first = headers[0].base_offset
            # A compacted leader's log may have no batch at the follower's log end any more
            # (cleaned away): its next batch starts past it, and the offsets between stay
            # unused, as on the leader (Kafka's rule for every log).
            if first != self._log_end_offset and not (
                first > self._log_end_offset and self.config.compacts
            ):
                empty = self._log_end_offset == self._log_start_offset
                if empty and first < self._log_end_offset <= headers[-1].last_offset:
                    self._truncate_fully_and_start_at(first)
                    # A truncation like any other: the log manager rewrites the recovery points.
                    self._notify_truncated()
                else:
                    raise UnexpectedAppendOffsetError(
                        f"{self.name}: follower append starts at offset {first} but the log end "
                        f"offset is {self._log_end_offset}"
                    )
            latest = self.leader_epoch_cache.latest_epoch
            for header in headers:
                epoch = header.partition_leader_epoch
                if epoch >= 0 and (latest is None or epoch != latest):
                    self.leader_epoch_cache.assign(epoch, header.base_offset)
                    latest = epoch
            return self._append_validated(memoryview(buf), headers, None, self._clock(), -1)

    def _validate_follower_batches(
        self, buf: Unchangeable, leader_epoch: int | None
    ) -> list[BatchHeader]:
        if not buf:
            raise InvalidRecordError(f"{self.name}: a follower append needs at least one batch")
        headers: list[BatchHeader] = []
        position = 0
        expected: int | None = None
        epoch_floor = -1
        while position < len(buf):
            try:
                header = validate_batch(buf, position, where=self.name)
            except (CorruptRecordError, InvalidRecordError):
                header = self._cleaned_batch(buf, headers, position)
            # A compacted leader's cleaned batches skip the offsets it removed (checked only
            # on a mismatch: the usual append pays nothing for it).
            if (
                expected is not None
                and header.base_offset != expected
                and not (header.base_offset > expected and self.config.compacts)
            ):
                raise OffsetsOutOfOrderError(
                    f"{self._where('follower append', headers, position)}: base offset "
                    f"{header.base_offset} does not follow {expected - 1}"
                )
            if header.partition_leader_epoch < epoch_floor:
                raise InvalidRecordError(
                    f"{self._where('follower append', headers, position)}: leader epoch "
                    f"{header.partition_leader_epoch} after {epoch_floor}"
                )
            if leader_epoch is not None and header.partition_leader_epoch > leader_epoch:
                raise InvalidRecordError(
                    f"{self._where('follower append', headers, position)}: leader epoch "
                    f"{header.partition_leader_epoch} after the leader's own, {leader_epoch}"
                )
            epoch_floor = header.partition_leader_epoch
            expected = header.base_offset + header.last_offset_delta + 1
            headers.append(header)
            position += header.batch_length + LOG_OVERHEAD
        return headers

    def _append_validated(
        self,
        view: memoryview,
        headers: list[BatchHeader],
        prefixes: list[bytes] | None,
        now_ms: int,
        append_time: int,
    ) -> LogAppendInfo:
        """Write validated, stamped batches, rolling segments as needed; update offsets.

        `view` holds the batches back to back. With `prefixes`, batch i is written as
        prefixes[i] followed by its bytes from byte 16 on (the leader's stamped header start);
        without, `view` is written as it is.
        """
        last = headers[-1]
        if len(headers) == 1:
            # The usual append, one batch: one group, no grouping loop. (It fits a segment:
            # appends larger than segment.bytes were rejected.)
            size = last.batch_length + LOG_OVERHEAD
            last_offset = last.base_offset + last.last_offset_delta
            parts: list[Buffer] = [view]
            if prefixes is not None:
                parts = [prefixes[0], view[_STAMPED_PREFIX.size : size]]
            groups = [(1, size, last.max_timestamp, last_offset, parts)]
        else:
            groups = self._group_by_segment(view, headers, prefixes)
        max_timestamp, offset_of_max = -1, -1
        index = 0
        try:
            for end, group_bytes, group_max_ts, group_max_offset, parts in groups:
                group_last = headers[end - 1]
                last_offset = group_last.base_offset + group_last.last_offset_delta
                segment = self.active_segment
                if segment.should_roll(
                    group_bytes, group_max_ts, last_offset, now_ms, self._roll_jitter_ms
                ):
                    segment = self._roll(headers[index].base_offset)
                # The segment indexes batch by batch, as Kafka's does (None: one batch).
                if end - index == 1:
                    batches = None
                else:
                    batches = headers if end - index == len(headers) else headers[index:end]
                segment.append(
                    parts,
                    last_offset,
                    group_max_ts,
                    group_max_offset,
                    last_offset + 1,
                    None,
                    batches,
                )
                self._log_end_offset = last_offset + 1
                if group_max_ts > max_timestamp:
                    max_timestamp, offset_of_max = group_max_ts, group_max_offset
                index = end
        except OSError as exc:
            raise KafkaStorageError(
                f"{self.name}: append at offset {self._log_end_offset} to "
                f"{self.active_segment.log_path} failed: {exc}"
            ) from exc
        self._after_append(now_ms)
        first_offset = headers[0].base_offset
        next_offset = last.base_offset + last.last_offset_delta + 1
        return LogAppendInfo(
            first_offset,
            next_offset - 1,
            max_timestamp,
            offset_of_max,
            append_time,
            self._log_start_offset,
            next_offset - first_offset,
            len(view),
            last.partition_leader_epoch,
            tuple(headers),
        )

    def _group_by_segment(
        self, view: memoryview, headers: list[BatchHeader], prefixes: list[bytes] | None
    ) -> list[tuple[int, int, int, int, list[Buffer]]]:
        """Split an append of several batches into runs that each fit in one segment.

        Each run is (index after its last batch, bytes, max timestamp, offset of the max
        timestamp, the buffers to write); every run has at least one batch.
        """
        segment_bytes = self.config.segment_bytes
        count = len(headers)
        groups: list[tuple[int, int, int, int, list[Buffer]]] = []
        start = 0  # byte position of the current group in view
        index = 0
        while index < count:
            group_end = index
            group_bytes = 0
            group_max_ts, group_max_offset = -1, -1
            parts: list[Buffer] = []
            while group_end < count:
                header = headers[group_end]
                size = header.batch_length + LOG_OVERHEAD
                if group_end > index and group_bytes + size > segment_bytes:
                    break
                if prefixes is not None:
                    position = start + group_bytes
                    parts.append(prefixes[group_end])
                    parts.append(view[position + _STAMPED_PREFIX.size : position + size])
                group_bytes += size
                if header.max_timestamp > group_max_ts:
                    group_max_ts = header.max_timestamp
                    group_max_offset = header.base_offset + header.last_offset_delta
                group_end += 1
            if prefixes is None:
                parts.append(view[start : start + group_bytes])
            groups.append((group_end, group_bytes, group_max_ts, group_max_offset, parts))
            start += group_bytes
            index = group_end
        return groups

    def _after_append(self, now_ms: int) -> None:
        """Apply the flush policy (docs/design/storage.md#flush-and-defaults: flush.messages,
        flush.ms)."""
        if self.config.flush_each_append and self._roll_flush_pending > self._recovery_point:
            # Rolled segments are not synced yet (flush.each.append was turned on after an
            # asynchronous roll): sync them with the active segment.
            self._flush(self._log_end_offset)
        elif self.config.flush_each_append:
            try:
                self.active_segment.log_file.fdatasync()
            except OSError as exc:
                raise KafkaStorageError(
                    f"{self.name}: fsync of the active segment failed: {exc}"
                ) from exc
            # Everything before the active segment was flushed when it rolled.
            if self._recovery_point != self._log_end_offset:
                self._recovery_point = self._log_end_offset
                self._offset_moves.recovery_points = True
        elif (
            self._log_end_offset - self._recovery_point >= self.config.flush_interval_messages
            or now_ms - self._last_flush_ms >= self.config.flush_interval_ms
        ):
            self._flush(self._log_end_offset)

    def _roll(self, new_base_offset: int) -> LogSegment:
        """Start a new active segment at `new_base_offset` and flush the old ones."""
        new_base = max(new_base_offset, self._log_end_offset)
        old = self.active_segment
        old.on_become_inactive()
        if old.size == 0 and old.base_offset == new_base:
            return old  # rolling an empty segment at the same base would change nothing
        segment = LogSegment(
            self.directory, new_base, self.config, self._fs, self._clock(), create=True
        )
        segment.offset_index.reset()
        segment.time_index.reset()
        self._active = None
        self._segments[new_base] = segment
        self._roll_jitter_ms = _random_roll_jitter(self.config, self._rng)
        if (
            self._async_roll_flush
            and new_base > self._recovery_point
            and not self.config.flush_each_append
        ):
            # Kafka's way: the old segments are synced by `flush_rolled_segments`, off the
            # appending thread; until it returns the recovery point stays where it is, so a
            # crash meanwhile rescans them (docs/design/storage.md#crash-scenarios, S8 item 4).
            self._roll_flush_pending = max(self._roll_flush_pending, new_base)
            if self._on_roll_flush_pending is not None:
                self._on_roll_flush_pending(self)
            return segment
        # A standalone log flushes the old segments here, before the next append, so the
        # recovery point moves to the new base at once.
        if new_base <= self._recovery_point:
            # `_flush` has nothing to do then (flush.each.append synced every append, or a
            # truncation cut the log back to this base), but only the .log was synced: the old
            # segment's index entries, appended or cut in memory, must reach the disk too, or a
            # crash leaves its indexes missing or stale below the recovery point, where
            # recovery trusts them.
            old.flush()
        self._flush(new_base)
        self._fs.fsync_dir(self.directory)
        if self._persist_standalone_state is not None:
            self._persist_standalone_state(self, False)
        return segment

    def update_config(self, config: LogConfig) -> bool:
        """Use `config` from now on (a topic config change, or a recovered log getting its
        topic's config); returns whether anything changed.

        As in Kafka, existing segments keep their index files as they are: the new sizes,
        limits and retention apply to the next append, roll and retention pass.
        """
        with self._lock:
            if config == self.config:
                return False
            self.config = config
            for segment in self._segments.values():
                segment.config = config
            self._roll_jitter_ms = _random_roll_jitter(config, self._rng)
            return True

    def roll(self) -> LogSegment:
        """Force a new active segment at the log end offset (tests, operators)."""
        with self._lock:
            self._check_open()
            return self._roll(self._log_end_offset)

    # --- reads --------------------------------------------------------------------------------

    def read(
        self,
        start_offset: int,
        max_bytes: int = 1048576,
        upper_bound_offset: int | None = None,
        *,
        min_one_message: bool = True,
    ) -> bytes:
        """Raw batches from the batch holding `start_offset`, below `upper_bound_offset`.

        At most `max_bytes` of whole batches, except that the first batch is returned whole when
        `min_one_message` (Kafka's KIP-74) even if it is larger. Empty when `start_offset` is at
        or above the bound. OffsetOutOfRangeError outside [log_start_offset, log_end_offset].
        """
        data = self.read_or_region(
            start_offset, max_bytes, upper_bound_offset, min_one_message=min_one_message
        )
        assert isinstance(data, bytes)
        return data

    def read_or_region(
        self,
        start_offset: int,
        max_bytes: int = 1048576,
        upper_bound_offset: int | None = None,
        *,
        min_one_message: bool = True,
        region_min_bytes: int | None = None,
    ) -> bytes | Region:
        """`read`, but with `region_min_bytes` batches of that many bytes or more are left in
        their segment file: a `Region` (never an empty one) for a writer to send
        (`file_region`)."""
        with self._lock:
            if self._closed:  # (the call only to raise, as in append_as_leader)
                self._check_open()
            end = self._log_end_offset
            if start_offset < self._log_start_offset or start_offset > end:
                raise OffsetOutOfRangeError(
                    f"{self.name}: offset {start_offset} is outside the log's range "
                    f"[{self._log_start_offset}, {end}]"
                )
            bound = end if upper_bound_offset is None else min(upper_bound_offset, end)
            if start_offset >= bound or max_bytes < 0:
                return b""
            try:
                return self._read_bounded(
                    start_offset, max_bytes, bound, min_one_message, region_min_bytes
                )
            except OSError as exc:
                raise KafkaStorageError(
                    f"{self.name}: read at offset {start_offset} failed: {exc}"
                ) from exc

    def _read_bounded(
        self,
        start_offset: int,
        max_bytes: int,
        bound: int,
        min_one_message: bool,
        region_min_bytes: int | None,
    ) -> bytes | Region:
        bound_base, bound_position = self._bound_position(bound)
        active = self._active if self._active is not None else self.active_segment
        if start_offset >= active.base_offset:
            # The usual read, near the end: the active segment, found without a lookup (the
            # sorted-dict lookups below are Python code costing a few µs per read). The bound
            # lies in it too, as start_offset < bound.
            if active.base_offset != bound_base:  # pragma: no cover - see above
                return b""
            result = active.read(
                start_offset,
                max_bytes,
                bound_position,
                min_one_message=min_one_message,
                region_min_bytes=region_min_bytes,
            )
            return b"" if result is None else result[0]
        segments = self._segments
        # From the segment holding start_offset (start_offset >= log start >= first base).
        # Indexing by position: two `irange` iterators cost a few µs per read.
        index = max(segments.bisect_right(start_offset) - 1, 0)
        count = len(segments)
        while index < count:
            base, segment = segments.peekitem(index)
            assert isinstance(segment, LogSegment)
            if base > bound_base:
                break
            max_position = bound_position if base == bound_base else None
            result = segment.read(
                start_offset,
                max_bytes,
                max_position,
                min_one_message=min_one_message,
                region_min_bytes=region_min_bytes,
            )
            if result is not None:
                return result[0]
            index += 1  # start_offset lies past this segment's last batch
        return b""

    def _bound_position(self, bound: int) -> tuple[int, int]:
        """(segment base, byte position) where data at or above offset `bound` begins."""
        cached = self._bound_cache
        if cached is not None and cached[0] == bound:
            return cached[1], cached[2]
        if bound == self._log_end_offset:
            segment = self.active_segment
            result = (segment.base_offset, segment.size)
        else:
            base = next(self._segments.irange(maximum=bound, reverse=True))
            segment = self._segments[base]
            found = segment.translate_offset(bound)
            result = (base, found[0] if found is not None else segment.size)
            self._bound_cache = (bound, result[0], result[1])
        return result

    def read_batches(
        self, start_offset: int, upper_bound_offset: int | None = None, max_bytes: int = 1048576
    ) -> Iterator[tuple[int, bytes]]:
        """Yield (base offset, batch bytes) from `start_offset` to the bound, batch by batch,
        each one's CRC checked.

        A convenience for tools (dump-log, tests, the Spark reader); the broker uses `read`.
        """

        def validated(data: bytes, position: int) -> BatchHeader:
            base, _ = read_frame(data, position)
            return validate_batch(
                data, position, where=f"{self.name} offset {base}", sparse=self.config.compacts
            )

        for data, position, size, header in self._walk(
            start_offset, upper_bound_offset, max_bytes, validated
        ):
            yield header.base_offset, data[position : position + size]

    def batch_headers(
        self, start_offset: int, upper_bound_offset: int | None = None
    ) -> Iterator[BatchHeader]:
        """The headers of the batches from the one holding `start_offset` up to the bound
        (default: the LEO), read `HEADER_WALK_CHUNK_BYTES` at a time; no CRC is computed and
        no record decoded (a producer-state rebuild)."""
        for _, _, _, header in self._walk(
            start_offset, upper_bound_offset, HEADER_WALK_CHUNK_BYTES, read_header
        ):
            yield header

    def batch_headers_and_markers(
        self, start_offset: int, upper_bound_offset: int | None = None
    ) -> Iterator[tuple[BatchHeader, EndTxnMarker | None]]:
        """`batch_headers`, each with its end-transaction marker when it is a control batch
        holding one (its one record decoded, `batch_marker`), else None."""
        for data, position, _, header in self._walk(
            start_offset, upper_bound_offset, HEADER_WALK_CHUNK_BYTES, read_header
        ):
            if header.is_control and header.records_count:
                yield header, batch_marker(data, position, header, self.name)
            else:
                yield header, None

    # --- aborted transactions -----------------------------------------------------------------

    def append_aborted_transactions(self, entries: Iterable[AbortedTransaction]) -> None:
        """Add ABORT markers' entries, in marker order, to the `.txnindex` of the segments
        holding the markers (`transaction_index`)."""
        with self._lock:
            self._check_open()
            segments = self._segments
            try:
                for entry in entries:
                    base = next(segments.irange(maximum=entry.last_offset, reverse=True))
                    segments[base].txn_index.append(entry)
            except OSError as exc:
                raise KafkaStorageError(
                    f"{self.name}: aborted transaction index not written: {exc}"
                ) from exc

    def collect_aborted_transactions(
        self, fetch_offset: int, upper_bound_offset: int
    ) -> list[AbortedTransaction]:
        """The aborted transactions a read_committed fetch of [fetch_offset,
        upper_bound_offset) must be told of: the segments' indexes from the one holding
        `fetch_offset` on, until one says no later one can hold more (Kafka's
        `collectAbortedTransactions`)."""
        with self._lock:
            self._check_open()
            segments = self._segments
            first = next(segments.irange(maximum=fetch_offset, reverse=True), None)
            found: list[AbortedTransaction] = []
            try:
                for base in segments.irange(minimum=first):
                    result = segments[base].txn_index.collect(fetch_offset, upper_bound_offset)
                    found.extend(result.found)
                    if result.complete:
                        break
            except OSError as exc:
                raise KafkaStorageError(
                    f"{self.name}: aborted transaction index not read: {exc}"
                ) from exc
            return found

    def segment_base_of(self, offset: int) -> int:
        """The base offset of the segment holding `offset` (the first segment's, below it)."""
        with self._lock:
            segments = self._segments
            return next(segments.irange(maximum=offset, reverse=True), segments.peekitem(0)[0])

    def rebuild_aborted_transactions(
        self, from_offset: int, entries: Iterable[AbortedTransaction]
    ) -> None:
        """Replace the `.txnindex` of every segment from the one holding `from_offset` with
        `entries` (those of its markers, from a replay of the log: recovery)."""
        with self._lock:
            self._check_open()
            segments = self._segments
            first = next(segments.irange(maximum=from_offset, reverse=True), None)
            for base in segments.irange(minimum=first):
                segments[base].txn_index.reset()
            self.append_aborted_transactions(
                entry for entry in entries if first is None or entry.last_offset >= first
            )
            self.txn_index_rebuild_from = None

    def _walk(
        self,
        start_offset: int,
        upper_bound_offset: int | None,
        chunk_bytes: int,
        header_of: Callable[[bytes, int], BatchHeader],
    ) -> Iterator[tuple[bytes, int, int, BatchHeader]]:
        """(chunk, position, size, header) of every batch from the one holding `start_offset`
        to the bound, reading `chunk_bytes` at a time (at least one batch per read)."""
        offset = start_offset
        bound = self._log_end_offset if upper_bound_offset is None else upper_bound_offset
        while offset < bound:
            data = self.read(offset, chunk_bytes, bound)
            if not data:
                return
            next_offset = offset
            for position, size in iter_frames(data):
                header = header_of(data, position)
                yield data, position, size, header
                next_offset = header.next_offset
            if next_offset <= offset:
                return
            offset = next_offset

    def max_timestamp_and_offset(self, upper_bound_offset: int) -> tuple[int, int] | None:
        """(largest timestamp, offset of the first record carrying it) among the batches
        holding an offset in [log start, `upper_bound_offset`), or None when none has a
        timestamp: ListOffsets' MAX_TIMESTAMP (KIP-734, with Kafka 3.8's record offset,
        KAFKA-16310). Each segment answers from its tracked maximum and its time index, so only
        the batches after the last time-index entry below the bound, and those of a segment cut
        by the log start, are read; then the one batch found is decoded. A batch straddling the
        log start counts by its header; if its largest timestamp lies below the start, the
        answer is its first offset at or above the start."""
        with self._lock:
            self._check_open()
            start = self._log_start_offset
            first = next(self._segments.irange(maximum=start, reverse=True), None)
            best_ts, best_offset = -1, -1
            for base in self._segments.irange(minimum=first, maximum=upper_bound_offset - 1):
                segment = self._segments[base]
                if segment.size == 0:
                    continue
                ts, offset = segment.max_timestamp_between(start, upper_bound_offset)
                if ts > best_ts:
                    best_ts, best_offset = ts, offset
            if best_offset < 0:
                return None
            return best_ts, self._first_record_at(best_ts, best_offset, start)

    def _first_record_at(self, timestamp: int, offset: int, floor: int) -> int:
        """The offset of the first record at or above `floor` with `timestamp` in the batch
        holding `offset` (decoded), else the batch's first offset at or above `floor`."""
        from replog.record.batch import RecordBatch

        data = self.read(offset, 1)  # the batch holding it, whole (min_one_message)
        batch = RecordBatch.parse(
            data, where=f"{self.name} at offset {offset}", sparse=self.config.compacts
        )
        for record in batch.records():
            if record.offset >= floor and record.timestamp == timestamp:
                return record.offset
        return max(floor, batch.base_offset)

    def offsets_for_times(self, timestamp_ms: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the earliest record with timestamp >= `timestamp_ms`, or None.

        Decodes the records of one batch: this serves ListOffsets, not the data path.
        """
        from replog.record.batch import RecordBatch

        with self._lock:
            self._check_open()
            for segment in self._segments.values():
                if segment.size == 0 or segment.largest_timestamp() < timestamp_ms:
                    continue
                segment.ensure_indexes()
                _, indexed_offset = segment.time_index.lookup(timestamp_ms)
                # The time index only says where to start reading: its offset is the last of
                # the batch holding a timestamp, and records before it in that batch may
                # carry the timestamp too (all of them under LogAppendTime), or a larger one.
                # Records are filtered by the log start alone, as Kafka's search is.
                floor = max(self._log_start_offset, segment.base_offset)
                _, position = segment.offset_index.lookup(max(indexed_offset, floor))
                for batch_position, header in segment._walk_headers(position):
                    if header.max_timestamp < timestamp_ms or header.last_offset < floor:
                        continue
                    data = segment.log_file.read_fully(batch_position, header.size_in_bytes)
                    for record in RecordBatch.parse(
                        data,
                        where=f"{segment.log_path}@{batch_position}",
                        sparse=self.config.compacts,  # a cleaned batch has gaps
                    ).records():
                        if record.timestamp >= timestamp_ms and record.offset >= floor:
                            return record.offset, record.timestamp
            return None

    # --- truncation ---------------------------------------------------------------------------

    def truncate_to(self, target_offset: int) -> bool:
        """Remove every offset >= `target_offset`. Returns False when there was nothing to cut.

        A batch straddling the target goes whole, so the log end offset may end below it.
        """
        if target_offset < 0:
            raise ValueError(f"{self.name}: cannot truncate to negative offset {target_offset}")
        with self._lock:
            self._check_open()
            if target_offset >= self._log_end_offset:
                # Drop a leader epoch a leader recorded before it wrote anything.
                self.leader_epoch_cache.truncate_from_end(self._log_end_offset)
                return False
            log.info("%s: truncating from %d to %d", self.name, self._log_end_offset, target_offset)
            if target_offset < self._log_start_offset:
                self._truncate_fully_and_start_at(target_offset)
            else:
                self._truncate_segments_to(target_offset)
            self._notify_truncated()
            return True

    def _truncate_segments_to(self, target_offset: int) -> None:
        self._cancel_pending_swap()  # truncations are rare: any one cancels it
        self._active = None
        try:
            for base in list(self._segments.irange(minimum=target_offset + 1)):
                self._segments.pop(base).delete()
            floor_base = next(self._segments.irange(maximum=target_offset, reverse=True))
            segment: LogSegment = self._segments[floor_base]
            if floor_base == target_offset and len(self._segments) > 1:
                # The whole floor segment lies at/above the target: drop it, keep its predecessor.
                self._segments.pop(floor_base).delete()
                segment = self.active_segment
            segment.truncate_to(target_offset)
        except OSError as exc:
            raise KafkaStorageError(
                f"{self.name}: truncation to {target_offset} failed: {exc}"
            ) from exc
        self._log_end_offset = segment.next_offset
        self._log_start_offset = min(self._log_start_offset, self._log_end_offset)
        self.leader_epoch_cache.truncate_from_end(self._log_end_offset)
        self._high_watermark = min(self._high_watermark, self._log_end_offset)
        self._recovery_point = min(self._recovery_point, self._log_end_offset)
        self._offset_moves.moved_all()
        self._bound_cache = None
        self._truncations += 1
        # Only segments below the active one can still wait for a roll flush.
        self._roll_flush_pending = min(self._roll_flush_pending, self.active_segment.base_offset)

    def truncate_fully_and_start_at(self, new_offset: int) -> None:
        """Delete everything and start an empty log at `new_offset` (a follower far behind)."""
        if new_offset < 0:
            raise ValueError(f"{self.name}: cannot start at negative offset {new_offset}")
        with self._lock:
            self._check_open()
            self._truncate_fully_and_start_at(new_offset)
            self._notify_truncated()

    def _truncate_fully_and_start_at(self, new_offset: int) -> None:
        log.info("%s: deleting all segments and starting at offset %d", self.name, new_offset)
        self._cancel_pending_swap()
        try:
            for segment in list(self._segments.values()):
                segment.delete()
            self._active = None
            self._segments.clear()
            segment = LogSegment(
                self.directory, new_offset, self.config, self._fs, self._clock(), create=True
            )
            segment.offset_index.reset()
            segment.time_index.reset()
            self._segments[new_offset] = segment
            self._roll_jitter_ms = _random_roll_jitter(self.config, self._rng)
            self._fs.fsync_dir(self.directory)
        except OSError as exc:
            raise KafkaStorageError(
                f"{self.name}: restart at offset {new_offset} failed: {exc}"
            ) from exc
        self.leader_epoch_cache.clear_and_flush()
        self._log_start_offset = self._log_end_offset = new_offset
        self._high_watermark = self._recovery_point = new_offset
        self._offset_moves.moved_all()
        self._bound_cache = None
        self._truncations += 1
        self._roll_flush_pending = 0

    def _notify_truncated(self) -> None:
        if self._on_truncate is not None:
            self._on_truncate(self)
        if self._persist_standalone_state is not None:
            self._persist_standalone_state(self, False)

    # --- log start offset and retention -------------------------------------------------------

    def increment_log_start_offset(
        self, new_log_start_offset: int, reason: str = "delete records"
    ) -> bool:
        """Raise the log start offset (DeleteRecords, or a follower copying its leader's).

        Must not pass the high watermark. Whole segments below it are deleted by the next
        retention pass. Returns whether anything changed.
        """
        with self._lock:
            self._check_open()
            if new_log_start_offset > self._high_watermark:
                raise OffsetOutOfRangeError(
                    f"{self.name}: cannot move the log start offset to {new_log_start_offset}, "
                    f"beyond the high watermark {self._high_watermark} ({reason})"
                )
            if new_log_start_offset <= self._log_start_offset:
                return False
            log.info(
                "%s: log start offset %d -> %d (%s)",
                self.name,
                self._log_start_offset,
                new_log_start_offset,
                reason,
            )
            self._set_log_start_offset(new_log_start_offset)
            if self._persist_standalone_state is not None:
                self._persist_standalone_state(self, False)
            return True

    def _set_log_start_offset(self, value: int) -> None:
        self._log_start_offset = value
        self._high_watermark = max(self._high_watermark, value)
        self._recovery_point = max(self._recovery_point, min(value, self._log_end_offset))
        self._offset_moves.moved_all()
        self.leader_epoch_cache.truncate_from_start(value)

    def delete_old_segments(self, now_ms: int | None = None) -> int:
        """One retention pass (docs/design/storage.md#retention); returns how many segments it
        deleted.

        Order: segments wholly below the log start offset, then `retention.bytes`, then
        `retention.ms`. A segment goes only if the high watermark has passed its end, and the
        active segment only when it is not empty (a new empty one replaces it).
        """
        with self._lock:
            self._check_open()
            now = self._clock() if now_ms is None else now_ms
            deleted = self._delete_segments_while(
                lambda segment, upper: upper <= self._log_start_offset, "below the log start offset"
            )
            if not self.config.deletes_by_retention:
                return deleted
            if self.config.retention_bytes >= 0:
                excess = [self.size_in_bytes - self.config.retention_bytes]

                def over_size(segment: LogSegment, upper: int) -> bool:
                    if excess[0] - segment.size >= 0:
                        excess[0] -= segment.size
                        return True
                    return False

                deleted += self._delete_segments_while(
                    over_size, f"retention.bytes {self.config.retention_bytes}"
                )
            if self.config.retention_ms >= 0:
                deleted += self._delete_segments_while(
                    lambda segment, upper: (
                        now - segment.largest_timestamp() > self.config.retention_ms
                    ),
                    f"retention.ms {self.config.retention_ms}",
                )
            return deleted

    def _delete_segments_while(
        self, predicate: Callable[[LogSegment, int], bool], reason: str
    ) -> int:
        doomed: list[LogSegment] = []
        segments = list(self._segments.values())
        for i, segment in enumerate(segments):
            upper = segments[i + 1].base_offset if i + 1 < len(segments) else self._log_end_offset
            if self._high_watermark < upper or (i + 1 == len(segments) and segment.size == 0):
                break
            if not predicate(segment, upper):
                break
            doomed.append(segment)
        if not doomed:
            return 0
        self._cancel_pending_swap(doomed[-1].base_offset)
        if len(doomed) == len(segments):
            self._roll(self._log_end_offset)
        for segment in doomed:
            log.info("%s: deleting segment %s (%s)", self.name, segment.log_path, reason)
            self._active = None
            del self._segments[segment.base_offset]
            try:
                segment.delete()
            except OSError as exc:
                raise KafkaStorageError(
                    f"{self.name}: deleting {segment.log_path} failed: {exc}"
                ) from exc
        first_base = self._segments.peekitem(0)[0]
        if first_base > self._log_start_offset:
            self._set_log_start_offset(first_base)
        self._bound_cache = None
        if self._persist_standalone_state is not None:
            self._persist_standalone_state(self, False)
        return len(doomed)

    # --- cleaning ------------------------------------------------------------------------------

    @property
    def file_system(self) -> FileSystem:
        return self._fs

    @property
    def truncation_count(self) -> int:
        """How many truncations the log has had since it was opened: a cleaner compares it
        before and after a pass (`replace_with_cleaned`)."""
        return self._truncations

    def replace_with_cleaned(
        self, groups: Sequence[tuple[list[LogSegment], str]], *, truncation_count: int
    ) -> list[LogSegment] | None:
        """Swap each group's synced cleaned segment, whose log file is its `str`
        (`segment_swap.cleaned_paths` of its first replaced base) with its synced indexes
        beside it, in for its replaced segments, consecutive non-active segments of this log
        (the groups disjoint, in offset order), all in `segment_swap`'s steps at once; returns
        the new segments. Under the log's lock only renames and the segment map change; the
        directory's two syncs (one each for all the groups) and the removal of the replaced
        files run without it. When the log changed since the cleaner read them
        (`truncation_count` is no longer the log's, a group's segments are no longer
        consecutive non-active segments, or a truncation or a deletion cancelled the swap
        while the directory synced), no group is swapped, every group's cleaned files are
        removed and the answer is None: a pass is never applied to segments other than those
        it read."""
        if not groups:
            return []
        cleaned = tuple(path for _, path in groups)
        directory = os.path.dirname(cleaned[0])
        with self._lock:
            if (
                self._closed
                or truncation_count != self._truncations
                or not all(self._still_consecutive(replaced) for replaced, _ in groups)
            ):
                for path in cleaned:
                    discard_cleaned(self._fs, path)
                return None
            try:
                for path in cleaned:
                    mark_swap(self._fs, path)
            except OSError as exc:
                raise KafkaStorageError(
                    f"{self.name}: swapping in the cleaned segments {list(cleaned)} failed: {exc}"
                ) from exc
            self._pending_swap = (cleaned, groups[0][0][0].base_offset)
        try:
            self._fs.fsync_dir(directory)  # the decisions durable (segment_swap's Rules)
        except OSError as exc:
            raise KafkaStorageError(
                f"{self.name}: syncing {directory} to swap in {list(cleaned)} failed: {exc}"
            ) from exc
        with self._lock:
            if self._pending_swap is None or self._pending_swap[0] != cleaned:
                return None  # cancelled (`_cancel_pending_swap`)
            if self._closed:
                self._pending_swap = None
                return None  # its `.swap` files stay: opening completes it (nothing changed)
            if truncation_count != self._truncations or not all(
                self._still_consecutive(replaced) for replaced, _ in groups
            ):
                self._cancel_pending_swap()  # every change cancels it first; never complete it
                return None
            self._pending_swap = None
            self._active = None
            self._bound_cache = None
            swapped: list[LogSegment] = []
            retired: list[str] = []
            try:
                for replaced, path in groups:
                    base = replaced[0].base_offset
                    carried = self._aborted_transactions_of(replaced)
                    retired += complete_swap(self._fs, path, replaced)
                    for segment in replaced:
                        del self._segments[segment.base_offset]
                    segment = LogSegment(
                        self.directory, base, self.config, self._fs, self._clock(), create=False
                    )
                    self._segments[base] = segment
                    # Kafka's cleaner keeps the entry of every ABORT marker it keeps.
                    for entry in carried:
                        found = segment.translate_offset(entry.last_offset)
                        if found is not None and found[1].base_offset == entry.last_offset:
                            segment.txn_index.append(entry)
                    swapped.append(segment)
            except OSError as exc:
                raise KafkaStorageError(
                    f"{self.name}: swapping in the cleaned segment {path} failed: {exc}"
                ) from exc
        try:
            finish_swap(self._fs, directory, retired)
            for segment in swapped:  # not under the lock: a sealed segment's, written once
                segment.flush_txn_index()
        except OSError as exc:
            raise KafkaStorageError(
                f"{self.name}: removing the segments the cleaned {list(cleaned)} replaced "
                f"failed: {exc}"
            ) from exc
        return swapped

    def _aborted_transactions_of(self, segments: list[LogSegment]) -> list[AbortedTransaction]:
        """The `.txnindex` entries of `segments`; an unreadable index gives none (its
        transactions' data went with this pass or an earlier one: only a later pass's
        knowledge of them is lost)."""
        entries: list[AbortedTransaction] = []
        for segment in segments:
            try:
                entries += segment.txn_index.entries()
            except (OSError, CorruptIndexError) as exc:
                log.warning(
                    "%s: aborted transactions not carried into the cleaned segment: %s",
                    self.name,
                    exc,
                )
        return entries

    def _cancel_pending_swap(self, highest_changed: int | None = None) -> None:
        """Cancel a cleaner's swap decided but not completed (`replace_with_cleaned`) before
        a truncation (`highest_changed` None) or a deletion of the segments up to the one at
        `highest_changed` changes what it replaces: a crash after that change must not
        complete the swap (`segment_swap`'s Rules). Called under the log's lock."""
        pending = self._pending_swap
        if pending is None or (highest_changed is not None and highest_changed < pending[1]):
            return
        cleaned = list(pending[0])
        self._pending_swap = None
        log.info("%s: cancelling the swap of the cleaned %s", self.name, cleaned)
        try:
            cancel_swaps(self._fs, cleaned)
        except OSError as exc:
            raise KafkaStorageError(
                f"{self.name}: cancelling the swap of the cleaned {cleaned} failed: {exc}"
            ) from exc

    def _still_consecutive(self, replaced: list[LogSegment]) -> bool:
        """Whether `replaced` are still, in order, consecutive non-active segments of the log."""
        if not replaced:
            return False
        bases = list(self._segments.irange(replaced[0].base_offset, replaced[-1].base_offset))
        if len(bases) != len(replaced) or bases[-1] == self._segments.peekitem(-1)[0]:
            return False
        return all(self._segments.get(segment.base_offset) is segment for segment in replaced)

    # --- flushing and closing -----------------------------------------------------------------

    def flush(self) -> None:
        """fsync everything appended so far and move the recovery point to the log end."""
        with self._lock:
            self._check_open()
            self._flush(self._log_end_offset)
            # Recovery rescans from the segment holding the recovery point, so the state file
            # needs rewriting only when that segment changed (rolls persist it too). Rewriting
            # it on every flush cost two more fsyncs per flush (the Raft log flushes per commit).
            if self._persist_standalone_state is not None:
                base = self._recovery_segment_base()
                if base != self._persisted_recovery_base:
                    self._persist_standalone_state(self, False)
                    self._persisted_recovery_base = base

    def report_offset_moves_to(self, moves: OffsetMoves) -> None:
        """Tell `moves` of every move of this log's high watermark, recovery point or log start
        offset from now on (offset_moves.py); a log manager's logs share one. A log joining at
        offsets other than 0 is a move of them (a new log's entries at 0 say nothing a
        checkpoint needs)."""
        self._offset_moves = moves
        if self._high_watermark:
            moves.high_watermarks = True
        if self._recovery_point:
            moves.recovery_points = True
        if self._log_start_offset:
            moves.log_start_offsets = True

    def enable_async_roll_flush(self, on_pending: Callable[[Log], None] | None = None) -> None:
        """Let rolls leave the old segments' fsync to `flush_rolled_segments` (a LogManager
        does this for its logs); `on_pending(log)` is called, under the log's lock, after a
        roll that left work for it. A standalone log never turns this on."""
        with self._lock:
            self._async_roll_flush = True
            self._on_roll_flush_pending = on_pending

    @property
    def has_pending_roll_flush(self) -> bool:
        """Whether a roll left old segments for `flush_rolled_segments` to sync."""
        return self._roll_flush_pending > self._recovery_point and not self._closed

    def flush_rolled_segments(self) -> bool:
        """Sync the segments rolls left unsynced and move the recovery point past them;
        returns whether it moved. Call it from a background thread: the fsyncs run without
        the log's lock, so appends to the active segment go on meanwhile.

        The segments chosen (those wholly below the pending offset, from the one holding the
        recovery point) are fixed under the lock, with their index entries written out; then
        their files and the directory are fsynced unlocked. The recovery point moves only if,
        meanwhile, the log was neither closed nor truncated and none of those segments was
        deleted; otherwise the next call starts again from the segments left.
        """
        with self._lock:
            pending = self._roll_flush_pending
            if self._closed or pending <= self._recovery_point:
                return False
            floor = self._recovery_segment_base()
            bases = list(self._segments.irange(minimum=max(floor, 0)))
            chosen: list[LogSegment] = []
            target = self._recovery_point
            for base, next_base in pairwise(bases):
                if next_base > pending:
                    break
                chosen.append(self._segments[base])
                target = next_base
            if not chosen:
                self._roll_flush_pending = 0  # a truncation took away what was pending
                return False
            truncations = self._truncations
            for segment in chosen:
                for index in (segment.offset_index, segment.time_index):
                    try:
                        index.flush(fsync=False)
                    except OSError as exc:
                        raise KafkaStorageError(
                            f"{self.name}: flush failed: writing {index.path}: {exc}"
                        ) from exc
        # ValueError: a file closed under us (its descriptor is then -1).
        failure: tuple[LogSegment | None, OSError | ValueError] | None = None
        synced_to: int | None = None  # set only once every fsync below returned
        for segment in chosen:
            try:
                segment.log_file.fdatasync()
                for path in (segment.offset_index.path, segment.time_index.path):
                    index_file = self._fs.open_segment_file(path, create=False)
                    try:
                        index_file.fdatasync()
                    finally:
                        index_file.close()
                # Recovery will not rescan it: its aborted transactions must be durable too
                # (a sealed segment takes no more entries, so nothing writes it meanwhile).
                segment.flush_txn_index()
            except (OSError, ValueError) as exc:
                failure = (segment, exc)
                break
        if failure is None:
            try:
                self._fs.fsync_dir(self.directory)
                # The epochs of those segments' records too (`_flush`).
                self.leader_epoch_cache.make_durable()
            except (OSError, KafkaStorageError) as exc:
                failure = (None, OSError(str(exc)) if isinstance(exc, KafkaStorageError) else exc)
            else:
                synced_to = target
        with self._lock:
            gone = (
                self._closed
                or self._truncations != truncations
                or any(self._segments.get(s.base_offset) is not s for s in chosen)
            )
            if failure is not None:
                if gone:
                    return False  # a deleted segment or a removed log cannot be synced: fine
                raise KafkaStorageError(f"{self.name}: flush failed: {failure[1]}") from failure[1]
            if gone:
                return False
            # Every segment below `target` was fsynced above (or, below the old recovery
            # point, before): only now may the recovery point move.
            new_point = min(target, self._log_end_offset)
            assert synced_to is not None and new_point <= synced_to
            if new_point <= self._recovery_point:
                return False
            self._recovery_point = new_point
            self._offset_moves.recovery_points = True
            if self._persist_standalone_state is not None:
                self._persist_standalone_state(self, False)
            return True

    def _recovery_segment_base(self) -> int:
        floor = next(self._segments.irange(maximum=self._recovery_point, reverse=True), None)
        return -1 if floor is None else int(floor)

    def maybe_flush(self, now_ms: int) -> bool:
        """Flush if `flush.ms` has passed since the last flush (the log manager's flusher)."""
        with self._lock:
            if self._closed or now_ms - self._last_flush_ms < self.config.flush_interval_ms:
                return False
            if self._recovery_point < self._log_end_offset:
                self._flush(self._log_end_offset)
            self._last_flush_ms = now_ms
            return True

    def _flush(self, up_to_offset: int, *, indexes_of_last: bool = False) -> None:
        """fsync the segments from the one holding the recovery point up to `up_to_offset`.

        Segments that end at or below `up_to_offset` are synced whole (log and indexes: they
        fall below the new recovery point, where indexes are trusted). The segment that will
        hold the new recovery point syncs only its data unless `indexes_of_last`: recovery
        rescans that segment and rebuilds its indexes anyway, and syncing them on every flush
        doubled its cost (a Raft log flushes on every commit).
        """
        if up_to_offset <= self._recovery_point:
            return
        floor = self._recovery_segment_base()
        # The epochs of the records the recovery point is about to pass must be durable too:
        # recovery re-derives them only above it.
        self.leader_epoch_cache.make_durable()
        try:
            if self._roll_flush_pending > self._recovery_point:
                # An asynchronous roll has not synced the directory yet: the new segments'
                # entries must be durable before the recovery point passes into them.
                self._fs.fsync_dir(self.directory)
            bases = list(self._segments.irange(minimum=max(floor, 0)))
            for i, base in enumerate(bases):
                if base >= up_to_offset and base != floor:
                    break
                segment = self._segments[base]
                ends_below = i + 1 < len(bases) and bases[i + 1] <= up_to_offset
                if ends_below or indexes_of_last:
                    segment.flush()
                else:
                    segment.log_file.fdatasync()
        except OSError as exc:
            raise KafkaStorageError(f"{self.name}: flush failed: {exc}") from exc
        new_point = min(up_to_offset, self._log_end_offset)
        if new_point > self._recovery_point:
            self._recovery_point = new_point
            self._offset_moves.recovery_points = True
        self._last_flush_ms = self._clock()

    def close(self) -> None:
        """Flush everything, record a clean shutdown, release files. Idempotent."""
        with self._lock:
            if self._closed:
                return
            # A clean shutdown trusts every index at the next open: sync them all. A failure
            # (a full disk) still releases every file, then is raised.
            flush_failure: KafkaStorageError | None = None
            try:
                self._flush(self._log_end_offset, indexes_of_last=True)
                # A clean shutdown leaves every epoch on disk, those of a log with no records
                # since its leader took them too (`_flush` syncs them only with records).
                self.leader_epoch_cache.make_durable()
            except KafkaStorageError as exc:
                flush_failure = exc
            failed: tuple[LogSegment, OSError] | None = None
            for segment in self._segments.values():
                try:
                    segment.close()
                except OSError as exc:
                    failed = failed or (segment, exc)
            self._closed = True
            if flush_failure is not None:
                raise flush_failure
            if failed is not None:
                where, error = failed
                raise KafkaStorageError(
                    f"{self.name}: close failed: writing the indexes of {where.log_path}: {error}"
                ) from error
            if self._persist_standalone_state is not None:
                self._persist_standalone_state(self, True)

    # --- the topic id (partition.metadata) -----------------------------------------------------

    def topic_id(self) -> uuid.UUID | None:
        """The topic id this log's `partition.metadata` records; None when it has none (a log
        made before its replica took it, or by a replog that wrote no such file). A file
        that does not parse is a KafkaStorageError, as Kafka takes such a log dir offline:
        replog writes it whole or not at all (atomically, or a new log's first one in place,
        removed if its write fails), so only something else can have damaged it. Read once:
        only this log writes the file."""
        if self._known_topic_id is None:
            try:
                self._known_topic_id = (self._partition_metadata().read(),)
            except CorruptCheckpointError as exc:
                raise KafkaStorageError(f"{self.name}: {exc}") from exc
        return self._known_topic_id[0]

    def record_topic_id(self, topic_id: uuid.UUID) -> None:
        """Write `partition.metadata` (atomically, or in place the first time in a log `create`
        made: `checkpoint_file`'s Rules): the log belongs to `topic_id` from now on.
        KafkaStorageError naming the file if the write fails."""
        new = self._known_topic_id == (None,) and self.created_empty
        self._known_topic_id = None
        self._partition_metadata(new=new).write(topic_id)
        self._known_topic_id = (topic_id,)

    def _partition_metadata(self, *, new: bool = False) -> PartitionMetadataFile:
        return PartitionMetadataFile(
            os.path.join(self.directory, PARTITION_METADATA), self._fs, new=new
        )

    def close_without_flush(self) -> None:
        """Release files as a crash would leave them (tests, fault injection, and a log
        manager's close after a storage error)."""
        with self._lock:
            for segment in self._segments.values():
                segment.log_file.close()
            self._closed = True

    def delete(self) -> None:
        """Close and remove the partition directory with everything in it."""
        self._fs.remove_tree(self.close_and_rename())

    def close_and_rename(self, suffix: str = DELETE_DIR_SUFFIX, *, sync_parent: bool = True) -> str:
        """Close the log and rename its directory aside to Kafka's
        `<topic>-<partition>.<id><suffix>` (`renamed_dir_name`: `-delete` or `-stray`), which
        loading never opens; returns the new path. The rename is what makes a deletion durable
        (removing the files may then wait: `LogManager.delete_log`) and a stray log's setting
        aside, so the parent directory is fsynced. A failed rename or fsync is a
        `KafkaStorageError` naming the directory: the node treats it as a failed disk."""
        target_name = renamed_dir_name(self.directory, suffix, rng=self._rng)
        with self._lock:
            # An epoch checkpoint still waiting for its deferred write would be written into
            # a directory no longer there.
            self.leader_epoch_cache.drop_unwritten()
            for segment in self._segments.values():
                segment.log_file.close()
            self._closed = True
            target = os.path.join(os.path.dirname(os.path.normpath(self.directory)), target_name)
            try:
                self._fs.rename(self.directory, target)
                if sync_parent:
                    self._fs.fsync_dir(os.path.dirname(target))
            except OSError as exc:
                raise KafkaStorageError(
                    f"{self.name}: renaming {self.directory} to {target} failed: {exc}"
                ) from exc
            return target

    @property
    def closed(self) -> bool:
        return self._closed

    def _check_open(self) -> None:
        if self._closed:
            raise LogClosedError(f"{self.name}: the log is closed")

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the log's lock across several calls (e.g. read a consistent set of offsets)."""
        with self._lock:
            yield


def _random_roll_jitter(config: LogConfig, rng: random.Random | None) -> int:
    """Kafka's `randomSegmentJitter`: 0 without `segment.jitter.ms`, else uniform in
    [0, min(segment.jitter.ms, segment.ms)). A time-based roll waits `segment.ms` minus this,
    so partitions created together do not all roll at the same moment."""
    if config.segment_jitter_ms <= 0:
        return 0
    draw = random.randrange if rng is None else rng.randrange
    return draw(min(config.segment_jitter_ms, config.segment_ms))


def _set_log_append_time(buf: bytearray, position: int, size: int, now_ms: int) -> None:
    """Mark a batch LogAppendTime with max timestamp `now_ms`; both are CRC-covered."""
    attributes = int.from_bytes(
        buf[position + ATTRIBUTES_OFFSET : position + ATTRIBUTES_OFFSET + 2], "big"
    )
    buf[position + ATTRIBUTES_OFFSET : position + ATTRIBUTES_OFFSET + 2] = (
        attributes | TIMESTAMP_TYPE_MASK
    ).to_bytes(2, "big")
    buf[position + _MAX_TIMESTAMP_OFFSET : position + _MAX_TIMESTAMP_OFFSET + 8] = now_ms.to_bytes(
        8, "big", signed=True
    )
    buf[position + CRC_OFFSET : position + CRC_OFFSET + 4] = compute_crc(
        buf, position, size
    ).to_bytes(4, "big")


def _immutable(data: bytes | bytearray | memoryview) -> Unchangeable:
    """`data` itself when nobody can change it (`bytes`, or a byte view of `bytes`), else a
    copy, so the bytes validated are the bytes written even if the caller's buffer changes
    meanwhile. Requests read off a socket are `bytes`, or views of them (a Kafka produce request's
    records), so the usual append copies nothing."""
    if isinstance(data, bytes):
        return data
    # A strided view of `bytes` is unchangeable too, but one write cannot take it: copied.
    if (
        isinstance(data, memoryview)
        and type(data.obj) is bytes
        and data.format == "B"
        and data.c_contiguous
    ):
        return data
    return bytes(data)


def _restamped(header: BatchHeader, base_offset: int, leader_epoch: int) -> BatchHeader:
    """`header` with the base offset and leader epoch a leader stamps."""
    # Building the tuple directly: `_replace` costs about 4 times as much, once per batch.
    return _new_tuple(BatchHeader, (base_offset, header[1], leader_epoch, *header[3:]))


# Batches at least this large have their CRC-32C checked on a worker thread while they are
# written (`Log._append_large_batch`); below it the hand-off costs more than it hides.
OVERLAPPED_CRC_BYTES_MIN = 256 * 1024
T = TypeVar("T")
_crc_pool: ThreadPoolExecutor | None = None


class _Inline(Executor):
    """Runs each call at once, on the caller's thread."""

    def submit(self, fn: Callable[..., T], /, *args: object, **kwargs: object) -> Future[T]:
        done: Future[T] = Future()
        try:
            done.set_result(fn(*args, **kwargs))
        except Exception as exc:
            done.set_exception(exc)
        return done


_INLINE = _Inline()


def _crc_worker(fs: FileSystem) -> Executor:
    """The CRC pool for a log on the operating system's disk; inline on any other: an
    in-memory disk has no write to hide the CRC behind, and a simulation runs no threads."""
    global _crc_pool
    if type(fs) is not OsFileSystem:
        return _INLINE
    if _crc_pool is None:
        _crc_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="replog-crc")
    return _crc_pool


def _single_batch(data: Unchangeable) -> bool:
    """Whether `data` frames as exactly one batch (its length field covers all of it)."""
    return len(data) >= LOG_OVERHEAD and _BATCH_LENGTH.unpack_from(data, 8)[
        0
    ] + LOG_OVERHEAD == len(data)
