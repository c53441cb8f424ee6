"""A log's end: a clean close (everything flushed, a clean shutdown recorded), a close as a
crash leaves it, and the rename of its directory aside (deleted or stray) and its removal.

Rules: each holds the log's lock and leaves the log closed (later appends, reads and flushes
raise LogClosedError); `close` is idempotent and releases every file even when its flush fails; a
rename is durable (the parent directory fsynced) before it returns.
"""

from __future__ import annotations

import os

from replog.errors import KafkaStorageError
from replog.storage.log_dir_names import DELETE_DIR_SUFFIX, renamed_dir_name
from replog.storage.log_flush import LogFlushing
from replog.storage.segment import LogSegment


class LogClosing(LogFlushing):
    """The closing of a `Log` (log_state.py says why its parts share one state)."""

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
