"""PartitionLeaderState: HW, ISR shrink/expand, AlterPartition answers and acks
(docs/design/replication.md: the leader rules, #low-watermark, #scenarios)."""

from __future__ import annotations

from uuid import UUID

import pytest

from replog.errors import (
    FencedLeaderEpochError,
    IneligibleReplicaError,
    InvalidUpdateVersionError,
    NotEnoughReplicasAfterAppendError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
    UnknownServerError,
)
from replog.quorum.metadata.broker_registration import BrokerRegistration
from replog.quorum.metadata.image import ClusterImage, frozen_mapping
from replog.quorum.metadata.partition_registration import PartitionRegistration
from replog.quorum.metadata.records import LeaderRecoveryState
from replog.replication.leader_state import (
    FollowerFetchUpdate,
    IsrChange,
    PartitionLeaderState,
    PartitionReplicationConfig,
    ReplicaEligibility,
)

TOPIC_ID = UUID(int=0xABC)
NOW = 1_000_000  # a monotonic clock far from 0, so C = 0 is long stale
LAG_MS = 30_000


def registration(
    replicas: tuple[int, ...] = (1, 2, 3),
    isr: tuple[int, ...] | None = None,
    *,
    leader: int = 1,
    leader_epoch: int = 5,
    partition_epoch: int = 10,
    recovering: bool = False,
) -> PartitionRegistration:
    return PartitionRegistration(
        replicas=replicas,
        isr=replicas if isr is None else isr,
        leader=leader,
        leader_epoch=leader_epoch,
        partition_epoch=partition_epoch,
        leader_recovery_state=(
            LeaderRecoveryState.RECOVERING if recovering else LeaderRecoveryState.RECOVERED
        ),
    )


def make_leader(
    replicas: tuple[int, ...] = (1, 2, 3),
    isr: tuple[int, ...] | None = None,
    *,
    local: int = 1,
    leo: int = 100,
    hw: int = 100,
    min_isr: int = 1,
    now: int = NOW,
    eligibility: ReplicaEligibility | None = None,
    recovering: bool = False,
    leader_epoch: int = 5,
) -> PartitionLeaderState:
    return PartitionLeaderState(
        topic="orders",
        topic_id=TOPIC_ID,
        partition=3,
        local_broker_id=local,
        registration=registration(
            replicas, isr, leader=local, recovering=recovering, leader_epoch=leader_epoch
        ),
        leader_log_end_offset=leo,
        high_watermark=hw,
        config=PartitionReplicationConfig(
            min_insync_replicas=min_isr, replica_lag_time_ms_max=LAG_MS
        ),
        eligibility=eligibility or ReplicaEligibility.everyone(replicas),
        now_ms=now,
    )


def fetch(
    state: PartitionLeaderState,
    replica: int,
    offset: int,
    *,
    leo: int,
    now: int = NOW,
    broker_epoch: int = -1,
    log_start_offset: int = 0,
) -> FollowerFetchUpdate:
    return state.on_follower_fetch(
        replica_id=replica,
        broker_epoch=broker_epoch,
        fetch_offset=offset,
        log_start_offset=log_start_offset,
        leader_log_end_offset=leo,
        now_ms=now,
    )


def commit_pending(state: PartitionLeaderState, *, leo: int, now: int = NOW) -> bool:
    change = state.pending_isr_change
    assert change is not None
    return state.on_isr_change_committed(
        isr=change.new_isr,
        leader_epoch=change.leader_epoch,
        partition_epoch=change.partition_epoch + 1,
        leader_log_end_offset=leo,
        now_ms=now,
        change=change,
    )


# --- becoming leader ---------------------------------------------------------------------


def test_becoming_leader_resets_followers_and_keeps_the_checkpointed_high_watermark() -> None:
    state = make_leader(isr=(1, 2), leo=120, hw=95)
    assert state.leader_epoch_start_offset == 120
    assert state.high_watermark == 95  # follower 2's LEO is unknown: the HW cannot move yet
    in_isr, out_of_isr = state.progress(2), state.progress(3)
    assert in_isr is not None and out_of_isr is not None
    assert (in_isr.log_end_offset, in_isr.last_caught_up_time_ms, in_isr.last_fetch_time_ms) == (
        -1,
        NOW,
        0,
    )
    assert (out_of_isr.log_end_offset, out_of_isr.last_caught_up_time_ms) == (-1, 0)
    assert state.progress(1) is None  # the leader itself has no progress entry
    assert state.pending_isr_change is None
    assert state.effective_min_isr == 1


def test_the_high_watermark_never_starts_above_the_leader_log_end_offset() -> None:
    state = make_leader(leo=50, hw=80)
    assert state.high_watermark == 50


def test_a_single_replica_partition_follows_the_leader_log_end_offset() -> None:
    state = make_leader(replicas=(1,), leo=10, hw=4)
    assert state.high_watermark == 10  # raised at once on becoming leader
    assert state.on_leader_append(leader_log_end_offset=25, now_ms=NOW) is True
    assert state.high_watermark == 25
    assert state.on_leader_append(leader_log_end_offset=25, now_ms=NOW) is False


def test_a_never_fetched_follower_outside_the_isr_does_not_hold_the_high_watermark() -> None:
    # Even at a small clock (now - C <= lag), a follower that has not fetched is not "about to
    # join": Kafka needs its broker epoch from a fetch before it is ISR-eligible.
    state = make_leader(replicas=(1, 2), isr=(1,), leo=40, hw=0, now=1_000)
    assert state.high_watermark == 40


