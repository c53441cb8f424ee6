"""Metadata images to replicas: the local changes each image makes, applied in rounds.

Rules (docs/design/replication.md; Kafka's `ReplicaManager.applyDelta`):
- Declarative: on every metadata image the manager computes this broker's local changes
  (deletes first, then leaders, then followers) and brings each replica to the state the image
  describes. Once started, it applies them in rounds (`APPLY_ROUND_CHANGES` a round, fewer
  once the round's loop time is up, then the event loop runs others), each partition's
  changes in order (`ReplicaChangeQueue`), and a replica that needs its log opened or created
  gets it from a worker thread (`replica_logs`), installed on the loop in turns bounded in
  time (`APPLY_TURN_BUDGET_MS`; docs/storage.md, "Creating many replicas"). The new leaders'
  epoch checkpoints a round wrote are written and synced off the loop by `DeferredSyncs`,
  which the rounds do not wait for. Before `start` (tests, tools), `apply_image` applies
  everything at once; so is a small delta (`APPLY_AT_ONCE_MAX`) with nothing queued.
- Every image also refreshes each leader's ISR eligibility (registered, unfenced, not shutting
  down) and replication config (`replica_configs`): its core steps `ImageRefreshed`, once
  started in rounds of `APPLY_ROUND_CHANGES` leaders too (fewer once a round's time is up); a
  leader not reached yet acts on the previous image meanwhile (docs/replication.md, "Images
  in rounds").
- Once every change of the images so far is applied, the followers of applied images (the
  group coordinator) are told, with the topics the images removed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Collection
from collections.abc import Set as AbstractSet
from uuid import UUID

from replog.common import TopicPartitionKey
from replog.errors import KafkaStorageError
from replog.quorum.metadata.delta import MetadataDelta
from replog.quorum.metadata.image import ConfigResource, MetadataImage
from replog.quorum.metadata.loader import LoaderManifest, Publication
from replog.quorum.metadata.local_changes import LocalChanges, local_changes_between
from replog.quorum.metadata.steps import Steps, run_to_end
from replog.replication.leader_state import PartitionReplicationConfig, ReplicaEligibility
from replog.replication.partition_events import ImageRefreshed
from replog.server.data_plane.log_summaries import partition_names
from replog.server.data_plane.partition import Partition
from replog.server.data_plane.replica_change_queue import (
    DELETE,
    ReplicaChange,
    StagedChanges,
    stage_in_steps,
)
from replog.server.data_plane.replica_logs import (
    LOG_MANAGER_BUSY_WAIT_S,
    LogCreation,
    OpenedLog,
    ReplicaLogs,
    empty_table,
)
from replog.server.data_plane.replica_roles import ReplicaRoles
from replog.server.data_plane.replica_shell import SYNC_EACH_MAX
from replog.server.runtime import collector
from replog.server.runtime.bulk_threads import run_bulk
from replog.server.runtime.loop_turns import yield_turn
from replog.storage.log_config import LogConfig
from replog.storage.log_manager import NewLog

log = logging.getLogger("replog.server.data_plane.replica_manager")  # every role's lines

# Changes one round applies before it yields to the event loop, and the most log creations one
# worker-thread batch (one file-system sync) carries. A round of leader changes costs ~25 ms
# here; a batch's sync is one `syncfs`, whatever its size.
APPLY_ROUND_CHANGES = 250

# A round stops taking changes once it has run this long: each deletion renames its log's
# directory on the loop (4-20 ms each on a busy file system: 250 of them held a loop for 4.8 s
# and cost the active controller the quorum's leadership), so a count alone does not bound it.
APPLY_ROUND_BUDGET_MS = 50

# The loop time one turn of the applier's other work may take (the event loop's clock, ms): a
# round's role changes of existing replicas, a turn installing a round's new replicas, a round
# of the leaders' refresh, each stopping after the change that used it up. 250 of them a turn
# held the loop 20-55 ms of CPU on a loaded machine (creating 30,000-100,000 partitions, three
# nodes on 2 cores), which the run-queue wait makes 1.5-3x that of wall time.
APPLY_TURN_BUDGET_MS = 8

# A delta of at most this many local changes, arriving with none queued, is applied at once.
APPLY_AT_ONCE_MAX = 4


class ReplicaApplier(ReplicaLogs, ReplicaRoles):
    """Metadata images applied to the replicas (module docstring)."""

    def on_metadata_update(
        self, delta: MetadataDelta, image: MetadataImage, manifest: LoaderManifest
    ) -> None:
        """MetadataPublisher: act on what changed for this broker."""
        run_to_end(self.update_in_steps(Publication(delta, image, manifest)))

    def update_in_steps(self, publication: Publication) -> Steps[None]:
        """SteppedMetadataPublisher: `on_metadata_update` with the local changes found in
        steps (a first image names every replica this broker holds), acted on in the last."""
        changes = yield from publication.local_changes_in_steps(self.broker_id)
        # Queued in steps too: the step that acts on the image only links them in
        # (`replica_change_queue`, Rules).
        staged = yield from stage_in_steps(changes)
        image, manifest = publication.image, publication.manifest
        delta = publication.delta
        from_here = delta.base is self.image
        self._note_removed_topics(delta.deleted_topic_ids if from_here else None)
        if not changes.is_empty():
            log.info(
                "broker %d at metadata offset %d: lead %s, follow %s, delete %s",
                self.broker_id,
                manifest.provenance.last_offset,
                partition_names(changes.leaders),
                partition_names(changes.followers),
                partition_names(changes.deletes),
            )
        self._apply(changes, image, staged, delta.changed_config_resources if from_here else None)

    def apply_image(self, image: MetadataImage) -> None:
        """Reach the state `image` describes from the last applied one (tests, harnesses)."""
        self._note_removed_topics(None)
        self._apply(local_changes_between(self.image, image, self.broker_id), image)

    def _apply(
        self,
        changes: LocalChanges,
        image: MetadataImage,
        staged: StagedChanges | None = None,
        changed_configs: Collection[ConfigResource] | None = None,
    ) -> None:
        """Queue `changes` (`staged` already, when given) and reach `image`; the config
        resources it changed from the last image are `changed_configs` (None: compare)."""
        if self._stopped:
            return  # stopping: no replica is created, deleted or given a role any more
        previous = self.image
        if previous is MetadataImage.EMPTY:
            self._strays_unchecked = True  # once the first image's replicas exist
        self.image = image
        cluster_changed = image.cluster is not previous.cluster
        if cluster_changed:
            self._eligibility = ReplicaEligibility.from_cluster(image.cluster)
        was_idle = self._changes.idle
        if staged is None:
            self._changes.add(changes)
        else:
            self._changes.add_staged(staged)
        # The replicas whose topic's settings changed (all of them when a broker level did).
        reconfigured: AbstractSet[TopicPartitionKey] = frozenset()
        if image.configs is not previous.configs:
            topics = self._reconfigured_topics(previous, image, changed_configs)
            self._refresh_throttles(image, topics)
            if topics is None:  # a broker level changed
                self._refresh_cleaner(image, starting=previous is MetadataImage.EMPTY)
            reconfigured = (
                self._partitions.keys() if topics is None else self._replica_keys_of(image, topics)
            )
            self._refresh_log_configs(image, reconfigured)
        if cluster_changed or reconfigured:
            # Every leader's eligibility and replication config, in rounds once started (a
            # broker leading 10,000 replicas walks them all when a broker is fenced): the
            # leaders not reached yet act on the previous image meanwhile, as if this one
            # reached them a few loop turns later (docs/replication.md, "Images in rounds").
            # Those an earlier image has not reached yet go first (the list is taken from its
            # end): restarting the walk in the same order would let a stream of images, one
            # every few rounds, leave the same leaders on an old image for ever.
            # Built with no Python-level step per replica (a list comprehension over 100,000
            # held the loop 69-84 ms of CPU under load): a copy of the keys, or a set
            # difference when some wait.
            behind = self._leaders_to_refresh
            # Without a cluster change, only the reconfigured topics' replication configs
            # may differ.
            keys = self._partitions.keys() if cluster_changed else reconfigured
            if behind:
                self._leaders_to_refresh = [*(keys - set(behind)), *behind]
            else:
                self._leaders_to_refresh = list(keys)
        small = len(changes.deletes) + len(changes.leaders) + len(changes.followers)
        if self._applier_task is not None and not (was_idle and small <= APPLY_AT_ONCE_MAX):
            self._applied.clear()
            self._applier_wake.set()
        else:
            # Not started, or a small delta with nothing queued before it (a CreateTopics of a
            # few partitions): applied at once, as Kafka's broker applies a delta before its
            # next one, so a replica exists when its image is published (a few small files
            # synced, milliseconds on the loop).
            self._apply_changes_now()
            if self._leaders_to_refresh:
                self._applier_wake.set()  # the leaders' refresh, in rounds

    def _refresh_leaders(self, limit: int, budget_ms: int | None = None) -> None:
        """Give up to `limit` of the partitions `_apply` listed the current image's
        eligibility and replication config, if they lead (module Rules); with `budget_ms`,
        no more once that long has passed."""
        pending = self._leaders_to_refresh
        now_ms = self._clock()
        image = self.image
        # A topic's partitions share its config: read once per topic in a round, not per
        # replica.
        configs: dict[str, PartitionReplicationConfig] = {}
        for _ in range(min(limit, len(pending))):
            if budget_ms is not None and self._clock() - now_ms >= budget_ms:
                break
            key = pending.pop()
            partition = self._partitions.get(key)
            leader_state = None if partition is None else partition.leader_state
            if partition is None or leader_state is None:
                continue
            config = configs.get(partition.topic)
            if config is None:
                config = configs[partition.topic] = self._replication_config(image, partition.topic)
            config_changed = config != leader_state.config
            effects = partition.core.step(
                ImageRefreshed(self._eligibility, config, partition.log.log_end_offset), now_ms
            )
            if config_changed:
                self._count_leader(partition)  # min.insync.replicas may have changed
            self._execute(partition, effects)

    def _apply_changes_now(self) -> None:
        """Apply every queued change on this thread (no event loop applies them: tests, tools
        and harnesses that call `apply_image` expect the replicas at once); and the leaders'
        refresh, unless the applier task runs it in rounds."""
        if self._applier_task is None:
            self._refresh_leaders(len(self._leaders_to_refresh))
        while not self._changes.idle:
            creations = self._apply_round(len(self._changes))
            if not creations:
                continue
            self._install(self._open_logs_or_release(creations))
        self._log_roles_taken()
        self._refresh_fetch_sources()
        self._on_changes_applied()

    async def _run_applier(self) -> None:
        """Apply queued changes a round at a time, yielding to the event loop between rounds,
        with every log creation's file work in a worker thread."""
        while not self._stopped:
            if self._leaders_to_refresh and (self._changes.idle or self._refresh_next):
                # A round of the leaders' refresh, then one of the changes (which a restart's
                # unfencing waits for), in turn: neither waits for all of the other.
                self._refresh_next = False
                self._refresh_leaders(APPLY_ROUND_CHANGES, APPLY_TURN_BUDGET_MS)
                await yield_turn()
                continue
            self._refresh_next = True
            if self._changes.idle:
                if not self._applied.is_set():  # once per image applied, not per wake
                    self._on_changes_applied()
                self._applier_wake.clear()
                await self._applier_wake.wait()
                continue
            try:
                started = self._clock()
                waiting = len(self._changes)
                # New leaders' epoch checkpoints are written without a sync on the loop and
                # synced together off it (docs/storage.md, "Creating many replicas").
                self._replicas_deleted = 0
                with self.log_manager.collect_unsynced() as unsynced:
                    creations = self._apply_round(APPLY_ROUND_CHANGES)
                self._refresh_fetch_sources()
                self._syncs.add(unsynced)
                if creations:
                    try:
                        if self._file_maker is not None and len(creations) > SYNC_EACH_MAX:
                            opened = await self._open_logs_by_file_maker(creations)
                        else:
                            opened = await run_bulk(self._open_logs, creations)
                    except BaseException:
                        self._release(creations)
                        raise
                    installed = 0
                    stuck = False
                    while installed < len(opened):
                        if stuck:
                            # The log manager's lock was busy (its task thread's pass over
                            # every log): come back shortly, not turn the loop over and over.
                            await asyncio.sleep(LOG_MANAGER_BUSY_WAIT_S)
                        else:
                            await yield_turn()
                        with self.log_manager.collect_unsynced() as unsynced:
                            done = self._install(opened, installed, APPLY_TURN_BUDGET_MS)
                        stuck, installed = done == installed, done
                        self._refresh_fetch_sources()
                        self._syncs.add(unsynced)
                    await yield_turn()
                    self._log_roles_taken()
                    if waiting > APPLY_ROUND_CHANGES:
                        log.info(
                            "broker %d: created %d replica logs in %d ms; %d replica changes "
                            "still to apply",
                            self.broker_id,
                            len(opened),
                            self._clock() - started,
                            len(self._changes),
                        )
                self._log_roles_taken()
                # The round's new replicas live long: out of full collections (collector.py),
                # after a young collection, in a turn of its own.
                collector.replicas_changed(
                    len(creations),
                    self._replicas_deleted,
                    len(self._partitions),
                    more_waiting=bool(len(self._changes)),
                )
                await yield_turn()
            except asyncio.CancelledError:
                raise
            except (KafkaStorageError, OSError) as exc:
                error = (
                    exc
                    if isinstance(exc, KafkaStorageError)
                    else KafkaStorageError(f"applying replica changes: {exc}")
                )
                if self._on_storage_error is None:
                    log.critical("broker %d: replica changes stop: %s", self.broker_id, error)
                else:
                    self._on_storage_error(error)
                return
            except Exception:  # a bug in one change must not stop all the later ones
                log.exception("broker %d: applying replica changes failed", self.broker_id)

    def _apply_round(self, limit: int) -> list[LogCreation]:
        """Take up to `limit` queued changes (fewer when a deletion used up the round's
        `APPLY_ROUND_BUDGET_MS`, or role changes `APPLY_TURN_BUDGET_MS`) and apply those that
        need no new log; return the others, their partitions held, for `_open_logs` and
        `_install`."""
        now_ms = self._clock()
        creations: list[LogCreation] = []
        # A topic's partitions share its LogConfig: built once per topic in a round (the image
        # cannot change within it), not once per replica.
        configs: dict[str, LogConfig] = {}
        taking = self._changes.taking(limit)
        try:
            for change in taking:
                if self._apply_change(change, now_ms, configs, creations):
                    break
        finally:
            taking.close()
        return creations

    def _apply_change(
        self,
        change: ReplicaChange,
        now_ms: int,
        configs: dict[str, LogConfig],
        creations: list[LogCreation],
    ) -> bool:
        """Apply one change of a round, or add it to `creations`; whether the round's time is
        up (`APPLY_ROUND_BUDGET_MS` after a deletion, the change that costs file work here;
        `APPLY_TURN_BUDGET_MS` after a role change)."""
        local = change.local
        if change.kind == DELETE:
            self._delete_partition(local)
            return self._clock() - now_ms >= APPLY_ROUND_BUDGET_MS
        existing = self._partitions.get(change.key)
        if existing is not None and existing.topic_id == local.topic_id:
            self._take_role(change, existing, now_ms)
            return self._clock() - now_ms >= APPLY_TURN_BUDGET_MS
        if existing is not None:
            # Same name, another topic id: the old topic was deleted and the name reused.
            self._drop(existing, delete_log=True)
        self._changes.hold(change.key)
        config = configs.get(local.topic_name)
        if config is None:
            config = configs[local.topic_name] = self._log_config(self.image, local.topic_name)
        creations.append(LogCreation(change, config))
        return False

    def _install(
        self, opened: list[OpenedLog], first: int = 0, budget_ms: int | None = None
    ) -> int:
        """Make replicas of the logs `_open_logs` opened, from `opened[first]` on, and give
        each its role; with `budget_ms`, no more once that long has passed, and none while
        another thread holds the log manager's lock (`LogManager.add_new_log`). Where it
        stopped (the index of the first one left)."""
        now_ms = self._clock()
        index = first
        while index < len(opened):
            if budget_ms is not None and index > first and self._clock() - now_ms >= budget_ms:
                break
            creation, made, replaced, table = opened[index]
            if isinstance(made, NewLog):
                log_ = self.log_manager.add_new_log(made, wait=budget_ms is None)
                if log_ is None:  # the log manager's lock is busy: the loop must not wait
                    break
                table = empty_table(log_)
            else:
                log_ = made
            index += 1
            change = creation.change
            local = change.local
            key = change.key
            self._changes.release(key)
            preloaded = self._preloaded.pop(key, None) if table is None else table
            created = Partition(
                topic=local.topic_name,
                topic_id=local.topic_id,
                partition=local.partition_id,
                local_broker_id=self.broker_id,
                log=log_,
                log_manager=self.log_manager,
                producer_expiry=self._producer_expiry,
                preloaded=None if replaced else preloaded,
                alter_partition_retry_ms=self.config.replica_fetch_backoff_ms,
            )
            self._partitions[key] = created
            self._count_replicas()
            self._take_role(change, created, now_ms)
        return index

    def _on_changes_applied(self) -> None:
        """Every queued change is applied: the replicas are those `self.image` describes."""
        if self._strays_unchecked:
            self._strays_unchecked = False
            self._set_aside_stray_logs(self.image)
            # Tables no replica took (a deleted topic's) are not kept: a later replica loads
            # its own.
            self._preloaded.clear()
        self._applied.set()
        removed, self._removed_topic_ids = self._removed_topic_ids, set()
        for follower in self._on_applied:
            follower(self.image, removed)

    def _note_removed_topics(self, topic_ids: Collection[UUID] | None) -> None:
        """Add the topics an image removed for the followers' next call (None: unknown)."""
        if topic_ids is None or self._removed_topic_ids is None:
            self._removed_topic_ids = None
        else:
            self._removed_topic_ids.update(topic_ids)

    def follow_applied_images(
        self, follower: Callable[[MetadataImage, Collection[UUID] | None], None]
    ) -> None:
        """Call `follower` with the image each time every replica it describes exists in its
        role (the group coordinator loads offsets partitions only then), and the ids of the
        topics the images since the previous call removed (None when unknown: compare the
        images). The first call's previous image is the empty one."""
        self._on_applied.append(follower)
        if self._changes.idle and self.image is not MetadataImage.EMPTY:
            follower(self.image, ())

    @property
    def pending_changes(self) -> int:
        """Replica changes not applied yet (metrics, progress lines)."""
        return len(self._changes)

    async def wait_applied(self) -> None:
        """Until every change of the images so far is applied."""
        await self._applied.wait()
