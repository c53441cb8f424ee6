"""One partition's log: an ordered run of segments with Kafka's append, read, truncation,
retention and recovery rules.

Rules (docs/design/storage.md#leader-validation-on-produce, #segment-files-and-names, #log-recovery,
docs/design/replication.md):
- Offsets are dense as appended; in a compacted log the cleaner removes records below the
  high watermark without renumbering the rest (`replace_with_cleaned`), leaving gaps.
  `log_start_offset <= high_watermark <= log_end_offset`; the log start offset and the
  recovery point only move forward, except that truncation pulls them back.
- A leader append validates every batch's header and CRC-32C (never its records:
  leader_batch_validation.py), gives each batch its base offset and the leader epoch in its
  header, and appends the bytes. A rejected append leaves the log unchanged, and the caller's
  buffer is never changed.
- A follower append writes the leader's bytes verbatim (checked by follower_batch_validation.py);
  its first offset must equal the log end offset (no gaps, except in a compacted log, whose
  leader's cleaner leaves some; an empty log whose start falls inside the first batch restarts
  at its base), and it records each batch's leader epoch in the leader-epoch cache.
- Every public method holds the log's lock (log_state.py), so a log can be shared by threads
  (an embedding application, a background task runner).

Theory of operation: `Log.open` loads segments (`log_loader`), recovering those at or after the
recovery point after an unclean shutdown. This module holds the appends; the class is built
from one part per concept over one shared state (log_state.py says why): reads (log_reads.py),
timestamp lookups (log_timestamps.py), the aborted-transaction index
(log_aborted_transactions.py), truncation (log_truncation.py), the log start offset and
retention (log_retention.py), the cleaner's swap (log_cleaned_swap.py), flushes and the
asynchronous roll flush (log_flush.py), rolls (log_rolls.py), closing and renaming
(log_closing.py), the topic id (log_topic_id.py).

The append path is the hot path (docs/benchmarks.md measures it against a plain file). The
stamped fields (bytes 0-15: base offset, batch length, leader epoch) are not covered by the
CRC, so a leader append writes a fresh 16-byte prefix and then the caller's bytes from byte 16
on, in one gather write: no batch is copied to be stamped. Only LogAppendTime, which changes
CRC-covered fields, stamps a copy. The one-batch append, by far the most common, has a path of
its own without the general path's per-batch lists.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import TYPE_CHECKING

from crc32c import crc32c

from replog.clock import Clock, wall_clock_ms
from replog.errors import (
    CorruptRecordError,
    FencedLeaderEpochError,
    InvalidRecordError,
    KafkaStorageError,
    UnexpectedAppendOffsetError,
)
from replog.record.header import (
    ATTRIBUTES_OFFSET,
    LOG_OVERHEAD,
    BatchHeader,
    check_crc_and_count,
    read_header,
    stamp_batch,
    validate_batch,
)
from replog.storage.follower_batch_validation import validate_follower_batches
from replog.storage.fs import LOCAL_FS, Buffer, FileSystem
from replog.storage.large_batch_crc import OVERLAPPED_CRC_BYTES_MIN, crc_worker
from replog.storage.leader_batch_validation import (
    STAMPED_PREFIX,
    Unchangeable,
    batch_where,
    check_append_size,
    check_leader_batch,
    check_records_fit,
    immutable,
    new_tuple,
    raise_naming_batch,
    restamped,
    set_log_append_time,
    single_batch,
    validate_leader_batches,
)
from replog.storage.log_aborted_transactions import LogAbortedTransactions
from replog.storage.log_append_info import LogAppendInfo
from replog.storage.log_closing import LogClosing
from replog.storage.log_config import LogConfig
from replog.storage.log_retention import LogRetention
from replog.storage.log_timestamps import LogTimestamps
from replog.storage.log_topic_id import LogTopicId
from replog.storage.log_truncation import LogTruncation
from replog.storage.roll_jitter import random_roll_jitter

if TYPE_CHECKING:
    from replog.storage.log_loader import NewLogFiles


class Log(
    LogRetention, LogTruncation, LogTimestamps, LogAbortedTransactions, LogClosing, LogTopicId
):
    """A partition's segmented log. Open it with `Log.open`."""

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
            # what it must: here `_check_open` only to raise, and `immutable` only for what
            # is not `bytes`.
            if self._closed:
                self._check_open()
            data = batch_bytes if type(batch_bytes) is bytes else immutable(batch_bytes)
            if (
                len(data) >= OVERLAPPED_CRC_BYTES_MIN
                and not self.config.log_append_time
                and single_batch(data)
            ):
                return self._append_large_batch(data, leader_epoch, allow_control)
            headers = validate_leader_batches(data, allow_control, self.name, self.config)
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
                    set_log_append_time(buf, position, header.size_in_bytes, now_ms)
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
                    prefixes.append(STAMPED_PREFIX.pack(offset, header.batch_length, leader_epoch))
                    stamped.append(restamped(header, offset, leader_epoch))
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
        check_append_size(self.name, self.config, len(data))
        try:
            header = validate_batch(data, 0, where=self.name, defer_crc=True)
        except (CorruptRecordError, InvalidRecordError):
            raise_naming_batch(self.name, "append", data, (), 0)
        check_leader_batch(self.name, header, (), 0, allow_control, self.config.max_message_bytes)
        latest = self._check_leader_epoch(leader_epoch)
        crc = crc_worker(self._fs).submit(crc32c, memoryview(data)[ATTRIBUTES_OFFSET:])
        start_offset = self._log_end_offset

        def verify() -> None:
            check_crc_and_count(header, crc.result(), batch_where(self.name, "append", (), 0))
            check_records_fit(self.name, header, (), 0)
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
        prefix = STAMPED_PREFIX.pack(offset, header.batch_length, leader_epoch)
        parts: list[Buffer] = [prefix, memoryview(data)[STAMPED_PREFIX.size :]]
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
        # `restamped(header, offset, leader_epoch)`, inlined (see append_as_leader).
        stamped = new_tuple(BatchHeader, (offset, header[1], leader_epoch, *header[3:]))
        # (tuple.__new__ skips the named tuples' Python-level constructors.)
        return new_tuple(
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

    def _check_leader_epoch(self, leader_epoch: int) -> int | None:
        """Refuse a leader epoch older than the log's latest; return the latest (or None)."""
        latest = self.leader_epoch_cache.latest_epoch
        if latest is not None and leader_epoch < latest:
            raise FencedLeaderEpochError(
                f"{self.name}: leader epoch {leader_epoch} is older than the log's latest "
                f"leader epoch {latest}"
            )
        return latest

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
            buf = immutable(batches_bytes)
            headers = validate_follower_batches(buf, leader_epoch, self.name, self.config)
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
                parts = [prefixes[0], view[STAMPED_PREFIX.size : size]]
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
                    parts.append(view[position + STAMPED_PREFIX.size : position + size])
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
            self._roll_jitter_ms = random_roll_jitter(config, self._rng)
            return True
