"""The logs of new replicas: opened or created off the event loop, in batches, and logs of
deleted topics set aside.

Rules (docs/storage.md, "Creating many replicas"; Kafka's KIP-516 topic ids and stray logs):
- A replica that needs its log opened or created gets it from a worker thread, in one batch per
  round with one file-system sync (each write synced on its own up to `SYNC_EACH_MAX`). A new
  log's files are all the thread makes (system calls, little Python between them: a thread at
  a lower priority preempted while holding the GIL keeps the loop waiting); its objects are
  built on the loop as it is installed, from the plain data the thread returns
  (`LogManager.make_new_log`, `add_new_log`). With a file maker process (`use_file_maker`: a
  `replog node`'s brokers), a round of more than `SYNC_EACH_MAX` creations has the child make
  its new logs' files instead, awaited on the loop without a thread; the bulk threads for good
  once the child is gone.
- A replica's log records its topic id in `partition.metadata` before the replica appends
  anything, and a new leader's log its leader epoch. A log whose file names another topic id
  belongs to a deleted topic of the same name: it is set aside as a stray log and an empty one
  replaces it; a log without the file is taken as it is (an empty log made just before a
  crash, or one a replog without the file wrote: Kafka calls it a stray, replog keeps its
  data). The first image also sets aside every log on disk that no replica took (its topic
  deleted, its partition gone, or this broker no longer a replica), with a warning naming it.
- Setting aside is Kafka's: the directory is renamed `<topic>-<partition>.<id>-stray`
  (`LogManager.set_aside_stray_log`), never served or opened again, and left for an operator
  to remove, so that a wrong verdict (a bug, a metadata log restored from elsewhere) costs
  disk, not data. Without the id check, a topic deleted while a broker started would stay on
  its disk, and a topic created later under the same name would take that log.
  The file costs a new replica one small atomic write (about 0.45 ms here, as much again as
  creating the log); a log that has one costs a read of it at start-up.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import NamedTuple

from replog.quorum.metadata.image import MetadataImage
from replog.replication.producer_state import ProducerStateTable
from replog.server.data_plane.producer_state_loader import PreloadedTable, preload_producer_tables
from replog.server.data_plane.replica_change_queue import LEADER, ReplicaChange
from replog.server.data_plane.replica_shell import SYNC_EACH_MAX, ReplicaShell
from replog.server.runtime.bulk_threads import run_bulk
from replog.storage.file_maker_process import FileMakerGone, FileMakerProcess, left_to_the_caller
from replog.storage.log import Log
from replog.storage.log_config import LogConfig
from replog.storage.log_loader import cannot_create_log
from replog.storage.log_manager import NewLog, NewLogPlace

log = logging.getLogger("replog.server.data_plane.replica_manager")  # every role's lines

# How long the applier waits before it tries again to install new logs while the log manager's
# lock is held by another thread (`LogManager.add_new_log`'s `wait`).
LOG_MANAGER_BUSY_WAIT_S = 0.002


class LogCreation(NamedTuple):
    """A leader or follower change whose replica needs its log opened first."""

    change: ReplicaChange
    config: LogConfig


# What `_open_logs` hands `_install`: the change, its log (a new one's files, its objects still
# to build: `LogManager.add_new_log`), whether an older log was set aside for it, and its
# producer table when `_open_logs` loaded one.
OpenedLog = tuple[LogCreation, Log | NewLog, bool, PreloadedTable | None]


class ReplicaLogs(ReplicaShell):
    """The logs of new replicas (module docstring)."""

    def use_file_maker(self, maker: FileMakerProcess) -> None:
        """Have `maker` make the files of large rounds' new logs from now on, and close it at
        `stop` (docs/storage.md, "Creating many replicas")."""
        self._file_maker = maker

    async def _open_logs_by_file_maker(self, creations: list[LogCreation]) -> list[OpenedLog]:
        """`_open_logs`, with the files of the logs neither open, being made nor on disk made
        by the file maker process, awaited on the loop: files, one sync per file system, then
        the logs as `NewLog`s for `_install`. The other logs go to `_open_logs` in a bulk
        thread. Once the maker is gone, the bulk threads make every round's logs."""
        log_manager = self.log_manager
        wanted = [
            (c.change.local.topic_name, c.change.local.partition_id, c.config) for c in creations
        ]
        # No new log before a deleted namesake's checkpoint entries are gone, durably.
        while (places := log_manager.reserve_new_logs(wanted)) is None:
            if log_manager.has_stale_checkpoints:
                await run_bulk(log_manager.rewrite_stale_checkpoints)
            else:  # the manager's lock is busy: the loop must not wait for it
                await asyncio.sleep(LOG_MANAGER_BUSY_WAIT_S)
        pairs = list(zip(creations, places, strict=True))
        rest = [creation for creation, place in pairs if place is None]
        made = [
            (creation, place, creation.change.local.topic_id, self._new_leader_epoch(creation))
            for creation, place in pairs
            if place is not None
        ]
        if not made:
            return await run_bulk(self._open_logs, creations)
        reserved = [place for _, place, _, _ in made]
        maker = self._file_maker
        assert maker is not None
        try:
            answer = await maker.make(
                [
                    (
                        place.directory,
                        log_manager.new_log_files(place, topic_id=topic_id, leader_epoch=epoch),
                    )
                    for _, place, topic_id, epoch in made
                ],
                sorted({place.log_dir for place in reserved}),
            )
        except FileMakerGone as gone:
            log.warning(
                "broker %d: %s; the bulk threads make new logs' files from now on",
                self.broker_id,
                gone,
            )
            self._file_maker = None
            await asyncio.to_thread(maker.close)
            return await run_bulk(self._open_logs_reserved, reserved, creations)
        except BaseException:
            log_manager.cancel_new_logs(reserved, wait=False)
            raise
        opened: list[OpenedLog] = []
        given_back: list[NewLogPlace] = []
        failure: OSError | None = None
        answered = len(answer.results)
        for (creation, place, topic_id, epoch), result in zip(
            made[:answered], answer.results, strict=True
        ):
            if result is None:
                new = log_manager.new_log_made(place, topic_id=topic_id, leader_epoch=epoch)
                opened.append((creation, new, False, None))
                continue
            given_back.append(place)
            if left_to_the_caller(result, place.directory):
                rest.append(creation)  # a directory no log took: opened the old way
            elif failure is None:
                failure = OSError(*result)
        # The logs past the child's first failure were not made.
        given_back.extend(reserved[answered:])
        if failure is None and answer.sync_error is not None:
            error, strerror, directory = answer.sync_error
            failure = OSError(error, f"syncfs of {directory}: {strerror}")
        if failure is not None:
            await self._cancel_new_logs(reserved)
            if failure.filename is None:
                raise failure  # a failed sync: as the bulk threads' `deferred_sync` raises it
            raise cannot_create_log(failure.filename, failure)
        if rest:
            opened.extend(await run_bulk(self._open_logs_reserved, given_back, rest))
        return opened

    async def _cancel_new_logs(self, places: list[NewLogPlace]) -> None:
        """`LogManager.cancel_new_logs`, never waiting for its lock on the loop."""
        while not self.log_manager.cancel_new_logs(places, wait=False):
            await asyncio.sleep(LOG_MANAGER_BUSY_WAIT_S)

    def _open_logs_reserved(
        self, places: list[NewLogPlace], creations: list[LogCreation]
    ) -> list[OpenedLog]:
        """`_open_logs` of `creations` once the reservations `places` are given up (in a bulk
        thread: it may wait for the log manager's lock)."""
        self.log_manager.cancel_new_logs(places)
        return self._open_logs(creations)

    @staticmethod
    def _new_leader_epoch(creation: LogCreation) -> int | None:
        """The epoch a new leader's log starts with; None for a follower's."""
        local = creation.change.local
        return local.registration.leader_epoch if creation.change.kind == LEADER else None

    def _open_logs_or_release(self, creations: list[LogCreation]) -> list[OpenedLog]:
        """`_open_logs`; if it fails (a storage error: the broker stops), its partitions are
        released, so that nothing waits for them."""
        try:
            return self._open_logs(creations)
        except BaseException:
            self._release(creations)
            raise

    def _release(self, creations: list[LogCreation]) -> None:
        for creation in creations:
            self._changes.release(creation.change.key)

    def _open_logs(self, creations: list[LogCreation]) -> list[OpenedLog]:
        """Open (creating where needed: their files only, `_log_of_topic`) the logs of
        `creations`, each with its topic id recorded and, for a leader, its leader epoch
        assigned, then make all of them durable with one sync of their file systems. Runs in
        a worker thread: no replica uses these logs until `_install`."""
        self.log_manager.rewrite_stale_checkpoints()
        # A few logs sync each write as it goes: a file-system sync also writes back
        # everything else dirty on the disk, 0.1-0.5 s under a produce load here.
        batched = len(creations) > SYNC_EACH_MAX
        with self.log_manager.deferred_sync() if batched else contextlib.nullcontext():
            opened = [(creation, *self._log_of_topic(creation)) for creation in creations]
        # Producer tables too (a snapshot directory's listing, at least), for the logs the
        # broker's start-up did not preload: no replica reads its log on the loop.
        unloaded = {
            creation.change.key: log_
            for creation, log_, replaced in opened
            if isinstance(log_, Log)
            and not _fresh(log_)
            and (replaced or creation.change.key not in self._preloaded)
        }
        tables = preload_producer_tables(unloaded, self._producer_expiry())
        for creation, log_, _replaced in opened:
            if isinstance(log_, Log) and _fresh(log_):  # nothing to read: an empty table
                tables[creation.change.key] = empty_table(log_)
        return [
            (creation, log_, replaced, tables.get(creation.change.key))
            for creation, log_, replaced in opened
        ]

    def _log_of_topic(self, creation: LogCreation) -> tuple[Log | NewLog, bool]:
        """The log of a new replica, its `partition.metadata` naming the topic id and, for a
        leader, its leader epoch assigned (what `make_leader` would write on the event loop),
        and whether an older log had to be replaced (module docstring: logs of deleted
        topics). The file is written before the replica appends anything. A log made here
        (no log of that name open or on disk) is its files only, as plain data, for
        `_install` to build on the loop: this thread holds the GIL only between system
        calls (a bulk thread at a lower priority preempted while holding it keeps the loop
        waiting: `bulk_threads`' Rules)."""
        local = creation.change.local
        name, partition_id = local.topic_name, local.partition_id
        leader = creation.change.kind == LEADER
        try:
            made = self.log_manager.make_new_log(
                name,
                partition_id,
                creation.config,
                topic_id=local.topic_id,
                leader_epoch=self._new_leader_epoch(creation),
            )
        except FileExistsError:  # a directory no log took: opened below
            made = None
        if made is not None:
            return made, False
        found = self.log_manager.get_or_create_log(name, partition_id, creation.config)
        recorded = found.topic_id()
        replaced = recorded is not None and recorded != local.topic_id
        if replaced:
            end = found.log_end_offset
            aside = self.log_manager.set_aside_stray_log(name, partition_id)
            log.warning(
                "%s: the log on disk belongs to topic id %s, a deleted topic of the same name "
                "(the topic is now %s): set aside as %s (log end offset %d), starting an "
                "empty one",
                found.name,
                recorded,
                local.topic_id,
                aside,
                end,
            )
            found = self.log_manager.get_or_create_log(name, partition_id, creation.config)
        if recorded != local.topic_id:
            found.record_topic_id(local.topic_id)
        if leader:
            found.leader_epoch_cache.assign(local.registration.leader_epoch, found.log_end_offset)
        return found, replaced

    def _set_aside_stray_logs(self, image: MetadataImage) -> None:
        """At the first image: set aside every log no replica took (module docstring)."""
        taken = set(self._partitions)
        for (topic, partition_id), stray in sorted(self.log_manager.all_logs().items()):
            if (topic, partition_id) in taken:
                continue
            topic_image = image.topics.by_name.get(topic)
            registration = None if topic_image is None else topic_image.partitions.get(partition_id)
            why = (
                "its topic no longer exists"
                if topic_image is None
                else "its partition no longer exists"
                if registration is None
                else f"broker {self.broker_id} is not one of its replicas"
            )
            end = stray.log_end_offset
            aside = self.log_manager.set_aside_stray_log(topic, partition_id)
            log.warning(
                "%s: stray log (%s; log end offset %d): set aside as %s, not served; remove "
                "it once nothing in it is wanted",
                stray.name,
                why,
                end,
                aside,
            )
            self._preloaded.pop((topic, partition_id), None)


def empty_table(plog: Log) -> PreloadedTable:
    """The producer table of a log that holds nothing: empty, nothing to read."""
    return PreloadedTable(plog, 0, 0, ProducerStateTable(plog.name))


def _fresh(plog: Log) -> bool:
    """A log this broker created empty and nothing appended to since: no producer state."""
    return plog.created_empty and plog.log_end_offset == 0