def test_registration_naming_another_leader_is_refused() -> None:
    state = make_leader()
    with pytest.raises(ValueError, match="orders-3: registration names leader 2"):
        state.update_registration(
            registration(leader=2, leader_epoch=6), leader_log_end_offset=100, now_ms=NOW
        )


# --- high watermark (docs/design/replication.md#high-watermark) ----------------------------------


def test_high_watermark_is_the_minimum_log_end_offset_over_the_isr_and_never_decreases() -> None:
    state = make_leader(leo=100, hw=80)
    assert fetch(state, 2, 90, leo=100).high_watermark_moved is False  # 3 still unknown
    assert state.high_watermark == 80
    assert fetch(state, 3, 95, leo=100).high_watermark_moved is True
    assert state.high_watermark == 90
    assert fetch(state, 2, 100, leo=100).high_watermark_moved is True
    assert state.high_watermark == 95
    # A follower that truncated and fetches lower cannot pull the HW back.
    assert fetch(state, 3, 85, leo=100).high_watermark_moved is False
    assert state.high_watermark == 95
    assert state.on_leader_append(leader_log_end_offset=130, now_ms=NOW) is False
    assert fetch(state, 3, 130, leo=130).high_watermark_moved is True  # 2 holds it at 100
    assert state.high_watermark == 100
    assert fetch(state, 2, 130, leo=130).high_watermark_moved is True
    assert state.high_watermark == 130


def test_same_follower_offset_does_not_re_evaluate_the_high_watermark() -> None:
    state = make_leader(replicas=(1, 2), leo=100, hw=50)
    fetch(state, 2, 100, leo=100)
    assert state.high_watermark == 100
    state.on_leader_append(leader_log_end_offset=120, now_ms=NOW)  # 2 holds it at 100
    assert fetch(state, 2, 100, leo=120).high_watermark_moved is False


def test_a_caught_up_eligible_replica_about_to_join_holds_the_high_watermark() -> None:
    state = make_leader(replicas=(1, 2), isr=(1,), leo=100, hw=100)
    update = fetch(state, 2, 100, leo=100)  # caught up: joins (pending expansion)
    assert update.isr_change is not None
    # The controller refuses (INELIGIBLE_REPLICA): 2 is out of the maximal ISR again...
    assert (
        state.on_isr_change_failed(IneligibleReplicaError("no"), change=update.isr_change) is False
    )
    assert state.maximal_isr == (1,)
    # ...but it is still caught up and eligible, so the HW waits for it.
    assert state.on_leader_append(leader_log_end_offset=110, now_ms=NOW + 1_000) is False
    assert state.high_watermark == 100
    # Once it has not been caught up for longer than the lag limit, it stops holding the HW.
    assert state.on_leader_append(leader_log_end_offset=111, now_ms=NOW + LAG_MS) is False
    assert state.on_leader_append(leader_log_end_offset=112, now_ms=NOW + LAG_MS + 1) is True
    assert state.high_watermark == 112


def test_an_ineligible_caught_up_replica_does_not_hold_the_high_watermark() -> None:
    eligibility = ReplicaEligibility.everyone([1, 2])
    state = make_leader(replicas=(1, 2), isr=(1,), leo=100, hw=100, eligibility=eligibility)
    change = fetch(state, 2, 100, leo=100).isr_change
    assert change is not None
    state.on_isr_change_failed(IneligibleReplicaError("shutting down"), change=change)
    state.on_leader_append(leader_log_end_offset=110, now_ms=NOW)
    assert state.high_watermark == 100
    # Broker 2 enters controlled shutdown: no longer eligible, so the HW is free to move.
    moved = state.update_eligibility(
        ReplicaEligibility(
            broker_epochs=frozen_mapping({1: -1}),
            alive_broker_epochs=frozen_mapping({1: -1, 2: -1}),
        ),
        leader_log_end_offset=110,
        now_ms=NOW,
    )
    assert moved is True
    assert state.high_watermark == 110


def test_high_watermark_is_frozen_while_the_committed_isr_is_below_min_isr() -> None:
    state = make_leader(isr=(1,), min_isr=2, leo=100, hw=90)
    assert state.high_watermark == 90
    assert state.on_leader_append(leader_log_end_offset=120, now_ms=NOW) is False
    # 2 catches up and joins; the expansion is pending, so the committed ISR is still {1}.
    update = fetch(state, 2, 100, leo=120)
    assert update.isr_change is not None and update.isr_change.new_isr == (1, 2)
    assert state.maximal_isr == (1, 2)
    assert update.high_watermark_moved is False
    assert state.high_watermark == 90
    # Committed: the ISR reaches min ISR, and the HW moves to 2's LEO.
    assert commit_pending(state, leo=120) is True
    assert state.isr == (1, 2)
    assert state.high_watermark == 100


def test_lowering_min_isr_unfreezes_the_high_watermark() -> None:
    state = make_leader(isr=(1,), min_isr=2, leo=100, hw=90)
    moved = state.update_config(
        PartitionReplicationConfig(min_insync_replicas=1), leader_log_end_offset=100, now_ms=NOW
    )
    assert moved is True
    assert state.high_watermark == 100


