"""One partition replica on this broker: its Log, its role, and the role's state.

Rules (docs/design/replication.md#leader-epoch-cache, #truncate-on-fetch, #caught-up-time,
#high-watermark; Kafka's `Partition.makeLeader` / `makeFollower`):
- A replica's decisions are its `PartitionCore` (`partition_core`), which the replica manager
  steps and whose effects it executes; role changes step it here.
- A replica is a leader (it holds a `PartitionLeaderState`, the core's leader state),
  a follower (it holds a `FollowerFetchState`: whom it fetches from, at which leader epoch, its
  fetch offset and last fetched leader epoch, and a back-off deadline), or neither (stopped).
- Becoming leader of a new leader epoch writes `assign(leader_epoch, LEO)` into the leader-epoch
  cache (the core's `AssignLeaderEpoch`) before anything else, synchronously: a follower may
  hold entries of an epoch this replica never saw, and this replica must still answer with a
  boundary above them (docs/design/replication.md#leader-epoch-cache).
- Every replica keeps the idempotent-producer table, leader or follower, as Kafka's do, so a
  follower that is elected answers produces at once, without reading its log. The table is
  loaded when the replica first takes a role, unless the broker's start-up loaded it already,
  off the event loop (`producer_state_loader`: the newest producer snapshot at or below the
  LEO plus the batch headers after it, else the log's headers; of the records only control
  batches' markers are decoded).
  Every append updates it (`append_as_leader`, `append_as_follower`); a truncation reloads
  it, since an applied batch cannot be taken back.
- Transactions (the table's `partition_transactions`): of an appended control batch the one
  marker record is decoded (leader and follower alike; nothing else of any batch is), so the
  table closes the producer's transaction as a commit or an abort, and an ABORT's entry goes
  to the `.txnindex` of the segment holding the marker (`Log.append_aborted_transactions`).
  A leader writes markers only for a coordinator (`append_marker_as_leader`); a client's
  control batch is refused by the log. A `.txnindex` a read finds damaged is rebuilt from the
  log (`aborted_transactions`).
- A producer snapshot `<base>.snapshot` is written when an append rolls a new segment, as of
  that base (the batches before the roll applied, the ones after not yet), and one at the LEO
  when the replica manager stops; snapshots above the LEO (a truncation) are deleted at once,
  those below the log start (retention) at the next snapshot or producer-expiry check. A
  snapshot that fails its checks is deleted and an older one, or the log, is used instead.
- A follower starts fetching at its LEO with `last_fetched_epoch` = its log's latest leader
  epoch (truncation on fetch, KIP-101): it never truncates to its high watermark. Only a log
  without leader epochs (nothing written with a leader epoch) starts at its HW, as Kafka does.
- The leader core's high watermark is mirrored into the Log after every change, so the log
  manager's periodic checkpoint persists it (`mirror_high_watermark`).

Theory of operation: the replica manager owns every `Partition` and drives it from metadata
(`make_leader`, `make_follower`, `delete`); it does the waking of delayed operations, since it
owns the purgatories. This class keeps the per-replica decisions that touch the Log in one
place, so the manager does not reach into storage for them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from uuid import UUID

from replog.errors import CorruptIndexError, UnknownTopicOrPartitionError
from replog.quorum.metadata.partition_registration import PartitionRegistration
from replog.record.control_record import EndTxnMarker, batch_marker
from replog.record.header import BatchHeader
from replog.record.keyless import refuse_keyless_records
from replog.replication.follower_truncation import initial_fetch_offset
from replog.replication.leader_state import (
    PartitionLeaderState,
    PartitionReplicationConfig,
    ReplicaEligibility,
)
from replog.replication.messages import NO_LEADER_EPOCH, FetchPartitionResult, LeaderIdAndEpoch
from replog.replication.partition_core import Effects, PartitionCore
from replog.replication.partition_effects import AssignLeaderEpoch
from replog.replication.partition_events import LeadershipChanged, LeadershipLost
from replog.replication.producer_snapshot import encode_producer_snapshot
from replog.replication.producer_state import ProducerStateTable
from replog.server.data_plane.producer_state_loader import (
    PreloadedTable,
    ProducerExpiry,
    drop_snapshots_outside_log,
    load_producer_table,
)
from replog.storage.aborted_transactions import AbortedTransaction
from replog.storage.log import Log
from replog.storage.log_append_info import LogAppendInfo
from replog.storage.log_manager import LogManager
from replog.storage.producer_snapshot_file import ProducerSnapshotFiles

log = logging.getLogger("replog.server.data_plane.partition")


@dataclass(slots=True)
class FollowerFetchState:
    """What a follower replica fetches next (docs/design/replication.md#truncate-on-fetch)."""

    leader_id: int  # -1: no leader, nothing to fetch
    leader_epoch: int  # the epoch the follower fetches in (the request's current_leader_epoch)
    fetch_offset: int  # always the log end offset once a step is over
    last_fetched_epoch: int  # leader epoch of the last batch in the log; -1 none
    backoff_until_ms: int = 0  # no fetch before this (an error, a dead leader)
    # Whether the last answer that brought records (or the first) left the log at the
    # leader's HW, or an OFFSET_OUT_OF_RANGE reset left it at the leader's LEO (Kafka's
    # `PartitionFetchState.isReplicaInSync`, whose lag an empty answer leaves alone): a
    # caught-up replica is never left out by the follower throttle.
    caught_up: bool | None = None  # None: no answer yet (not caught up)


class Partition:
    """One replica of one topic-partition hosted by this broker."""

    def __init__(
        self,
        *,
        topic: str,
        topic_id: UUID,
        partition: int,
        local_broker_id: int,
        log: Log,
        log_manager: LogManager,
        producer_expiry: Callable[[], ProducerExpiry] | None = None,
        preloaded: PreloadedTable | None = None,
        alter_partition_retry_ms: int = 1000,
    ) -> None:
        self.topic = topic
        self.topic_id = topic_id
        self.partition = partition
        self.local_broker_id = local_broker_id
        self.log = log
        self._log_manager = log_manager
        self.name = f"{topic}-{partition}"
        # A plain attribute, not a property: read for every partition of every fetch round.
        self.key: tuple[str, int] = (topic, partition)
        self.registration: PartitionRegistration | None = None
        self.leader_state: PartitionLeaderState | None = None
        self.follower: FollowerFetchState | None = None
        self._producer_expiry = producer_expiry
        self.producer_snapshots = ProducerSnapshotFiles(log.directory, log.file_system)
        if preloaded is not None and preloaded.matches(log):
            # Loaded off the event loop (`producer_state_loader`): by the broker's start-up,
            # or, empty, with a new log (no table is made here only to be replaced).
            self.producer_state = preloaded.table
            # Whether the table matches the log (loaded, then kept by every append and
            # truncation).
            self.producer_state_loaded = True
            # The log start the snapshots below it were last deleted for (-1: never).
            self._snapshots_pruned_below = log.log_start_offset
        else:
            self.producer_state = ProducerStateTable(self.name)
            self.producer_state_loaded = False
            self._snapshots_pruned_below = -1
        # The replica's decisions (`partition_core`); `leader_state` is its leader state,
        # kept here as a plain attribute for the per-fetch reads.
        self.core = PartitionCore(
            topic=topic,
            topic_id=topic_id,
            partition=partition,
            local_broker_id=local_broker_id,
            producers=self.producer_state,
            alter_partition_retry_ms=alter_partition_retry_ms,
        )
        self.stopped = False
        # The last answer without records this leader built for a fetch of it: every fetch of
        # an idle partition has the same one while its offsets stand still, and a follower
        # asks for each partition it follows every round (`ReplicaManager._read_partition`).
        self.empty_fetch_result: FetchPartitionResult | None = None

    def __repr__(self) -> str:
        role = "leader" if self.leader_state else "follower" if self.follower else "none"
        return f"Partition({self.name!r}, {role}, {self.log!r})"

    @property
    def is_leader(self) -> bool:
        return self.leader_state is not None

    @property
    def leader_epoch(self) -> int:
        return self.registration.leader_epoch if self.registration else NO_LEADER_EPOCH

    def current_leader(self) -> LeaderIdAndEpoch:
        """The leader as this replica's last registration names it."""
        if self.registration is None:
            return LeaderIdAndEpoch(-1, NO_LEADER_EPOCH)
        return LeaderIdAndEpoch(self.registration.leader, self.registration.leader_epoch)

    # --- role changes -------------------------------------------------------------------------

    def make_leader(
        self,
        registration: PartitionRegistration,
        *,
        config: PartitionReplicationConfig,
        eligibility: ReplicaEligibility,
        now_ms: int,
    ) -> Effects:
        """Lead at `registration`'s leader epoch; the core's effects, for the replica manager
        to execute (`partition_core`)."""
        assert registration.leader == self.local_broker_id, (
            f"{self.name}: make_leader on broker {self.local_broker_id} but the leader is "
            f"{registration.leader}"
        )
        starts = self.leader_state is None
        if starts:
            self.follower = None
            self.ensure_producer_state()
        effects = self.core.step(
            LeadershipChanged(
                registration=registration,
                leader_log_end_offset=self.log.log_end_offset,
                log_high_watermark=self.log.high_watermark,
                config=config,
                eligibility=eligibility,
            ),
            now_ms,
        )
        first = effects[0]
        if type(first) is AssignLeaderEpoch:
            # Durable before any append of this epoch, and before any follower can ask
            # (docs/design/replication.md#leader-epoch-cache).
            try:
                self.log.leader_epoch_cache.assign(first.leader_epoch, first.start_offset)
            except BaseException:
                # Without the entry this replica must not lead: the core forgets it.
                self.lose_leadership(now_ms)
                raise
            effects = effects[1:]
        leader_state = self.leader_state = self.core.leader
        if starts and log.isEnabledFor(logging.DEBUG):  # not the arguments' cost per leader
            assert leader_state is not None
            log.debug(
                "%s: broker %d leads at leader epoch %d (LEO %d, HW %d, ISR %s)",
                self.name,
                self.local_broker_id,
                registration.leader_epoch,
                self.log.log_end_offset,
                leader_state.high_watermark,
                list(registration.isr),
            )
        self.registration = registration
        self.mirror_high_watermark()
        return effects

    # --- producer state -----------------------------------------------------------------------

    def ensure_producer_state(self) -> None:
        """Load the producer table if this replica has not yet (see `load_producer_state`)."""
        if not self.producer_state_loaded:
            self.load_producer_state()

    def load_producer_state(self) -> None:
        """Make the producer table match the log (`producer_state_loader`'s Rules)."""
        expiry = self._producer_expiry() if self._producer_expiry is not None else None
        load_producer_table(
            self.producer_state, self.name, self.log, self.producer_snapshots, expiry
        )
        self._snapshots_pruned_below = self.log.log_start_offset
        self.producer_state_loaded = True

    def _drop_snapshots_outside_log(self) -> None:
        drop_snapshots_outside_log(self.log, self.producer_snapshots)
        self._snapshots_pruned_below = self.log.log_start_offset

    def write_producer_snapshot(self, offset: int | None = None) -> None:
        """Write the table as a snapshot at `offset` (default: the LEO, which it is as of),
        and delete the snapshots below the log start."""
        if not self.producer_state_loaded:
            return
        plog = self.log
        snapshots = self.producer_snapshots
        at = plog.log_end_offset if offset is None else offset
        snapshots.write(at, encode_producer_snapshot(self.producer_state.entries().values()))
        self.prune_producer_snapshots()

    def prune_producer_snapshots(self) -> None:
        """Delete the snapshots below the log start (retention or DeleteRecords moved it):
        nothing reads them any more. Lists the directory only when the log start moved since
        the last pruning, so the replica manager's periodic call costs nothing on idle logs."""
        log_start = self.log.log_start_offset
        if log_start == self._snapshots_pruned_below:
            return
        snapshots = self.producer_snapshots
        try:
            snapshots.delete_all(o for o in snapshots.offsets() if o < log_start)
        except OSError as exc:
            # Files nothing reads: the next pruning tries again.
            log.warning("%s: old producer snapshots not deleted: %s", self.name, exc)
            return
        self._snapshots_pruned_below = log_start

    def write_producer_snapshot_at_stop(self) -> bool:
        """At a clean stop, snapshot the table at the LEO, so the next start loads it without
        replaying the active segment; skipped when there is nothing to replay (an empty
        active segment: its base's snapshot, if any, is as good), which keeps a stop of a
        broker with many idle partitions from writing a file for each. Returns whether it
        tried to write one."""
        plog = self.log
        if not plog.closed and plog.log_end_offset > plog.active_segment.base_offset:
            self._write_snapshot_or_warn(plog.log_end_offset)
            return True
        return False

    def append_as_leader(
        self, records: bytes | memoryview, leader_epoch: int, *, coordinator: bool = False
    ) -> LogAppendInfo:
        """Append a produce's batches to the log and record them in the producer table; a
        compacted log refuses records without a key (`replog.record.keyless`, Kafka's
        LogValidator), the only records whose keys a broker reads. `coordinator`: the broker's
        own coordinator appends (its producer batches carry no sequence)."""
        if self.log.config.compacts:
            refuse_keyless_records(records, self.name)
        base_before = self.log.active_segment.base_offset
        info = self.log.append_as_leader(records, leader_epoch, allow_control=coordinator)
        self._record_appended(info.batches, base_before, records)
        return info

    def append_marker_as_leader(self, batch: bytes, leader_epoch: int) -> LogAppendInfo:
        """Append a coordinator's end-transaction marker (one control batch) as leader."""
        base_before = self.log.active_segment.base_offset
        info = self.log.append_as_leader(batch, leader_epoch, allow_control=True)
        self._record_appended(info.batches, base_before, batch)
        return info

    def append_as_follower(
        self, records: bytes | memoryview, *, leader_epoch: int | None = None
    ) -> LogAppendInfo:
        """Append fetched batches as they are and record them in the producer table;
        `leader_epoch`, of the leader that sent them, bounds theirs (`Log.append_as_follower`)."""
        base_before = self.log.active_segment.base_offset
        info = self.log.append_as_follower(records, leader_epoch=leader_epoch)
        self._record_appended(info.batches, base_before, records)
        return info

    def _record_appended(
        self,
        headers: Sequence[BatchHeader],
        base_before: int,
        records: bytes | memoryview,
    ) -> None:
        """`headers` (of the batches of `records`, in order, as stamped) are in the log."""
        if not self.producer_state_loaded:
            return  # loaded from the log, these batches included, when the replica takes a role
        table = self.producer_state
        update = table.update
        new_base = self.log.active_segment.base_offset
        # If the append rolled a segment, snapshot the table as of the new base (of the last
        # roll, if it rolled more than once), between the batches before it and those after.
        rolled_to = new_base if new_base != base_before else None
        aborted: list[AbortedTransaction] | None = None
        for index, header in enumerate(headers):
            if rolled_to is not None and header.base_offset >= rolled_to:
                self._write_snapshot_or_warn(rolled_to)
                rolled_to = None
            if not header.is_control:
                update(header)
                continue
            marker = self._marker_of(records, headers, index) if header.records_count else None
            entry = update(header, marker)
            if entry is not None:
                aborted = [*(aborted or ()), entry]
            # A closed transaction waits only for the HW to pass its marker.
            table.transactions.on_high_watermark(self.log.high_watermark)
        if aborted:
            self.log.append_aborted_transactions(aborted)

    def _marker_of(
        self, records: bytes | memoryview, headers: Sequence[BatchHeader], index: int
    ) -> EndTxnMarker:
        """The marker of control batch `headers[index]`: appends keep every batch's size, so
        it starts where the sizes of the batches before it add up to."""
        position = sum(h.size_in_bytes for h in headers[:index])
        return batch_marker(records, position, headers[index], self.name)

    def aborted_transactions(
        self, fetch_offset: int, upper_bound_offset: int
    ) -> list[AbortedTransaction]:
        """What a read_committed read of [fetch_offset, upper_bound_offset) must be told of
        (`Log.collect_aborted_transactions`). An index found damaged is rebuilt from the log
        (its segment and the later ones, by a reload of the producer state, as recovery
        rebuilds them) and read again: a corrupt `.txnindex` costs a replay, not the read."""
        plog = self.log
        try:
            return plog.collect_aborted_transactions(fetch_offset, upper_bound_offset)
        except CorruptIndexError as exc:
            log.warning("%s: %s; rebuilding the aborted transaction indexes", self.name, exc)
        plog.txn_index_rebuild_from = plog.segment_base_of(fetch_offset)
        self.load_producer_state()
        return plog.collect_aborted_transactions(fetch_offset, upper_bound_offset)

    def last_stable_offset(self, high_watermark: int) -> int:
        """The LSO: below every open or unreplicated transaction, at most `high_watermark`."""
        return self.producer_state.last_stable_offset(high_watermark)

    def _write_snapshot_or_warn(self, offset: int) -> None:
        try:
            self.write_producer_snapshot(offset)
        except OSError as exc:
            # Only a cache of the log's headers: the next load replays more instead.
            log.warning("%s: producer snapshot at %d not written: %s", self.name, offset, exc)

    def make_follower(self, registration: PartitionRegistration, now_ms: int) -> bool:
        """Follow `registration.leader`; returns whether the fetch state was (re)started.

        The fetch state is kept when only the partition epoch moved (an ISR change) under the
        same leader and leader epoch: the follower is mid-stream and right where it is. The
        waiters the lost leadership concerns are the replica manager's to wake.
        """
        was_leader = self.leader_state is not None
        self.lose_leadership(now_ms)
        self.ensure_producer_state()
        self.registration = registration
        current = self.follower
        if (
            current is not None
            and not was_leader
            and current.leader_id == registration.leader
            and current.leader_epoch == registration.leader_epoch
        ):
            return False
        latest_epoch = self.log.latest_leader_epoch
        start = initial_fetch_offset(
            log_end_offset=self.log.log_end_offset,
            latest_leader_epoch=latest_epoch,
            high_watermark=self.log.high_watermark,
        )
        if start < self.log.log_end_offset:
            # Only a log without any leader epoch gets here: it cannot ask about epochs.
            log.warning(
                "%s: no leader epoch in the log; truncating to the high watermark %d",
                self.name,
                start,
            )
            self.truncate_to(start)
        self.follower = FollowerFetchState(
            leader_id=registration.leader,
            leader_epoch=registration.leader_epoch,
            fetch_offset=self.log.log_end_offset,
            last_fetched_epoch=self._latest_epoch_or_none(),
        )
        if log.isEnabledFor(logging.DEBUG):  # not the arguments' cost per new follower
            log.debug(
                "%s: broker %d follows %s at leader epoch %d from offset %d "
                "(last fetched leader epoch %d)",
                self.name,
                self.local_broker_id,
                f"broker {registration.leader}" if registration.leader >= 0 else "no leader",
                registration.leader_epoch,
                self.follower.fetch_offset,
                self.follower.last_fetched_epoch,
            )
        return True

    def lose_leadership(self, now_ms: int) -> Effects:
        """This replica no longer leads (or never did): the core's effects."""
        self.leader_state = None
        return self.core.step(LeadershipLost(), now_ms)

    def stop(self) -> None:
        """No role any more (the replica manager fails its waiters)."""
        self.lose_leadership(0)
        self.follower = None
        self.producer_state.truncate()
        self.producer_state_loaded = False
        self.stopped = True

    def delete(self) -> None:
        """Stop and delete the log with its checkpoint entries."""
        self.stop()
        try:
            self._log_manager.delete_log(self.topic, self.partition)
        except UnknownTopicOrPartitionError:
            log.info("%s: no log to delete", self.name)

    # --- log changes --------------------------------------------------------------------------

    def mirror_high_watermark(self) -> None:
        """Copy the leader core's HW into the Log (persisted by the HW checkpoint task)."""
        leader_state = self.leader_state
        if leader_state is not None and leader_state.high_watermark != self.log.high_watermark:
            self.log.update_high_watermark(leader_state.high_watermark)

    def truncate_to(self, offset: int) -> None:
        """Truncate through the log manager, which rewrites the recovery-point checkpoint;
        the producer table is reloaded as of the new LEO."""
        if self._log_manager.truncate_to(self.topic, self.partition, offset):
            if self.producer_state_loaded:
                self.load_producer_state()  # deletes the snapshots above the new LEO first
            else:
                self._drop_snapshots_outside_log()
        self.sync_follower_offsets()

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Empty the log and restart it at `offset` (the log tells the log manager); no
        producer is left."""
        self._log_manager.truncate_fully_and_start_at(self.topic, self.partition, offset)
        self.producer_snapshots.delete_all(self.producer_snapshots.offsets(), durable=True)
        self.producer_state.truncate()
        self.sync_follower_offsets()

    def sync_follower_offsets(self) -> None:
        """After an append or truncation: fetch from the LEO, with the log's latest epoch."""
        follower = self.follower
        if follower is not None:
            follower.fetch_offset = self.log.log_end_offset
            follower.last_fetched_epoch = self._latest_epoch_or_none()

    def _latest_epoch_or_none(self) -> int:
        latest = self.log.latest_leader_epoch
        return NO_LEADER_EPOCH if latest is None else latest
