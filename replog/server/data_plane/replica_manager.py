"""The broker's data plane: every partition replica on this broker, driven by metadata, serving
Produce, Fetch, ListOffsets, OffsetsForLeaderEpoch and DeleteRecords, and replicating as a
follower through synchronous steps an async fetcher drives.

Rules (docs/design/replication.md; Kafka's `ReplicaManager`):
- `ReplicaManager` decides nothing of its own: each replica's `PartitionCore` decides (acks
  gating, produce purgatory admission, duplicates, HW advance, ISR shrink and expansion, what
  the AlterPartition sender gets and when it is retried, which waiters to re-check), stepped
  with what happened and answered with effects; `fetch_rules`, `follower_truncation`,
  `request_admission` and `purgatory` besides. The manager is assembled from one class per
  role, each in its module with its rules, sharing the replica map and the executor of the
  cores' effects (`replica_shell`):
  metadata images to local changes (`replica_applier`), the roles replicas take
  (`replica_roles`), their logs (`replica_logs`), the settings they take (`replica_configs`),
  Produce and WriteTxnMarkers (`produce_path`), Fetch (`fetch_serving`), ListOffsets,
  OffsetsForLeaderEpoch and DeleteRecords (`offset_requests`), AlterPartition
  (`isr_changes`), the periodic work (`replica_timers`), producer tables
  (`replica_producers`); here, the follower side's routes (`follower_fetch`), start and stop.
- Waiting requests: `delayed_operations`. Every waiting operation is bounded
  (`purgatory_pending_max` per purgatory); every error names the topic-partition and carries
  its Kafka class.
- Stop answers every waiting request NOT_LEADER_OR_FOLLOWER, after the timers and the applier
  stopped, and then writes the producer snapshots.

Theory of operation: everything here runs on the event loop thread and is synchronous except the
`await` of a delayed operation's future and the applier's worker-thread batches (which touch
only logs no replica uses yet, and epoch files under their own lock). This shell owns the
replicas, reads and writes logs, and wakes delayed operations on the keys the effects name. It
is the facade of the data plane: `DelayedOperations` (the purgatories) and `FollowerFetchSteps`
(the follower side) read its partition map, which only its roles change. Timers run in
`tick(now_ms)` (`replica_timers`).
"""

from __future__ import annotations

import asyncio
import contextlib

from replog.replication.fetch_session import FetchChanges
from replog.replication.messages import FetchRequest, FetchResponse
from replog.server.config.replica_manager_config import ReplicaManagerConfig
from replog.server.data_plane.delayed_operations import DelayedOperations
from replog.server.data_plane.fetch_serving import FetchServing
from replog.server.data_plane.isr_changes import IsrChanges
from replog.server.data_plane.offset_requests import OffsetRequests
from replog.server.data_plane.produce_path import ProducePath
from replog.server.data_plane.replica_applier import ReplicaApplier
from replog.server.data_plane.replica_producers import ReplicaProducers
from replog.server.data_plane.replica_timers import ReplicaTimers

__all__ = ["ReplicaManager", "ReplicaManagerConfig"]


class ReplicaManager(
    ReplicaApplier,
    ProducePath,
    FetchServing,
    OffsetRequests,
    IsrChanges,
    ReplicaTimers,
    ReplicaProducers,
):
    """Every partition replica of this broker (module docstring). A MetadataPublisher."""

    name = "replica-manager"

    def _wire_roles(self) -> None:
        """The roles' hooks: the purgatories re-read fetches, the cleaner asks the replicas."""
        self._delayed = DelayedOperations(
            broker_id=self.broker_id,
            pending_max=self.config.purgatory_pending_max,
            partitions=self._partitions,
            current_leader=self._current_leader,
            read_fetch=lambda request, now_ms, reread: self._read_fetch(
                request, now_ms, initial=False, reread=reread
            ),
            clock=self._clock,
            on_new_deadline=self._on_new_deadline,
        )
        self.log_manager.cleaner.producer_last_batches = self._producer_last_batches
        self.log_manager.cleaner.first_unstable_offset = self._first_unstable_offset

    def fetch_sources(self) -> list[int]:
        """The leader broker ids this broker fetches from."""
        return list(self._fetch_sources)

    def build_follower_fetch(self, source_broker_id: int, now_ms: int) -> FetchRequest | None:
        """The next Fetch to send to `source_broker_id`; None when nothing is due."""
        return self._follower.build(source_broker_id, now_ms)

    def follower_fetch_changes(self, source_broker_id: int) -> FetchChanges | None:
        """What the last request built for `source_broker_id` changed since the one built
        before it: its fetch session encodes only that (`follower_fetch`, dirty-only)."""
        return self._follower.changes(source_broker_id)

    def process_follower_fetch(
        self,
        source_broker_id: int,
        request: FetchRequest,
        response: FetchResponse,
        now_ms: int,
    ) -> None:
        """Apply a leader's Fetch answer (docs/design/replication.md#follower-truncation,
        #truncate-on-fetch, #follower-out-of-range, #high-watermark "Follower HW")."""
        fetched = sum(len(result.records) for result in response.partitions)
        if fetched:
            self.counters.replication_bytes_in.inc(fetched)
        self._follower.process(source_broker_id, request, response, now_ms)

    def follower_fetch_failed(
        self, source_broker_id: int, request: FetchRequest, now_ms: int
    ) -> None:
        """The fetch itself failed (peer down, timeout): back off every partition it asked."""
        self._follower.fetch_failed(source_broker_id, request, now_ms)

    async def start(self) -> None:
        """Run `tick` on the event loop whenever it is due, and apply metadata changes from
        now on in rounds, off the loop where they touch files."""
        if self._timer_task is None:
            self._stopped = False
            self._timer_task = self._spawner.spawn(
                self._run_timers(), name="the replica manager's timers"
            )
            self._applier_task = self._spawner.spawn(
                self._run_applier(), name="the replica manager's metadata applier"
            )

    async def stop(self) -> None:
        """Stop the timers, answer every waiting request (NOT_LEADER_OR_FOLLOWER), and write
        the replicas' producer snapshots, a slice a loop turn."""
        self._stopped = True
        task, self._timer_task = self._timer_task, None
        if task is not None:
            self._timers_changed.set()  # the loop sees `_stopped` and returns
            await task
        applier, self._applier_task = self._applier_task, None
        if applier is not None:
            applier.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await applier
        maker, self._file_maker = self._file_maker, None
        if maker is not None:
            await asyncio.to_thread(maker.close)
        # One sync for every epoch checkpoint still waiting, rather than one each at the
        # logs' close.
        await self._syncs.drain()
        await self._syncs.stop()
        self._delayed.answer_all_shutting_down()
        await self._write_producer_snapshots_at_stop()