def test_effective_min_isr_is_capped_at_the_replication_factor() -> None:
    state = make_leader(replicas=(1,), min_isr=3, leo=10, hw=0)
    assert state.effective_min_isr == 1
    assert state.high_watermark == 10
    state.check_enough_replicas()  # does not raise
    two = make_leader(replicas=(1, 2), min_isr=3)
    assert two.effective_min_isr == 2


def test_a_rising_log_start_offset_lifts_the_high_watermark() -> None:
    state = make_leader(leo=100, hw=40)
    assert state.on_log_start_offset(30) is False
    assert state.on_log_start_offset(60) is True
    assert state.high_watermark == 60


# --- follower fetch checks ---------------------------------------------------------------


def test_fetch_from_a_replica_that_is_not_assigned_is_refused() -> None:
    state = make_leader()
    with pytest.raises(NotLeaderOrFollowerError, match=r"orders-3: replica 9 is not a follower"):
        fetch(state, 9, 0, leo=100)
    with pytest.raises(NotLeaderOrFollowerError, match=r"replica 1 is not a follower"):
        fetch(state, 1, 0, leo=100)  # the leader itself


def test_a_fetch_with_a_stale_broker_epoch_is_fenced() -> None:
    eligibility = ReplicaEligibility(broker_epochs=frozen_mapping({1: 11, 2: 12, 3: 13}))
    state = make_leader(eligibility=eligibility, leo=100, hw=100)
    with pytest.raises(
        NotLeaderOrFollowerError,
        match=r"orders-3: stale fetch .* broker epoch 12 < registered broker epoch 13",
    ):
        fetch(state, 3, 100, leo=100, broker_epoch=12)
    progress = state.progress(3)
    assert progress is not None and progress.log_end_offset == -1  # nothing recorded
    fetch(state, 3, 100, leo=100, broker_epoch=-1)  # -1: not checked
    fetch(state, 3, 100, leo=100, broker_epoch=14)  # newer than the image: accepted


def test_a_fetch_beyond_the_leader_log_end_offset_is_refused() -> None:
    state = make_leader(leo=100)
    with pytest.raises(OffsetOutOfRangeError, match="orders-3: replica 2 fetches at offset 101"):
        fetch(state, 2, 101, leo=100)


def test_fetch_update_reports_a_changed_follower_log_start_offset() -> None:
    state = make_leader()
    assert fetch(state, 2, 50, leo=100, log_start_offset=0).follower_log_start_offset_moved
    assert not fetch(state, 2, 60, leo=100, log_start_offset=0).follower_log_start_offset_moved
    assert fetch(state, 2, 60, leo=100, log_start_offset=7).follower_log_start_offset_moved


def test_progress_is_a_copy() -> None:
    state = make_leader()
    copy = state.progress(2)
    assert copy is not None
    copy.log_end_offset = 99
    again = state.progress(2)
    assert again is not None and again.log_end_offset == -1


# --- ISR shrink (docs/design/replication.md#isr-shrink) ------------------------------------------


def test_isr_shrinks_followers_not_caught_up_within_the_lag_limit() -> None:
    state = make_leader(leo=100, hw=100)
    fetch(state, 2, 100, leo=100, now=NOW + 1_000)
    fetch(state, 3, 100, leo=100, now=NOW + 1_000)
    state.on_leader_append(leader_log_end_offset=150, now_ms=NOW + 2_000)
    # 2 keeps fetching at the leader's end; 3 stops at 100 (caught up last at NOW + 1000).
    fetch(state, 2, 150, leo=150, now=NOW + 1_000 + LAG_MS)
    assert state.maybe_shrink_isr(leader_log_end_offset=150, now_ms=NOW + 1_000 + LAG_MS) is None
    change = state.maybe_shrink_isr(leader_log_end_offset=150, now_ms=NOW + 1_001 + LAG_MS)
    assert change == IsrChange(
        topic="orders",
        topic_id=TOPIC_ID,
        partition=3,
        leader_epoch=5,
        partition_epoch=10,
        new_isr=(1, 2),
        broker_epochs=(
            -1,
            -1,
        ),
        leader_recovery_state=0,
        is_expansion=False,
    )
    assert state.pending_isr_change == change
    # Pending shrink: the maximal ISR is still the old, larger ISR; the HW stays held by 3.
    assert state.isr == (1, 2, 3)
    assert state.maximal_isr == (1, 2, 3)
    assert state.high_watermark == 100
    assert state.on_leader_append(leader_log_end_offset=160, now_ms=NOW + 40_000) is False
    # Nothing else while a change is pending.
    assert state.maybe_shrink_isr(leader_log_end_offset=160, now_ms=NOW + 99_000) is None
    # Committed: 3 no longer counts; the HW moves to 2's LEO.
    assert commit_pending(state, leo=160, now=NOW + 40_000) is True
    assert state.isr == (1, 2)
    assert state.partition_epoch == 11
    assert state.high_watermark == 150


def test_a_follower_at_the_leader_log_end_offset_is_never_shrunk() -> None:
    state = make_leader(replicas=(1, 2), leo=100, hw=100)
    fetch(state, 2, 100, leo=100, now=NOW)
    # No appends for a long time: 2's C is old but its LEO equals the leader's.
    assert state.maybe_shrink_isr(leader_log_end_offset=100, now_ms=NOW + 10 * LAG_MS) is None
    assert state.maybe_shrink_isr(leader_log_end_offset=101, now_ms=NOW + 10 * LAG_MS) is not None


