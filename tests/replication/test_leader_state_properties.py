"""Random sequences of follower fetches, appends, ISR shrinks and AlterPartition answers
against the leader invariants of docs/design/replication.md:

- the high watermark never decreases and never exceeds the leader log end offset;
- while the committed ISR reaches the effective min ISR, the HW is <= the log end offset of
  every maximal-ISR member whose log end offset is known;
- the HW never moves to a value while the committed ISR is below the effective min ISR;
- the maximal ISR is the committed ISR plus the members of a pending change (so it contains
  the committed ISR, and a pending expansion's new member at once);
- every "HW moved" answer is true exactly when the HW rose;
- an acks=all produce completes exactly when the HW reaches it.

Followers fetch at non-decreasing offsets from a starting log end offset that, for the members
of the initial ISR, is at least the initial HW (as in Kafka: ISR members hold every committed
record). `test_the_invariant_checker_catches_*` show the checker fails on broken leaders.
"""

from __future__ import annotations

from uuid import UUID

import pytest
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from replog.errors import (
    FencedLeaderEpochError,
    IneligibleReplicaError,
    InvalidUpdateVersionError,
    KafkaError,
    UnknownServerError,
)
from replog.quorum.metadata.image import frozen_mapping
from replog.quorum.metadata.partition_registration import PartitionRegistration
from replog.replication.leader_state import (
    PartitionLeaderState,
    PartitionReplicationConfig,
    ReplicaEligibility,
)

LOCAL = 1
LAG_MS = 10_000
START_MS = 1_000_000
TOPIC_ID = UUID(int=0x51)


def broker_epoch_of(broker_id: int) -> int:
    return 100 + broker_id


def eligibility_without(replicas: tuple[int, ...], ineligible: set[int]) -> ReplicaEligibility:
    alive = {r: broker_epoch_of(r) for r in replicas}
    return ReplicaEligibility(
        broker_epochs=frozen_mapping({r: e for r, e in alive.items() if r not in ineligible}),
        alive_broker_epochs=frozen_mapping(alive),
    )


class InvariantChecker:
    """Checks one leader against the invariants after every step; remembers the last HW."""

    def __init__(self, state: PartitionLeaderState, leader_log_end_offset: int) -> None:
        self.last_high_watermark = state.high_watermark
        self.check(state, leader_log_end_offset)

    def check(self, state: PartitionLeaderState, leader_log_end_offset: int) -> None:
        high_watermark = state.high_watermark
        # Computed here, not read from the leader, so a wrong leader cannot fool the check.
        effective_min_isr = min(state.config.min_insync_replicas, len(state.replicas))
        assert state.effective_min_isr == effective_min_isr
        assert high_watermark >= self.last_high_watermark, "the HW decreased"
        assert high_watermark <= leader_log_end_offset, "the HW passed the leader LEO"
        if high_watermark != self.last_high_watermark:
            assert len(state.isr) >= effective_min_isr, "the HW moved below min ISR"
        pending = state.pending_isr_change
        expected_maximal = set(state.isr) | (set(pending.new_isr) if pending else set())
        assert set(state.maximal_isr) == expected_maximal
        assert len(state.maximal_isr) == len(expected_maximal)
        assert set(state.isr) <= set(state.maximal_isr)
        if len(state.isr) >= effective_min_isr:
            for broker_id in expected_maximal:
                progress = state.progress(broker_id)
                if progress is not None and progress.log_end_offset >= 0:
                    assert high_watermark <= progress.log_end_offset, (
                        f"HW {high_watermark} above the LEO {progress.log_end_offset} of "
                        f"maximal-ISR member {broker_id}"
                    )
        self.last_high_watermark = high_watermark

    def check_moved(self, moved: bool, state: PartitionLeaderState) -> None:
        assert moved == (state.high_watermark > self.last_high_watermark)


