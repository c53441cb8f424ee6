"""A replica takes the role a metadata image gives it: it leads, follows, or goes.

Rules (docs/design/replication.md; Kafka's `ReplicaManager.applyDelta`):
- Leading: the replica's core steps `LeadershipChanged` with the topic's replication config
  and the image's ISR eligibility (`Partition.make_leader`); its effects are executed. Following:
  the core steps `LeadershipLost` (its waiters answer NOT_LEADER_OR_FOLLOWER) and the follower
  side starts or keeps its fetch state. Going: the replica leaves the map, its log deleted
  (the topic deleted, or its name reused by another topic id) or closed.
- Every role change touches the partition's fetch entry (`follower_fetch`, dirty-only) and the
  metrics summary's counts; the fetch sources are refreshed once per round.
- One log line per round for the roles it gave (each replica's own line is at DEBUG).
"""

from __future__ import annotations

import logging

from replog.quorum.metadata.local_changes import LocalPartition
from replog.server.data_plane.log_summaries import few_names
from replog.server.data_plane.partition import Partition
from replog.server.data_plane.replica_change_queue import LEADER, ReplicaChange
from replog.server.data_plane.replica_configs import ReplicaConfigs

log = logging.getLogger("replog.server.data_plane.replica_manager")  # every role's lines


class ReplicaRoles(ReplicaConfigs):
    """The roles replicas take (module docstring)."""

    def _take_role(self, change: ReplicaChange, partition: Partition, now_ms: int) -> None:
        # Whether and where it is fetched from may change (`follower_fetch`, dirty-only).
        self._follower.touch(partition.key)
        if change.kind == LEADER:
            self._make_leader(partition, change.local, now_ms)
        else:
            self._make_follower(partition, change.local, now_ms)
        self._roles_taken[change.kind].append(partition.name)

    def _log_roles_taken(self) -> None:
        """One line per round for the roles it gave (a line per replica cost a broker creating
        10,000 replicas seconds of its event loop; each replica's own line is at DEBUG)."""
        for kind, names in self._roles_taken.items():
            if names:
                verb = "leads" if kind == LEADER else "follows"
                log.info(
                    "broker %d %s %d replicas: %s",
                    self.broker_id,
                    verb,
                    len(names),
                    few_names(names),
                )
                names.clear()

    def _make_leader(self, partition: Partition, local: LocalPartition, now_ms: int) -> None:
        # Metrics: an ISR change of a partition this broker goes on leading may arrive here
        # (metadata) before the AlterPartition answer does (which then changes nothing).
        led = partition.leader_state
        isr_size_before = None if led is None else len(led.isr)
        effects = partition.make_leader(
            local.registration,
            config=self._replication_config(self.image, local.topic_name),
            eligibility=self._eligibility,
            now_ms=now_ms,
        )
        if isr_size_before is not None and partition.leader_state is not None:
            self.counters.isr_changed(isr_size_before, len(partition.leader_state.isr))
        self._count_leader(partition)
        self._execute(partition, effects)

    def _make_follower(self, partition: Partition, local: LocalPartition, now_ms: int) -> None:
        effects = partition.lose_leadership(now_ms)
        partition.make_follower(local.registration, now_ms)
        key = partition.key
        self.replica_counts.set_figures(key, None)
        self._execute(partition, effects)

    def _delete_partition(self, local: LocalPartition) -> None:
        key = (local.topic_name, local.partition_id)
        existing = self._partitions.get(key)
        if existing is None or existing.topic_id != local.topic_id:
            return
        self._drop(existing, delete_log=True)
        self._replicas_deleted += 1

    def _drop(self, partition: Partition, *, delete_log: bool) -> None:
        key = partition.key
        del self._partitions[key]
        self.replica_counts.set_figures(key, None)
        self._count_replicas()
        self._follower.touch(key)
        self._isr_dirty.discard(key)
        effects = partition.lose_leadership(self._clock())
        if delete_log:
            partition.delete()
        else:
            partition.stop()
        log.info("%s: replica removed from broker %d", partition.name, self.broker_id)
        self._execute(partition, effects)

    def _refresh_fetch_sources(self) -> None:
        """After a round of replica changes: the leaders to fetch from, and the touched
        partitions' fetch entries, each costing what the round changed."""
        self._follower.refresh(self._clock())
        sources = self._follower.fetch_sources(self.broker_id)
        if sources != self._fetch_sources:
            self._fetch_sources = sources
            self.fetch_wakeup.set()