def test_an_isr_member_that_never_fetches_after_the_election_is_shrunk_after_the_lag() -> None:
    state = make_leader(replicas=(1, 2), leo=100, hw=100)
    assert state.maybe_shrink_isr(leader_log_end_offset=100, now_ms=NOW + LAG_MS) is None
    change = state.maybe_shrink_isr(leader_log_end_offset=100, now_ms=NOW + LAG_MS + 1)
    assert change is not None and change.new_isr == (1,)


def test_shrink_carries_the_local_broker_epoch_and_the_followers_last_fetch_epochs() -> None:
    eligibility = ReplicaEligibility(broker_epochs=frozen_mapping({1: 11, 2: 12, 3: 13}))
    state = make_leader(eligibility=eligibility)
    fetch(state, 2, 100, leo=100, broker_epoch=12, now=NOW + LAG_MS)
    change = state.maybe_shrink_isr(leader_log_end_offset=100, now_ms=NOW + LAG_MS + 1)
    assert change is not None
    assert change.new_isr == (1, 2)
    assert change.broker_epochs == (11, 12)


# --- ISR expansion (docs/design/replication.md#isr-expansion) ------------------------------------


def test_isr_expansion_needs_eligibility_and_a_matching_broker_epoch() -> None:
    eligibility = ReplicaEligibility(broker_epochs=frozen_mapping({1: 11, 2: 12, 3: 13}))
    state = make_leader(isr=(1, 2), eligibility=eligibility, leo=100, hw=100)
    # A fetch epoch newer than the image is not fenced, but it does not match: no expansion.
    assert fetch(state, 3, 100, leo=100, broker_epoch=14).isr_change is None
    update = fetch(state, 3, 100, leo=100, broker_epoch=13)
    assert update.isr_change is not None
    assert update.isr_change.new_isr == (1, 2, 3)
    assert update.isr_change.broker_epochs == (11, -1, 13)
    assert update.isr_change.is_expansion
    assert state.maximal_isr == (1, 2, 3)
    assert state.isr == (1, 2)


def test_isr_expansion_accepts_a_fetch_broker_epoch_of_minus_one() -> None:
    eligibility = ReplicaEligibility(broker_epochs=frozen_mapping({1: 11, 2: 12, 3: 13}))
    state = make_leader(isr=(1, 2), eligibility=eligibility, leo=100, hw=100)
    assert fetch(state, 3, 100, leo=100, broker_epoch=-1).isr_change is not None


def test_fenced_or_shutting_down_brokers_do_not_join() -> None:
    def broker(
        broker_id: int, *, fenced: bool = False, shutting_down: bool = False
    ) -> BrokerRegistration:
        return BrokerRegistration(
            broker_id=broker_id,
            incarnation_id=UUID(int=broker_id),
            broker_epoch=100 + broker_id,
            fenced=fenced,
            in_controlled_shutdown=shutting_down,
        )

    cluster = ClusterImage(
        brokers=frozen_mapping(
            {1: broker(1), 2: broker(2, shutting_down=True), 3: broker(3, fenced=True)}
        )
    )
    eligibility = ReplicaEligibility.from_cluster(cluster)
    assert eligibility.is_eligible(1, 101)
    assert not eligibility.is_eligible(1, 99)
    assert not eligibility.is_eligible(2) and eligibility.is_alive(2)
    assert not eligibility.is_eligible(3) and not eligibility.is_alive(3)
    state = make_leader(isr=(1,), eligibility=eligibility, leo=100, hw=100)
    assert fetch(state, 2, 100, leo=100, broker_epoch=102).isr_change is None
    assert fetch(state, 3, 100, leo=100, broker_epoch=103).isr_change is None
    # Controlled shutdown still fences stale fetches (the broker is alive).
    with pytest.raises(
        NotLeaderOrFollowerError, match="broker epoch 90 < registered broker epoch 102"
    ):
        fetch(state, 2, 100, leo=100, broker_epoch=90)


def test_isr_expansion_needs_the_high_watermark() -> None:
    state = make_leader(replicas=(1, 2), isr=(1,), leo=100, hw=100)
    state.update_registration(
        registration((1, 2), (1,), leader_epoch=5, partition_epoch=10),
        leader_log_end_offset=100,
        now_ms=NOW,
    )
    assert state.leader_epoch_start_offset == 100
    assert fetch(state, 2, 99, leo=100).isr_change is None  # below the HW
    assert fetch(state, 2, 100, leo=100).isr_change is not None


def test_no_expansion_while_a_change_is_pending_and_pending_expansion_counts_at_once() -> None:
    state = make_leader(replicas=(1, 2, 3), isr=(1,), leo=100, hw=100)
    first = fetch(state, 2, 100, leo=100)
    assert first.isr_change is not None
    assert fetch(state, 3, 100, leo=100).isr_change is None  # one change at a time
    # 2 counts in the maximal ISR at once: the HW waits for it after an append.
    state.on_leader_append(leader_log_end_offset=120, now_ms=NOW + 2 * LAG_MS)
    assert state.high_watermark == 100
    assert fetch(state, 2, 120, leo=120, now=NOW + 2 * LAG_MS).high_watermark_moved is True
    assert state.high_watermark == 120
    commit_pending(state, leo=120, now=NOW + 2 * LAG_MS)
    assert state.isr == (1, 2)
    assert fetch(state, 3, 120, leo=120, now=NOW + 2 * LAG_MS).isr_change is not None