class LeaderMachine(RuleBasedStateMachine):
    state: PartitionLeaderState
    checker: InvariantChecker

    @initialize(
        replication_factor=st.integers(1, 4),
        min_isr=st.integers(1, 4),
        data=st.data(),
    )
    def start(self, replication_factor: int, min_isr: int, data: st.DataObject) -> None:
        self.replicas = tuple(range(1, replication_factor + 1))
        followers = self.replicas[1:]
        in_isr = data.draw(st.lists(st.sampled_from(followers), unique=True)) if followers else []
        isr = (LOCAL, *sorted(in_isr))
        self.leo = data.draw(st.integers(0, 200), label="leader LEO")
        high_watermark = data.draw(st.integers(0, self.leo), label="checkpointed HW")
        # The next fetch offset of each follower (non-decreasing): ISR members hold every
        # committed record, others may be anywhere.
        self.next_offset = {
            r: data.draw(st.integers(high_watermark if r in isr else 0, self.leo))
            for r in followers
        }
        self.now = START_MS
        self.leader_epoch = 5
        self.ineligible: set[int] = set()
        self.acks_all: list[int] = []
        self.state = PartitionLeaderState(
            topic="t",
            topic_id=TOPIC_ID,
            partition=0,
            local_broker_id=LOCAL,
            registration=PartitionRegistration(
                replicas=self.replicas,
                isr=isr,
                leader=LOCAL,
                leader_epoch=self.leader_epoch,
                partition_epoch=10,
            ),
            leader_log_end_offset=self.leo,
            high_watermark=high_watermark,
            config=PartitionReplicationConfig(min_isr, LAG_MS),
            eligibility=eligibility_without(self.replicas, self.ineligible),
            now_ms=self.now,
        )
        self.committed_isr = isr
        self.checker = InvariantChecker(self.state, self.leo)

    @rule(count=st.integers(0, 30), acks_all=st.booleans())
    def append(self, count: int, acks_all: bool) -> None:
        if acks_all:
            try:
                self.state.check_enough_replicas()
            except KafkaError:
                assert len(self.state.isr) < self.state.effective_min_isr
                return
        self.leo += count
        if acks_all and count:
            self.acks_all.append(self.leo)
        moved = self.state.on_leader_append(leader_log_end_offset=self.leo, now_ms=self.now)
        self.checker.check_moved(moved, self.state)

    @precondition(lambda self: len(self.replicas) > 1)
    @rule(data=st.data(), send_epoch=st.booleans())
    def follower_fetch(self, data: st.DataObject, send_epoch: bool) -> None:
        replica = data.draw(st.sampled_from(self.replicas[1:]))
        low = min(self.next_offset[replica], self.leo)
        # Half the fetches are at the leader's end (a follower keeping up), the rest anywhere.
        at_end = data.draw(st.booleans(), label="at the leader LEO")
        offset = self.leo if at_end else data.draw(st.integers(low, self.leo), label="offset")
        self.next_offset[replica] = offset
        before = self.state.pending_isr_change
        update = self.state.on_follower_fetch(
            replica_id=replica,
            broker_epoch=broker_epoch_of(replica) if send_epoch else -1,
            fetch_offset=offset,
            log_start_offset=0,
            leader_log_end_offset=self.leo,
            now_ms=self.now,
        )
        self.checker.check_moved(update.high_watermark_moved, self.state)
        if update.isr_change is not None:
            event("ISR expansion proposed")
            assert before is None
            assert update.isr_change == self.state.pending_isr_change
            assert update.isr_change.new_isr == (*self.state.isr, replica)
            assert offset >= self.state.high_watermark
            assert offset >= self.state.leader_epoch_start_offset
            assert replica not in self.ineligible

    @rule(elapsed_ms=st.sampled_from([0, 1, 500, LAG_MS // 2, LAG_MS, LAG_MS + 1, 3 * LAG_MS]))
    def clock(self, elapsed_ms: int) -> None:
        self.now += elapsed_ms

    @rule()
    def shrink(self) -> None:
        had_pending = self.state.pending_isr_change is not None
        change = self.state.maybe_shrink_isr(leader_log_end_offset=self.leo, now_ms=self.now)
        if change is not None:
            event("ISR shrink proposed" if change.new_isr != self.state.isr else "RECOVERED report")
            assert not had_pending
            assert set(change.new_isr) <= set(self.state.isr)
            assert LOCAL in change.new_isr

    @precondition(lambda self: self.state.pending_isr_change is not None)
    @rule(
        error=st.sampled_from(
            [
                None,  # committed
                None,
                IneligibleReplicaError("refused"),
                InvalidUpdateVersionError("stale"),
                FencedLeaderEpochError("fenced"),
                UnknownServerError("boom"),
            ]
        )
    )
    def alter_partition_answer(self, error: KafkaError | None) -> None:
        change = self.state.pending_isr_change
        assert change is not None
        if error is None:
            moved = self.state.on_isr_change_committed(
                isr=change.new_isr,
                leader_epoch=change.leader_epoch,
                partition_epoch=change.partition_epoch + 1,
                leader_log_end_offset=self.leo,
                now_ms=self.now,
                change=change,
            )
            self.checker.check_moved(moved, self.state)
            self.committed_isr = change.new_isr
            assert self.state.pending_isr_change is None
            return
        resend = self.state.on_isr_change_failed(error, change=change)
        if isinstance(error, IneligibleReplicaError):
            assert self.state.pending_isr_change is None and not resend
        else:
            assert self.state.pending_isr_change == change
            assert resend == isinstance(error, UnknownServerError)

    @rule(applied=st.booleans(), epoch_step=st.sampled_from((0, 0, 1, 2)))
    def metadata(self, applied: bool, epoch_step: int) -> None:
        """The controller's image arrives: with or without the pending change applied, at the
        same leader epoch, the next one, or one further on (this broker missed an epoch)."""
        change = self.state.pending_isr_change
        isr = change.new_isr if (applied and change is not None) else self.committed_isr
        self.leader_epoch += epoch_step
        moved = self.state.update_registration(
            PartitionRegistration(
                replicas=self.replicas,
                isr=isr,
                leader=LOCAL,
                leader_epoch=self.leader_epoch,
                partition_epoch=self.state.partition_epoch + 1,
            ),
            leader_log_end_offset=self.leo,
            now_ms=self.now,
        )
        self.checker.check_moved(moved, self.state)
        self.committed_isr = isr
        assert self.state.pending_isr_change is None
        if epoch_step:
            assert self.state.leader_epoch_start_offset == self.leo

    @rule(data=st.data(), min_isr=st.integers(1, 4), change_config=st.booleans())
    def environment(self, data: st.DataObject, min_isr: int, change_config: bool) -> None:
        """min.insync.replicas changes, or a follower's broker starts or ends a shutdown."""
        if change_config or len(self.replicas) == 1:
            moved = self.state.update_config(
                PartitionReplicationConfig(min_isr, LAG_MS),
                leader_log_end_offset=self.leo,
                now_ms=self.now,
            )
        else:
            self.ineligible ^= {data.draw(st.sampled_from(self.replicas[1:]))}
            moved = self.state.update_eligibility(
                eligibility_without(self.replicas, self.ineligible),
                leader_log_end_offset=self.leo,
                now_ms=self.now,
            )
        self.checker.check_moved(moved, self.state)

    @invariant()
    def leader_invariants(self) -> None:
        # The committed ISR is what the controller accepted, nothing else.
        assert self.state.isr == self.committed_isr
        if self.state.high_watermark > self.checker.last_high_watermark:
            event("HW moved")
        if len(self.committed_isr) < self.state.effective_min_isr:
            event("under min ISR")
        self.checker.check(self.state, self.leo)

    @invariant()
    def acks_all_completes_exactly_at_the_high_watermark(self) -> None:
        for required_offset in self.acks_all:
            done, error = self.state.acks_all_outcome(required_offset)
            assert done == (self.state.high_watermark >= required_offset)
            if done:
                assert (error is None) == (
                    len(self.state.maximal_isr) >= self.state.effective_min_isr
                )
            else:
                assert error is None


LeaderMachine.TestCase.settings = settings(
    max_examples=400,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestLeaderInvariants = LeaderMachine.TestCase


# --- the checker can fail ------------------------------------------------------------------


class IgnoresPendingExpansion(PartitionLeaderState):
    """Broken on purpose: a pending expansion does not count for the HW."""

    @property
    def maximal_isr(self) -> tuple[int, ...]:
        pending = self.pending_isr_change
        if pending is not None and pending.is_expansion:
            return self.isr
        return super().maximal_isr


class MovesBelowMinIsr(PartitionLeaderState):
    """Broken on purpose: the min-ISR freeze is missing."""

    def on_leader_append(self, *, leader_log_end_offset: int, now_ms: int) -> bool:
        config = self.config
        self._config = PartitionReplicationConfig(1, config.replica_lag_time_ms_max)
        try:
            return super().on_leader_append(
                leader_log_end_offset=leader_log_end_offset, now_ms=now_ms
            )
        finally:
            self._config = config


def build(
    cls: type[PartitionLeaderState], *, isr: tuple[int, ...], min_isr: int
) -> PartitionLeaderState:
    return cls(
        topic="t",
        topic_id=TOPIC_ID,
        partition=0,
        local_broker_id=LOCAL,
        registration=PartitionRegistration(
            replicas=(1, 2, 3), isr=isr, leader=LOCAL, leader_epoch=5
        ),
        leader_log_end_offset=100,
        high_watermark=100,
        config=PartitionReplicationConfig(min_isr, LAG_MS),
        eligibility=eligibility_without((1, 2, 3), set()),
        now_ms=START_MS,
    )


def test_the_invariant_checker_catches_a_leader_that_ignores_a_pending_expansion() -> None:
    state = build(IgnoresPendingExpansion, isr=(1,), min_isr=1)
    checker = InvariantChecker(state, 100)
    state.on_follower_fetch(
        replica_id=2,
        broker_epoch=-1,
        fetch_offset=100,
        log_start_offset=0,
        leader_log_end_offset=100,
        now_ms=START_MS,
    )
    assert state.pending_isr_change is not None
    with pytest.raises(AssertionError):
        checker.check(state, 100)


def test_the_invariant_checker_catches_a_high_watermark_moving_below_min_isr() -> None:
    state = build(MovesBelowMinIsr, isr=(1,), min_isr=2)
    checker = InvariantChecker(state, 100)
    state.on_leader_append(leader_log_end_offset=120, now_ms=START_MS + 3 * LAG_MS)
    with pytest.raises(AssertionError, match="below min ISR"):
        checker.check(state, 120)
    # And the real leader passes the same steps.
    real = build(PartitionLeaderState, isr=(1,), min_isr=2)
    real_checker = InvariantChecker(real, 100)
    real.on_leader_append(leader_log_end_offset=120, now_ms=START_MS + 3 * LAG_MS)
    real_checker.check(real, 120)
