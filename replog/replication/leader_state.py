"""The leader side of one partition: high watermark, ISR changes and the acks=all rules.

Rules (Kafka's `Partition.scala`; docs/design/replication.md#caught-up-time, #isr-shrink,
#isr-expansion, #high-watermark, #acks-and-min-isr, #low-watermark):
- Becoming leader: the leader epoch start offset is the leader's log end offset; every
  follower's progress is reset as for "just became leader"
  (docs/design/replication.md#caught-up-time); the high watermark starts at the log's (checkpointed)
  value, capped at the log end offset, and may then rise.
- High watermark (docs/design/replication.md#high-watermark): it does not move at all while the
  committed ISR is smaller than the effective min ISR = min(min.insync.replicas, number of assigned
  replicas). Otherwise the candidate is the leader log end offset, lowered to the log end offset of
  every follower that is in the maximal ISR, or that is caught up and ISR-eligible (a replica about
  to join). The high watermark only rises to the candidate; it never decreases and never exceeds the
  leader log end offset. A follower whose log end offset is unknown (-1) and that is in the maximal
  ISR pins the candidate below any high watermark, so nothing moves until it fetches.
  It is re-evaluated after a leader append, a follower fetch that changed that follower's log
  end offset, becoming leader, a new registration, a committed ISR change, and changes of
  eligibility or config. A rising log start offset lifts it (`on_log_start_offset`).
- ISR shrink (docs/design/replication.md#isr-shrink), only with no ISR change pending: the followers
  of the committed ISR that are not caught up (`ReplicaProgress.is_caught_up`,
  `replica.lag.time.max.ms`) or that have no progress are dropped. While the shrink is pending the
  maximal ISR is still the old one, so a failed shrink can never have let the high watermark
  advance.
- ISR expansion (docs/design/replication.md#isr-expansion), checked on every follower fetch, only
  with no ISR change pending: a follower outside the committed ISR joins when it is ISR-eligible
  (registered, unfenced, not in controlled shutdown, and the broker epoch of its fetch is -1 or the
  registered one), and its log end offset is >= the high watermark and >= the leader epoch start
  offset. There is no time condition. While pending it already counts in the maximal ISR (the
  stricter choice).
- Stale fetches (docs/design/replication.md#caught-up-time, KRaft fencing): a fetch whose broker
  epoch is not -1 and is lower than the broker's registered epoch fails with NOT_LEADER_OR_FOLLOWER,
  as does a fetch from a replica that is not assigned.
- AlterPartition answers: a committed answer for the current leader epoch and a partition
  epoch >= the current one becomes the committed ISR. A failure with INELIGIBLE_REPLICA or
  OPERATION_NOT_ATTEMPTED reverts to the committed state (the controller says it applied
  nothing). FENCED_LEADER_EPOCH, INVALID_UPDATE_VERSION, UNKNOWN_TOPIC_OR_PARTITION,
  UNKNOWN_TOPIC_ID, INVALID_REQUEST and NEW_LEADER_ELECTED keep the change pending, not to be
  sent again, until a registration with a newer partition epoch or leader epoch settles it.
  Any other failure keeps it pending and asks for it to be sent again.
- Metadata (`update_registration`): an older partition epoch is ignored. The next leader epoch
  (this broker stays leader) resets followers as for "already leader"
  (docs/design/replication.md#caught-up-time); a leader epoch further on (this broker missed one,
  which another broker may have led) resets them as for a new leader, forgetting their log end
  offsets (a deviation from Kafka, docs/replication.md). Either moves the leader epoch start offset
  to the current log end offset. A newer partition epoch, or a new leader epoch, replaces the
  committed ISR and clears any pending change.
- KIP-704: a leader elected while the partition is RECOVERING treats itself as RECOVERED at
  once (as Kafka's `makeLeader` does) and reports it: `pending_isr_change` is at once a change
  with the same ISR and leader_recovery_state RECOVERED. Every change it sends says RECOVERED.
- acks (docs/design/replication.md#acks-and-min-isr): before an acks=all append the committed ISR
  must reach the effective min ISR (NOT_ENOUGH_REPLICAS, nothing appended). A waiting acks=all
  produce completes once the high watermark reaches its required offset: with success if the maximal
  ISR reaches the effective min ISR, else with NOT_ENOUGH_REPLICAS_AFTER_APPEND.
- Low watermark (docs/design/replication.md#low-watermark): the minimum of the leader's log start
  offset and the log start offset of every follower on an alive (unfenced) broker; -1 while such a
  follower has not fetched.

Theory of operation:
- This object holds no log. Every call that depends on the log passes the leader log end
  offset captured by the shell, and time arrives as `now_ms`; the shell mirrors
  `high_watermark` into the log and wakes its purgatories whenever a call returns True.
- The committed ISR (`isr`) is what the controller has accepted; the maximal ISR adds a
  pending expansion and keeps the members of a pending shrink. Everything that makes data
  visible or acknowledges it reads the maximal ISR, so a pending change only ever makes the
  leader stricter. Only the min-ISR gates read the committed ISR, as in Kafka.
- A follower's progress may be parked on a fetch session's clock (`park_follower`,
  replica_progress "Parked progress"): its idle partitions' fetches are then recorded once per
  session round for all of them, not per partition, and every rule here reads the parked
  values through `is_caught_up` and `progress`, so the ISR and HW decisions are those of a
  leader that records every partition's fetch each round (docs/replication.md, "Dirty-only
  rounds", has the argument).
- At most one ISR change is in flight (`pending_isr_change`). The shell sends
  `isr_change_to_send` and feeds the answer back; each answer names the change it answers, so
  a late answer to a change that metadata already settled is ignored.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from uuid import UUID

from replog.common.frozen_init import fast_frozen_init
from replog.errors import (
    KafkaError,
    NotEnoughReplicasAfterAppendError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
)
from replog.quorum.metadata.image import ClusterImage, frozen_mapping
from replog.quorum.metadata.partition_registration import PartitionRegistration
from replog.quorum.metadata.records import LeaderRecoveryState
from replog.replication.replica_progress import (
    UNKNOWN_BROKER_EPOCH,
    FetchSessionClock,
    ReplicaProgress,
)

ANY_BROKER_EPOCH = -1  # a registered epoch of -1 accepts any fetch broker epoch (tests)

# AlterPartition errors after which the controller certainly applied nothing (Kafka's
# handleAlterPartitionError): the leader goes back to its committed state.
_REVERT_ERRORS = frozenset({"INELIGIBLE_REPLICA", "OPERATION_NOT_ATTEMPTED"})
# Errors that mean the leader's state is out of date: wait for metadata, do not resend.
_AWAIT_METADATA_ERRORS = frozenset(
    {
        "UNKNOWN_TOPIC_OR_PARTITION",
        "UNKNOWN_TOPIC_ID",
        "FENCED_LEADER_EPOCH",
        "INVALID_UPDATE_VERSION",
        "INVALID_REQUEST",
        "NEW_LEADER_ELECTED",
    }
)


@dataclass(frozen=True, slots=True)
class PartitionReplicationConfig:
    min_insync_replicas: int = 1
    replica_lag_time_ms_max: int = 30000

    def __post_init__(self) -> None:
        if self.min_insync_replicas < 1:
            raise ValueError(f"min.insync.replicas must be >= 1, not {self.min_insync_replicas}")
        if self.replica_lag_time_ms_max < 0:
            raise ValueError(
                f"replica.lag.time.max.ms must be >= 0, not {self.replica_lag_time_ms_max}"
            )


@dataclass(frozen=True, slots=True)
class ReplicaEligibility:
    """Brokers that may join an ISR (docs/design/replication.md#isr-expansion): registered,
    unfenced, not in controlled shutdown.

    `alive_broker_epochs` also holds the unfenced brokers in controlled shutdown: they may not
    join an ISR, but their registered epoch still fences stale fetches and their log start
    offset still counts for the low watermark. None means "the same as `broker_epochs`".
    """

    broker_epochs: Mapping[int, int]  # eligible broker id -> registered broker epoch
    alive_broker_epochs: Mapping[int, int] | None = None

    def is_eligible(self, broker_id: int, fetch_broker_epoch: int = UNKNOWN_BROKER_EPOCH) -> bool:
        registered = self.broker_epochs.get(broker_id)
        if registered is None:
            return False
        return registered == ANY_BROKER_EPOCH or fetch_broker_epoch in (
            UNKNOWN_BROKER_EPOCH,
            registered,
        )

    def registered_broker_epoch(self, broker_id: int) -> int | None:
        """The registered epoch of an alive broker; None when it is fenced or unknown."""
        alive = self.broker_epochs if self.alive_broker_epochs is None else self.alive_broker_epochs
        return alive.get(broker_id)

    def is_alive(self, broker_id: int) -> bool:
        return self.registered_broker_epoch(broker_id) is not None

    @classmethod
    def from_cluster(cls, cluster: ClusterImage) -> ReplicaEligibility:
        return cls(
            broker_epochs=frozen_mapping(
                {b.broker_id: b.broker_epoch for b in cluster.brokers.values() if b.is_active}
            ),
            alive_broker_epochs=frozen_mapping(
                {b.broker_id: b.broker_epoch for b in cluster.brokers.values() if not b.fenced}
            ),
        )

    @classmethod
    def everyone(cls, broker_ids: Iterable[int]) -> ReplicaEligibility:
        """Every broker in `broker_ids` is eligible, with any broker epoch (tests)."""
        return cls(broker_epochs=frozen_mapping(dict.fromkeys(broker_ids, ANY_BROKER_EPOCH)))


@dataclass(frozen=True, slots=True)
class IsrChange:
    """An AlterPartition the leader asks the controller for (docs/design/replication.md#isr-shrink,
    #isr-expansion); the shell sends it."""

    topic: str
    topic_id: UUID
    partition: int
    leader_epoch: int
    partition_epoch: int
    new_isr: tuple[int, ...]
    broker_epochs: tuple[int, ...]  # aligned with new_isr; -1 = not checked
    leader_recovery_state: int  # 0 RECOVERED, 1 RECOVERING
    is_expansion: bool


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class FollowerFetchUpdate:
    high_watermark_moved: bool
    isr_change: IsrChange | None  # an expansion to send now, if any
    # The follower reported a different log start offset, so the low watermark may have moved
    # (the shell re-checks DeleteRecords waiting on this partition).
    follower_log_start_offset_moved: bool = False


_NOTHING_MOVED = FollowerFetchUpdate(high_watermark_moved=False, isr_change=None)


class PartitionLeaderState:
    """One partition this broker leads: HW, ISR and acks rules. No I/O."""

    def __init__(
        self,
        *,
        topic: str,
        topic_id: UUID,
        partition: int,
        local_broker_id: int,
        registration: PartitionRegistration,
        leader_log_end_offset: int,
        high_watermark: int,
        config: PartitionReplicationConfig,
        eligibility: ReplicaEligibility,
        now_ms: int,
    ) -> None:
        self._topic = topic
        self._topic_id = topic_id
        self._partition = partition
        self._local_broker_id = local_broker_id
        self._check_leader(registration)
        self._config = config
        self._eligibility = eligibility
        self._leader_epoch = registration.leader_epoch
        self._partition_epoch = registration.partition_epoch
        self._replicas = tuple(registration.replicas)
        self._isr = tuple(registration.isr)
        recovery = registration.leader_recovery_state
        # The enum's call (a lookup by value, ~1 us) only for a plain int.
        self._committed_recovery_state = (
            recovery if type(recovery) is LeaderRecoveryState else LeaderRecoveryState(recovery)
        )
        self._pending: IsrChange | None = None
        self._awaiting_metadata = False
        self._leader_epoch_start_offset = leader_log_end_offset
        # The log caps a loaded high watermark at its end offset; cap here too so that the
        # "HW <= leader LEO" invariant holds from the first moment.
        self._high_watermark = min(high_watermark, leader_log_end_offset)
        self._progress: dict[int, ReplicaProgress] = {}
        for broker_id in self._replicas:
            if broker_id != local_broker_id:
                progress = ReplicaProgress(broker_id)
                progress.reset_for_new_leadership(in_isr=broker_id in self._isr, now_ms=now_ms)
                self._progress[broker_id] = progress
        self._maybe_propose_recovered()
        self._maybe_increment_high_watermark(leader_log_end_offset, now_ms)

    # --- read-only state -------------------------------------------------------------------

    @property
    def topic(self) -> str:
        return self._topic

    @property
    def topic_id(self) -> UUID:
        return self._topic_id

    @property
    def partition(self) -> int:
        return self._partition

    @property
    def local_broker_id(self) -> int:
        return self._local_broker_id

    @property
    def where(self) -> str:
        """The topic-partition, as error messages name it."""
        return f"{self._topic}-{self._partition}"

    @property
    def leader_epoch(self) -> int:
        return self._leader_epoch

    @property
    def partition_epoch(self) -> int:
        return self._partition_epoch

    @property
    def replicas(self) -> tuple[int, ...]:
        return self._replicas

    @property
    def isr(self) -> tuple[int, ...]:
        """The committed ISR: what the controller accepted."""
        return self._isr

    @property
    def maximal_isr(self) -> tuple[int, ...]:
        """Committed ISR plus a pending expansion; a pending shrink keeps the old members."""
        pending = self._pending
        if pending is None:
            return self._isr
        return self._isr + tuple(r for r in pending.new_isr if r not in self._isr)

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @property
    def leader_epoch_start_offset(self) -> int:
        return self._leader_epoch_start_offset

    @property
    def pending_isr_change(self) -> IsrChange | None:
        """The ISR change sent or to be sent; None when nothing is in flight."""
        return self._pending

    @property
    def awaiting_metadata(self) -> bool:
        """The pending change failed in a way only newer metadata can settle: do not resend."""
        return self._awaiting_metadata

    @property
    def isr_change_to_send(self) -> IsrChange | None:
        """The pending change unless it waits for metadata: what the sender should send."""
        return None if self._awaiting_metadata else self._pending

    @property
    def leader_recovery_state(self) -> LeaderRecoveryState:
        """The committed leader recovery state (KIP-704)."""
        return self._committed_recovery_state

    @property
    def config(self) -> PartitionReplicationConfig:
        return self._config

    @property
    def eligibility(self) -> ReplicaEligibility:
        return self._eligibility

    @property
    def effective_min_isr(self) -> int:
        return min(self._config.min_insync_replicas, len(self._replicas))

    def progress(self, broker_id: int) -> ReplicaProgress | None:
        """A copy of what this leader knows of follower `broker_id`; None if not a follower."""
        progress = self._progress.get(broker_id)
        if progress is None:
            return None
        copy = replace(progress)
        copy.settle()  # parked T and C as they stand (replica_progress, parked progress)
        return copy

    # --- transitions -----------------------------------------------------------------------

    def update_registration(
        self, registration: PartitionRegistration, *, leader_log_end_offset: int, now_ms: int
    ) -> bool:
        """Newer metadata while this broker stays leader; returns whether the HW moved."""
        self._check_leader(registration)
        if (
            registration.partition_epoch < self._partition_epoch
            or registration.leader_epoch < self._leader_epoch
        ):
            # An AlterPartition answer already told us something newer than this image.
            return False
        new_leader_epoch = registration.leader_epoch > self._leader_epoch
        self._set_replicas(tuple(registration.replicas))
        if new_leader_epoch:
            # Only the next epoch is surely this broker's own again. Past a skipped one (this
            # broker missed metadata) another leader may have led, and a follower may have
            # truncated under it: its log end offset from before would count towards the HW
            # with records it no longer has (tests/replication/test_random_faults.py holds this;
            # Kafka keeps the offsets on any re-election,
            # docs/design/replication.md#caught-up-time). Forget them, as a new leader.
            epoch_skipped = registration.leader_epoch > self._leader_epoch + 1
            self._leader_epoch = registration.leader_epoch
            self._leader_epoch_start_offset = leader_log_end_offset
            for broker_id, progress in self._progress.items():
                if epoch_skipped:
                    progress.reset_for_new_leadership(
                        in_isr=broker_id in registration.isr, now_ms=now_ms
                    )
                else:
                    progress.reset_for_new_leader_epoch(
                        in_isr=broker_id in registration.isr,
                        leader_epoch_start_offset=leader_log_end_offset,
                        now_ms=now_ms,
                    )
        if new_leader_epoch or registration.partition_epoch > self._partition_epoch:
            # A pending change was based on an older partition epoch: the controller either
            # applied it (this registration shows the result) or will reject it.
            self._isr = tuple(registration.isr)
            self._committed_recovery_state = LeaderRecoveryState(registration.leader_recovery_state)
            self._partition_epoch = registration.partition_epoch
            self._pending = None
            self._awaiting_metadata = False
        self._maybe_propose_recovered()
        return self._maybe_increment_high_watermark(leader_log_end_offset, now_ms)

    def on_follower_fetch(
        self,
        *,
        replica_id: int,
        broker_epoch: int,
        fetch_offset: int,
        log_start_offset: int,
        leader_log_end_offset: int,
        now_ms: int,
    ) -> FollowerFetchUpdate:
        """Record a follower fetch (docs/design/replication.md#caught-up-time); maybe expand the ISR
        (docs/design/replication.md#isr-expansion) and move the HW
        (docs/design/replication.md#high-watermark).

        `leader_log_end_offset` is the leader's log end offset captured before the read.
        """
        progress = self._progress.get(replica_id)
        if progress is None:
            raise NotLeaderOrFollowerError(
                f"{self.where}: replica {replica_id} is not a follower of leader "
                f"{self._local_broker_id} (replicas {list(self._replicas)}, "
                f"leader epoch {self._leader_epoch})"
            )
        registered = self._eligibility.registered_broker_epoch(replica_id)
        if (
            broker_epoch != UNKNOWN_BROKER_EPOCH
            and registered is not None
            and registered > broker_epoch
        ):
            raise NotLeaderOrFollowerError(
                f"{self.where}: stale fetch from replica {replica_id} at offset {fetch_offset}: "
                f"broker epoch {broker_epoch} < registered broker epoch {registered}"
            )
        if fetch_offset > leader_log_end_offset:
            raise OffsetOutOfRangeError(
                f"{self.where}: replica {replica_id} fetches at offset {fetch_offset}, beyond "
                f"the leader log end offset {leader_log_end_offset}"
            )
        previous_log_end_offset = progress.log_end_offset
        previous_log_start_offset = progress.log_start_offset
        progress.update_fetch_state(
            fetch_offset=fetch_offset,
            log_start_offset=log_start_offset,
            leader_log_end_offset=leader_log_end_offset,
            broker_epoch=broker_epoch,
            now_ms=now_ms,
        )
        isr_change = self._maybe_expand_isr(progress)
        # As in Kafka, only a changed follower log end offset re-evaluates the HW here.
        high_watermark_moved = (
            progress.log_end_offset != previous_log_end_offset
            and self._maybe_increment_high_watermark(leader_log_end_offset, now_ms)
        )
        log_start_offset_moved = progress.log_start_offset != previous_log_start_offset
        if not high_watermark_moved and isr_change is None and not log_start_offset_moved:
            return _NOTHING_MOVED  # an idle partition's fetch, every round
        return FollowerFetchUpdate(
            high_watermark_moved=high_watermark_moved,
            isr_change=isr_change,
            follower_log_start_offset_moved=log_start_offset_moved,
        )

    def fetch_inputs(self) -> tuple[object, ...]:
        """Everything of this state that a fetch's checks, answer and follower update read
        when the follower's log end offset stays put: equal values mean that the same fetch
        would be answered and recorded the same way (`repeat_follower_fetch`). (The config
        is read only when the HW is re-evaluated, and a change of it that moves the HW shows
        in the HW. The leader epoch start offset and the log's leader epoch cache move only
        with the leader epoch or the log end offset. In KRaft the partition epoch moves with
        every ISR or leader epoch change; those are listed too, as the fetch reads them.)
        Eligibility and the tuples are replaced, never mutated, so they compare by identity
        first."""
        return (
            self._leader_epoch,
            self._partition_epoch,
            self._isr,
            self._pending,
            self._eligibility,
            self._replicas,
            self._high_watermark,
        )

    def repeat_follower_fetch(
        self,
        *,
        replica_id: int,
        broker_epoch: int,
        fetch_offset: int,
        log_start_offset: int,
        leader_log_end_offset: int,
        now_ms: int,
    ) -> bool:
        """Record a follower fetch that repeats one `on_follower_fetch` took without moving
        the HW, with `fetch_inputs()` (taken after that call) and the leader log end offset
        unchanged since; False (and nothing recorded) when the follower's progress is no longer
        what that fetch left (another fetch of the same replica came between): take
        `on_follower_fetch` then.

        Why this is `on_follower_fetch` for such a fetch: its checks see the same inputs and
        pass again; the caught-up-time update (docs/design/replication.md) moves only T (and C,
        while the follower is at the leader's log end offset); the ISR expansion check has the same
        inputs (an expansion that fetch started is pending now) and no time condition, so it finds
        nothing to do; the follower's log end and start offsets do not change, so the HW is not
        re-evaluated and no log start offset moved.
        """
        progress = self._progress.get(replica_id)
        if (
            progress is None
            or progress.log_end_offset != fetch_offset
            or progress.log_start_offset != log_start_offset
            or progress.broker_epoch != broker_epoch
        ):
            return False
        progress.update_fetch_state(
            fetch_offset=fetch_offset,
            log_start_offset=log_start_offset,
            leader_log_end_offset=leader_log_end_offset,
            broker_epoch=broker_epoch,
            now_ms=now_ms,
        )
        return True

    def park_follower(
        self, replica_id: int, clock: FetchSessionClock, *, leader_log_end_offset: int
    ) -> bool:
        """Park follower `replica_id`'s progress on its fetch session's `clock` right after
        a fetch of this partition found nothing to read at the leader's log end offset
        `leader_log_end_offset` and moved no HW (replica_progress, parked progress); False
        when it is not a follower or not at that offset (the session reads it again)."""
        progress = self._progress.get(replica_id)
        return progress is not None and progress.park(clock, leader_log_end_offset)

    def unpark_follower(self, replica_id: int, clock: FetchSessionClock) -> None:
        """The partition left the session of `clock`: follower `replica_id`'s parked progress,
        if parked there, stops at that session's latest round."""
        progress = self._progress.get(replica_id)
        if progress is not None:
            progress.unpark(clock)

    def on_leader_append(self, *, leader_log_end_offset: int, now_ms: int) -> bool:
        """After a local append: returns whether the HW moved."""
        return self._maybe_increment_high_watermark(leader_log_end_offset, now_ms)

    def maybe_shrink_isr(self, *, leader_log_end_offset: int, now_ms: int) -> IsrChange | None:
        """The isr-expiration task (docs/design/replication.md#isr-shrink): the change to send now,
        recorded as pending.

        With nothing to shrink, a leader whose committed state still says RECOVERING and whose
        report of RECOVERED was rejected proposes that report again here (a periodic retry).
        """
        if self._pending is not None:
            return None
        lag_ms_max = self._config.replica_lag_time_ms_max
        out_of_sync = set()
        for broker_id in self._isr:
            if broker_id == self._local_broker_id:
                continue
            progress = self._progress.get(broker_id)
            if progress is None or not progress.is_caught_up(
                leader_log_end_offset, now_ms, lag_ms_max
            ):
                out_of_sync.add(broker_id)
        if not out_of_sync:
            return self._maybe_propose_recovered()
        new_isr = tuple(r for r in self._isr if r not in out_of_sync)
        self._pending = self._make_change(new_isr, is_expansion=False)
        return self._pending

    def on_isr_change_committed(
        self,
        *,
        isr: tuple[int, ...],
        leader_epoch: int,
        partition_epoch: int,
        leader_log_end_offset: int,
        now_ms: int,
        change: IsrChange | None = None,
    ) -> bool:
        """The controller accepted the pending change; returns whether the HW moved.

        `change` is the change this answers; an answer to another change is ignored.
        """
        pending = self._pending
        if pending is None or (change is not None and change != pending):
            return False
        if leader_epoch != self._leader_epoch or partition_epoch < self._partition_epoch:
            # Kafka ignores such an answer and stays pending until metadata settles it.
            self._awaiting_metadata = True
            return False
        self._isr = tuple(isr)
        self._partition_epoch = partition_epoch
        self._committed_recovery_state = LeaderRecoveryState(pending.leader_recovery_state)
        self._pending = None
        self._awaiting_metadata = False
        return self._maybe_increment_high_watermark(leader_log_end_offset, now_ms)

    def on_isr_change_failed(self, error: KafkaError, *, change: IsrChange | None = None) -> bool:
        """The controller refused the pending change; returns whether to send it again.

        The HW is not re-evaluated here: a reverted expansion makes the leader less strict,
        and the next append or fetch lets the HW catch up.
        """
        pending = self._pending
        if pending is None or (change is not None and change != pending):
            return False
        if error.error_name in _REVERT_ERRORS:
            self._pending = None
            self._awaiting_metadata = False
            return False
        if error.error_name in _AWAIT_METADATA_ERRORS:
            self._awaiting_metadata = True
            return False
        return True

    def update_eligibility(
        self, eligibility: ReplicaEligibility, *, leader_log_end_offset: int, now_ms: int
    ) -> bool:
        """New broker registrations; an ineligible follower stops holding the HW back."""
        self._eligibility = eligibility
        return self._maybe_increment_high_watermark(leader_log_end_offset, now_ms)

    def update_config(
        self, config: PartitionReplicationConfig, *, leader_log_end_offset: int, now_ms: int
    ) -> bool:
        """New min.insync.replicas or lag limit; a lower min ISR may unfreeze the HW."""
        self._config = config
        return self._maybe_increment_high_watermark(leader_log_end_offset, now_ms)

    def on_log_start_offset(self, log_start_offset: int) -> bool:
        """The leader's log start offset rose; lifts the HW to it if lower
        (docs/design/replication.md#high-watermark, #low-watermark)."""
        if log_start_offset <= self._high_watermark:
            return False
        self._high_watermark = log_start_offset
        return True

    # --- acks and the low watermark (docs/design/replication.md) ----------------------------------

    def check_enough_replicas(self) -> None:
        """Before an acks=all append: the committed ISR must reach the effective min ISR."""
        if len(self._isr) < self.effective_min_isr:
            raise NotEnoughReplicasError(
                f"{self.where}: the ISR {list(self._isr)} has {len(self._isr)} replicas, fewer "
                f"than the effective min.insync.replicas {self.effective_min_isr}; nothing "
                f"appended (high watermark {self._high_watermark})"
            )

    def acks_all_outcome(self, required_offset: int) -> tuple[bool, KafkaError | None]:
        """(False, None): keep waiting; (True, None): done; (True, error): done with error."""
        if self._high_watermark < required_offset:
            return False, None
        maximal_isr = self.maximal_isr
        if len(maximal_isr) >= self.effective_min_isr:
            return True, None
        return True, NotEnoughReplicasAfterAppendError(
            f"{self.where}: offsets before {required_offset} are committed (high watermark "
            f"{self._high_watermark}) but the ISR {list(maximal_isr)} has {len(maximal_isr)} "
            f"replicas, fewer than the effective min.insync.replicas {self.effective_min_isr}"
        )

    def low_watermark(self, leader_log_start_offset: int) -> int:
        """Min log start offset of the leader and every follower on an alive broker
        (docs/design/replication.md#low-watermark)."""
        low_watermark = leader_log_start_offset
        for broker_id, progress in self._progress.items():
            if self._eligibility.is_alive(broker_id):
                low_watermark = min(low_watermark, progress.log_start_offset)
        return low_watermark

    # --- internals -------------------------------------------------------------------------

    def _check_leader(self, registration: PartitionRegistration) -> None:
        if registration.leader != self._local_broker_id:
            raise ValueError(
                f"{self.where}: registration names leader {registration.leader}, not this "
                f"broker {self._local_broker_id}"
            )
        if self._local_broker_id not in registration.replicas:
            raise ValueError(
                f"{self.where}: leader {self._local_broker_id} is not among the replicas "
                f"{list(registration.replicas)}"
            )

    def _set_replicas(self, replicas: tuple[int, ...]) -> None:
        self._replicas = replicas
        followers = [r for r in replicas if r != self._local_broker_id]
        for broker_id in followers:
            # A follower added without a leader epoch change starts unknown and not caught up.
            self._progress.setdefault(broker_id, ReplicaProgress(broker_id))
        for broker_id in [r for r in self._progress if r not in followers]:
            del self._progress[broker_id]

    def _make_change(self, new_isr: tuple[int, ...], *, is_expansion: bool) -> IsrChange:
        broker_epochs = []
        for broker_id in new_isr:
            if broker_id == self._local_broker_id:
                epoch = self._eligibility.registered_broker_epoch(broker_id)
                broker_epochs.append(UNKNOWN_BROKER_EPOCH if epoch is None else epoch)
            else:
                progress = self._progress.get(broker_id)
                broker_epochs.append(
                    UNKNOWN_BROKER_EPOCH if progress is None else progress.broker_epoch
                )
        return IsrChange(
            topic=self._topic,
            topic_id=self._topic_id,
            partition=self._partition,
            leader_epoch=self._leader_epoch,
            partition_epoch=self._partition_epoch,
            new_isr=new_isr,
            broker_epochs=tuple(broker_epochs),
            # Like Kafka's makeLeader, this leader is RECOVERED from its first moment.
            leader_recovery_state=LeaderRecoveryState.RECOVERED.value,
            is_expansion=is_expansion,
        )

    def _maybe_propose_recovered(self) -> IsrChange | None:
        """KIP-704: report RECOVERED with an unchanged ISR when nothing else is pending."""
        if (
            self._pending is not None
            or self._committed_recovery_state != LeaderRecoveryState.RECOVERING
        ):
            return None
        self._pending = self._make_change(self._isr, is_expansion=False)
        return self._pending

    def _maybe_expand_isr(self, progress: ReplicaProgress) -> IsrChange | None:
        if self._pending is not None or progress.broker_id in self._isr:
            return None
        if not self._eligibility.is_eligible(progress.broker_id, progress.broker_epoch):
            return None
        # The follower must hold everything committed and must have reached the current
        # leader epoch: committed records between this leader's HW and its epoch start
        # offset would be lost if a follower without them were elected
        # (docs/design/replication.md#scenarios, S4).
        if (
            progress.log_end_offset < self._high_watermark
            or progress.log_end_offset < self._leader_epoch_start_offset
        ):
            return None
        self._pending = self._make_change((*self._isr, progress.broker_id), is_expansion=True)
        return self._pending

    def _maybe_increment_high_watermark(self, leader_log_end_offset: int, now_ms: int) -> bool:
        if len(self._isr) < self.effective_min_isr:
            # docs/design/replication.md#high-watermark rule 1 (KIP-966): frozen below min ISR
            return False
        maximal_isr = self.maximal_isr
        lag_ms_max = self._config.replica_lag_time_ms_max
        candidate = leader_log_end_offset
        for broker_id, progress in self._progress.items():
            if progress.log_end_offset >= candidate:
                continue
            about_to_join = (
                progress.has_fetched
                and progress.is_caught_up(leader_log_end_offset, now_ms, lag_ms_max)
                and self._eligibility.is_eligible(broker_id, progress.broker_epoch)
            )
            if broker_id in maximal_isr or about_to_join:
                candidate = progress.log_end_offset
        if candidate <= self._high_watermark:
            return False
        self._high_watermark = candidate
        assert self._high_watermark <= leader_log_end_offset
        return True