def test_s4_a_follower_must_reach_the_current_epoch_before_joining_the_isr() -> None:
    # docs/design/replication.md#scenarios, S4: replicas A=1, B=2, C=3, D=4. B becomes leader (epoch
    # 6) with ISR {B, D}, LEO 100, its own HW 95. C is out of sync.
    a, b, c, d = 1, 2, 3, 4
    state = make_leader(replicas=(a, b, c, d), isr=(b, d), local=b, leo=100, hw=95, leader_epoch=6)
    assert state.leader_epoch_start_offset == 100
    assert state.high_watermark == 95  # D's LEO is unknown to the new leader
    # C fetches up to 97: >= HW 95 but < epoch start 100: not added.
    update = fetch(state, c, 97, leo=100)
    assert update.isr_change is None
    assert state.maximal_isr == (b, d)
    assert state.high_watermark == 95
    # Variant: D fetches at 100; B's HW jumps to 100 and C is still excluded until 100.
    update = fetch(state, d, 100, leo=100)
    assert update.high_watermark_moved is True
    assert state.high_watermark == 100
    assert fetch(state, c, 99, leo=100).isr_change is None
    update = fetch(state, c, 100, leo=100)
    assert update.isr_change is not None and update.isr_change.new_isr == (b, d, c)


# --- AlterPartition answers --------------------------------------------------------------


def shrink_three(state: PartitionLeaderState) -> IsrChange:
    """Make follower 3 stale while 2 keeps up; returns the pending shrink to (1, 2)."""
    fetch(state, 2, 100, leo=100, now=NOW + 2 * LAG_MS)
    state.on_leader_append(leader_log_end_offset=130, now_ms=NOW + 2 * LAG_MS)
    fetch(state, 2, 130, leo=130, now=NOW + 2 * LAG_MS)
    change = state.maybe_shrink_isr(leader_log_end_offset=130, now_ms=NOW + 2 * LAG_MS)
    assert change is not None and change.new_isr == (1, 2)
    return change


def test_a_failed_shrink_leaves_the_high_watermark_held_by_the_old_isr() -> None:
    state = make_leader(leo=100, hw=100)
    change = shrink_three(state)
    assert state.high_watermark == 100  # 3's LEO is unknown; the old ISR still counts
    # INVALID_UPDATE_VERSION: our state is stale; keep the change pending, do not resend.
    assert state.on_isr_change_failed(InvalidUpdateVersionError("stale"), change=change) is False
    assert state.pending_isr_change == change
    assert state.awaiting_metadata and state.isr_change_to_send is None
    assert state.maximal_isr == (1, 2, 3)
    assert state.on_leader_append(leader_log_end_offset=140, now_ms=NOW + 3 * LAG_MS) is False
    assert state.high_watermark == 100
    # Nothing new is proposed until metadata settles it.
    assert state.maybe_shrink_isr(leader_log_end_offset=140, now_ms=NOW + 4 * LAG_MS) is None
    # Metadata with a newer partition epoch: the controller did shrink after all.
    moved = state.update_registration(
        registration((1, 2, 3), (1, 2), partition_epoch=11),
        leader_log_end_offset=140,
        now_ms=NOW + 4 * LAG_MS,
    )
    assert state.pending_isr_change is None and not state.awaiting_metadata
    assert state.isr == (1, 2)
    assert moved is True and state.high_watermark == 130


def test_a_shrink_refused_with_ineligible_replica_reverts_to_the_committed_isr() -> None:
    state = make_leader(leo=100, hw=100)
    change = shrink_three(state)
    assert state.on_isr_change_failed(IneligibleReplicaError("no"), change=change) is False
    assert state.pending_isr_change is None
    assert state.isr == (1, 2, 3) and state.maximal_isr == (1, 2, 3)
    assert state.high_watermark == 100
    # It may be proposed again on the next tick.
    assert state.maybe_shrink_isr(leader_log_end_offset=130, now_ms=NOW + 2 * LAG_MS) == change


def test_an_unexpected_alter_partition_error_asks_for_a_resend() -> None:
    state = make_leader(leo=100, hw=100)
    change = shrink_three(state)
    assert state.on_isr_change_failed(UnknownServerError("boom"), change=change) is True
    assert state.isr_change_to_send == change


def test_a_failed_expansion_never_lowers_the_high_watermark() -> None:
    state = make_leader(replicas=(1, 2), isr=(1,), leo=100, hw=100)
    change = fetch(state, 2, 100, leo=100).isr_change
    assert change is not None
    assert state.on_isr_change_failed(FencedLeaderEpochError("old"), change=change) is False
    assert state.maximal_isr == (1, 2)  # still pending: the leader stays strict
    assert state.high_watermark == 100


def test_stale_or_foreign_alter_partition_answers_are_ignored() -> None:
    state = make_leader(replicas=(1, 2), isr=(1,), leo=100, hw=100)
    change = fetch(state, 2, 100, leo=100).isr_change
    assert change is not None
    other = IsrChange(
        topic="orders",
        topic_id=TOPIC_ID,
        partition=3,
        leader_epoch=5,
        partition_epoch=9,
        new_isr=(1,),
        broker_epochs=(-1,),
        leader_recovery_state=0,
        is_expansion=False,
    )
    assert not state.on_isr_change_committed(
        isr=(1,),
        leader_epoch=5,
        partition_epoch=11,
        leader_log_end_offset=100,
        now_ms=NOW,
        change=other,
    )
    assert state.on_isr_change_failed(UnknownServerError("x"), change=other) is False
    assert state.pending_isr_change == change
    # A lower partition epoch than ours: ignored, and the change waits for metadata.
    assert not state.on_isr_change_committed(
        isr=(1, 2),
        leader_epoch=5,
        partition_epoch=9,
        leader_log_end_offset=100,
        now_ms=NOW,
        change=change,
    )
    assert state.isr == (1,) and state.awaiting_metadata
    # Metadata settles it; a late answer for the settled change is ignored.
    state.update_registration(
        registration((1, 2), (1, 2), partition_epoch=11), leader_log_end_offset=100, now_ms=NOW
    )
    assert state.pending_isr_change is None
    assert not state.on_isr_change_committed(
        isr=(1,),
        leader_epoch=5,
        partition_epoch=12,
        leader_log_end_offset=100,
        now_ms=NOW,
        change=change,
    )
    assert state.isr == (1, 2) and state.partition_epoch == 11


def test_a_committed_answer_for_another_leader_epoch_is_ignored() -> None:
    state = make_leader(replicas=(1, 2), isr=(1,), leo=100, hw=100)
    change = fetch(state, 2, 100, leo=100).isr_change
    assert change is not None
    assert not state.on_isr_change_committed(
        isr=(1, 2), leader_epoch=6, partition_epoch=11, leader_log_end_offset=100, now_ms=NOW
    )
    assert state.isr == (1,) and state.pending_isr_change == change


def test_an_answer_with_an_equal_partition_epoch_commits() -> None:
    # Kafka: the controller found nothing to change and answered with the current epoch.
    state = make_leader(replicas=(1, 2), isr=(1,), leo=100, hw=100)
    change = fetch(state, 2, 100, leo=100).isr_change
    assert change is not None
    state.on_isr_change_committed(
        isr=(1, 2), leader_epoch=5, partition_epoch=10, leader_log_end_offset=100, now_ms=NOW
    )
    assert state.isr == (1, 2) and state.pending_isr_change is None


# --- metadata updates --------------------------------------------------------------------


def test_an_older_registration_is_ignored() -> None:
    state = make_leader(replicas=(1, 2), isr=(1,), leo=100, hw=100)
    commit_change = fetch(state, 2, 100, leo=100).isr_change
    assert commit_change is not None
    commit_pending(state, leo=100)
    assert state.partition_epoch == 11
    assert not state.update_registration(
        registration((1, 2), (1,), partition_epoch=10), leader_log_end_offset=100, now_ms=NOW
    )
    assert state.isr == (1, 2)


def test_a_newer_partition_epoch_keeps_follower_progress() -> None:
    state = make_leader(leo=100, hw=100)
    fetch(state, 2, 90, leo=100, now=NOW + 5)
    before = state.progress(2)
    state.update_registration(
        registration(partition_epoch=12), leader_log_end_offset=110, now_ms=NOW + 10
    )
    assert state.progress(2) == before
    assert state.leader_epoch_start_offset == 100


def test_a_new_leader_epoch_resets_followers_as_already_leader() -> None:
    state = make_leader(isr=(1, 2), leo=100, hw=100)
    fetch(state, 2, 100, leo=100, now=NOW + 1, broker_epoch=7)
    fetch(state, 3, 80, leo=100, now=NOW + 2, broker_epoch=8, log_start_offset=4)
    state.on_leader_append(leader_log_end_offset=150, now_ms=NOW + 3)
    state.update_registration(
        registration(isr=(1, 2), leader_epoch=6, partition_epoch=11),
        leader_log_end_offset=150,
        now_ms=NOW + 100,
    )
    assert state.leader_epoch == 6
    assert state.leader_epoch_start_offset == 150
    in_isr, out_of_isr = state.progress(2), state.progress(3)
    assert in_isr is not None and out_of_isr is not None
    assert (in_isr.log_end_offset, in_isr.broker_epoch) == (100, 7)  # kept
    assert in_isr.last_fetch_leader_log_end_offset == 150
    assert (in_isr.last_fetch_time_ms, in_isr.last_caught_up_time_ms) == (NOW + 100, NOW + 100)
    assert (out_of_isr.log_end_offset, out_of_isr.log_start_offset) == (80, 4)
    assert (out_of_isr.last_fetch_time_ms, out_of_isr.last_caught_up_time_ms) == (0, 0)
    # Contrast with becoming leader: a fresh leader forgets LEOs.
    fresh = make_leader(isr=(1, 2), leo=150, hw=100)
    fresh_progress = fresh.progress(2)
    assert fresh_progress is not None and fresh_progress.log_end_offset == -1


def test_a_leader_epoch_past_the_next_forgets_followers_as_a_new_leader() -> None:
    # Epoch 6 may have had another leader, under which 2 truncated below 100: its old LEO
    # must not hold up (or let through) the HW (tests/replication/test_found_by_simulation.py).
    state = make_leader(isr=(1, 2, 3), leo=100, hw=80)
    fetch(state, 2, 100, leo=100, now=NOW + 1, broker_epoch=7)
    fetch(state, 3, 90, leo=100, now=NOW + 2, broker_epoch=8)
    assert state.high_watermark == 90
    state.update_registration(
        registration(isr=(1, 2, 3), leader_epoch=7, partition_epoch=12),
        leader_log_end_offset=100,
        now_ms=NOW + 100,
    )
    assert state.leader_epoch == 7 and state.leader_epoch_start_offset == 100
    for follower in (2, 3):
        progress = state.progress(follower)
        assert progress is not None
        assert (progress.log_end_offset, progress.broker_epoch) == (-1, -1)
        assert progress.last_caught_up_time_ms == NOW + 100  # in the ISR: the lag starts now
    # 3 alone at 100 no longer moves the HW: 2's offset is unknown until it fetches.
    assert not fetch(state, 3, 100, leo=100, now=NOW + 101).high_watermark_moved
    assert state.high_watermark == 90
    assert fetch(state, 2, 100, leo=100, now=NOW + 102).high_watermark_moved
    assert state.high_watermark == 100


def test_a_new_leader_epoch_clears_a_pending_change_and_raises_the_epoch_start() -> None:
    state = make_leader(replicas=(1, 2, 3), isr=(1, 2), leo=100, hw=100)
    change = fetch(state, 3, 100, leo=100).isr_change
    assert change is not None
    state.update_registration(
        registration(isr=(1, 2), leader_epoch=6, partition_epoch=11),
        leader_log_end_offset=120,
        now_ms=NOW,
    )
    assert state.pending_isr_change is None
    assert state.leader_epoch_start_offset == 120
    # 3 is at 100 < the new epoch start 120: it cannot join yet.
    assert fetch(state, 3, 110, leo=120).isr_change is None
    assert fetch(state, 3, 120, leo=120).isr_change is not None


def test_replicas_added_and_removed_by_a_registration() -> None:
    state = make_leader(replicas=(1, 2, 3), leo=100, hw=100)
    state.update_registration(
        registration((1, 2, 4), (1, 2), partition_epoch=11), leader_log_end_offset=100, now_ms=NOW
    )
    assert state.replicas == (1, 2, 4)
    assert state.progress(3) is None
    added = state.progress(4)
    assert added is not None and added.log_end_offset == -1 and added.last_caught_up_time_ms == 0
    with pytest.raises(NotLeaderOrFollowerError):
        fetch(state, 3, 100, leo=100)


# --- KIP-704 -----------------------------------------------------------------------------


def test_a_recovering_leader_reports_recovered_at_once() -> None:
    state = make_leader(replicas=(1, 2), isr=(1,), leo=40, hw=40, recovering=True)
    change = state.pending_isr_change
    assert change is not None
    assert (change.new_isr, change.leader_recovery_state, change.is_expansion) == ((1,), 0, False)
    assert state.leader_recovery_state == LeaderRecoveryState.RECOVERING
    # While it is pending, a caught-up follower cannot join.
    assert fetch(state, 2, 40, leo=40).isr_change is None
    commit_pending(state, leo=40)
    assert state.leader_recovery_state == LeaderRecoveryState.RECOVERED
    assert state.pending_isr_change is None
    expansion = fetch(state, 2, 40, leo=40).isr_change
    assert expansion is not None and expansion.leader_recovery_state == 0


def test_a_refused_recovered_report_is_proposed_again_on_the_next_tick() -> None:
    state = make_leader(replicas=(1,), isr=(1,), leo=40, hw=40, recovering=True)
    change = state.pending_isr_change
    assert change is not None
    state.on_isr_change_failed(IneligibleReplicaError("x"), change=change)
    assert state.pending_isr_change is None
    assert state.maybe_shrink_isr(leader_log_end_offset=40, now_ms=NOW) == change


def test_a_recovered_leader_proposes_nothing() -> None:
    state = make_leader(replicas=(1,), leo=40, hw=40)
    assert state.pending_isr_change is None
    assert state.maybe_shrink_isr(leader_log_end_offset=40, now_ms=NOW) is None


# --- acks (docs/design/replication.md#acks-and-min-isr) and S7 / S5 ------------------------------


def test_s7_min_isr_gates() -> None:
    # RF=3 (A=1, B=2, C=3), min.isr=2, ISR {A, B}.
    state = make_leader(replicas=(1, 2, 3), isr=(1, 2), min_isr=2, leo=100, hw=100)
    fetch(state, 2, 100, leo=100)
    state.check_enough_replicas()
    state.on_leader_append(leader_log_end_offset=110, now_ms=NOW)  # acks=all produce 100..109
    assert state.acks_all_outcome(110) == (False, None)
    fetch(state, 2, 110, leo=110)
    assert state.acks_all_outcome(110) == (True, None)  # acked once B's LEO passes it
    # B stops; more produces land; the ISR shrinks to {A}: the next acks=all produce fails
    # before the append.
    state.on_leader_append(leader_log_end_offset=120, now_ms=NOW)
    change = state.maybe_shrink_isr(leader_log_end_offset=120, now_ms=NOW + LAG_MS + 1)
    assert change is not None and change.new_isr == (1,)
    state.check_enough_replicas()  # still pending: the committed ISR is {A, B}
    commit_pending(state, leo=120, now=NOW + LAG_MS + 1)
    with pytest.raises(NotEnoughReplicasError) as raised:
        state.check_enough_replicas()
    message = str(raised.value)
    assert "orders-3" in message and "[1]" in message and "min.insync.replicas 2" in message


def test_s7_race_an_isr_shrink_before_the_high_watermark_means_a_timeout() -> None:
    state = make_leader(replicas=(1, 2, 3), isr=(1, 2), min_isr=2, leo=100, hw=100)
    fetch(state, 2, 100, leo=100)
    state.check_enough_replicas()
    state.on_leader_append(leader_log_end_offset=120, now_ms=NOW)  # appended while ISR {A, B}
    # B stops fetching; the ISR shrinks before the HW reaches 120.
    state.maybe_shrink_isr(leader_log_end_offset=120, now_ms=NOW + LAG_MS + 1)
    commit_pending(state, leo=120, now=NOW + LAG_MS + 1)
    assert state.isr == (1,)
    # The HW cannot move (ISR < min ISR): the produce keeps waiting until its timeout.
    state.on_leader_append(leader_log_end_offset=130, now_ms=NOW + LAG_MS + 2)
    assert state.high_watermark == 100
    assert state.acks_all_outcome(120) == (False, None)


def test_not_enough_replicas_after_append_when_the_isr_shrank_after_the_high_watermark() -> None:
    state = make_leader(replicas=(1, 2, 3), isr=(1, 2), min_isr=2, leo=100, hw=100)
    fetch(state, 2, 100, leo=100, now=NOW)
    state.on_leader_append(leader_log_end_offset=110, now_ms=NOW)
    fetch(state, 2, 110, leo=110, now=NOW)
    assert state.high_watermark == 110
    state.maybe_shrink_isr(leader_log_end_offset=111, now_ms=NOW + LAG_MS + 1)
    commit_pending(state, leo=111, now=NOW + LAG_MS + 1)
    done, error = state.acks_all_outcome(110)
    assert done is True
    assert isinstance(error, NotEnoughReplicasAfterAppendError)
    assert "orders-3" in str(error) and "before 110" in str(error) and "[1]" in str(error)
    assert state.acks_all_outcome(111) == (False, None)


def test_s5_last_replica_standing_at_the_leader() -> None:
    # docs/design/replication.md#scenarios, S5 steps 1-4 at the leader: RF=3 [0, 1, 2], min.isr=2,
    # leader 2 (epoch 5).
    state = make_leader(replicas=(0, 1, 2), local=2, min_isr=2, leo=0, hw=0)
    t = NOW
    state.on_leader_append(leader_log_end_offset=100, now_ms=t)
    fetch(state, 0, 100, leo=100, now=t)
    fetch(state, 1, 100, leo=100, now=t)
    assert state.high_watermark == 100
    # T0: broker 0 stops fetching. An acks=all produce of 100..149 waits for it...
    state.check_enough_replicas()
    state.on_leader_append(leader_log_end_offset=150, now_ms=t)
    fetch(state, 1, 150, leo=150, now=t)
    assert state.acks_all_outcome(150) == (False, None)
    # ...until, past the lag (plus up to one expiration period), the ISR becomes {1, 2}.
    t += LAG_MS + LAG_MS // 2
    fetch(state, 1, 150, leo=150, now=t)
    change = state.maybe_shrink_isr(leader_log_end_offset=150, now_ms=t)
    assert change is not None and change.new_isr == (1, 2)
    assert commit_pending(state, leo=150, now=t) is True
    assert state.high_watermark == 150
    assert state.acks_all_outcome(150) == (True, None)  # ISR 2 >= 2
    # T1: broker 1 stops too. An acks=1 produce of 150..154 lands; the ISR becomes {2}.
    state.on_leader_append(leader_log_end_offset=155, now_ms=t)
    t += LAG_MS + LAG_MS // 2
    change = state.maybe_shrink_isr(leader_log_end_offset=155, now_ms=t)
    assert change is not None and change.new_isr == (2,)
    commit_pending(state, leo=155, now=t)
    # acks=all now gets NOT_ENOUGH_REPLICAS before any append.
    with pytest.raises(NotEnoughReplicasError):
        state.check_enough_replicas()
    # acks=1 appends up to 159, but the HW stays at 150 (rule 6.5.1).
    assert state.on_leader_append(leader_log_end_offset=160, now_ms=t) is False
    assert state.high_watermark == 150


# --- low watermark (docs/design/replication.md#low-watermark) ------------------------------------


def test_low_watermark_over_the_leader_and_alive_followers() -> None:
    eligibility = ReplicaEligibility(
        broker_epochs=frozen_mapping({1: -1, 2: -1}),
        alive_broker_epochs=frozen_mapping({1: -1, 2: -1, 3: -1}),  # 3 in controlled shutdown
    )
    state = make_leader(replicas=(1, 2, 3, 4), eligibility=eligibility)  # 4 is fenced
    assert state.low_watermark(10) == -1  # alive followers that have not fetched yet
    fetch(state, 2, 100, leo=100, log_start_offset=8)
    assert state.low_watermark(10) == -1  # 3 still unknown
    fetch(state, 3, 100, leo=100, log_start_offset=6)
    assert state.low_watermark(10) == 6
    assert state.low_watermark(5) == 5
    fetch(state, 3, 100, leo=100, log_start_offset=12)
    assert state.low_watermark(10) == 8  # fenced 4 (never fetched) does not count
