"""Dirty-only fetch session rounds (`fetch_session` Rules; parked progress in
`replica_progress`) decide exactly what the walk-everything leader decides.

Two leaders of the same partitions (replicas 1, 2, 3; leader 1) go through the same random
steps: appends, follower fetch rounds on sessions (followers that take only part of what they
are sent, that drop partitions from the session and add them back, that stop fetching for a
while), time passing, ISR shrinks, AlterPartition answers accepted or refused, eligibility
changes and sessions restarted. One reads every partition of a session each round
(`full_request`), the other only the session's dirty partitions (`round_request`), parking the
idle ones' progress on the session's clock, as the replica manager does. The dirty-only
leader's rounds are bounded (1 to 4 partitions a round, of 4): the partitions a round defers
are, for both leaders, partitions the follower left out of that round, so the walking leader
reads every partition but those. After every step both must have sent the same answers and
hold the same HW, ISRs, pending changes, follower progress (T, C, P, offsets) and caught-up
verdicts.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from replog.errors import OperationNotAttemptedError
from replog.quorum.metadata.partition_registration import PartitionRegistration
from replog.replication.fetch_session import FetcherSession, LeaderFetchSession
from replog.replication.leader_state import (
    PartitionLeaderState,
    PartitionReplicationConfig,
    ReplicaEligibility,
)
from replog.replication.messages import (
    FetchPartition,
    FetchPartitionResult,
    FetchRequest,
    FetchResponse,
)
from replog.replication.replica_progress import FetchSessionClock, ReplicaProgress

PARTITIONS = 4
FOLLOWERS = (2, 3)
LAG_MS = 10_000
TOPIC_ID = UUID(int=0x50)


def _key(p: int) -> tuple[str, int]:
    return ("t", p)


class Leader:
    """One leader and its side of each follower's session; `dirty_only` picks the model."""

    def __init__(self, *, dirty_only: bool, now_ms: int, bound: int) -> None:
        self.dirty_only = dirty_only
        self.bound = bound
        # The partitions the dirty-only leader's latest round deferred; the walking leader
        # skips those its `skip` is given.
        self.deferred: frozenset[tuple[str, int]] = frozenset()
        self.skip: frozenset[tuple[str, int]] = frozenset()
        registration = PartitionRegistration(replicas=(1, 2, 3), isr=(1, 2, 3), leader=1)
        self.eligibility = ReplicaEligibility.everyone((1, 2, 3))
        self.states = [
            PartitionLeaderState(
                topic="t",
                topic_id=TOPIC_ID,
                partition=p,
                local_broker_id=1,
                registration=registration,
                leader_log_end_offset=0,
                high_watermark=0,
                config=PartitionReplicationConfig(
                    min_insync_replicas=2, replica_lag_time_ms_max=LAG_MS
                ),
                eligibility=self.eligibility,
                now_ms=now_ms,
            )
            for p in range(PARTITIONS)
        ]
        self.leo = [0] * PARTITIONS
        self.sessions = {b: LeaderFetchSession(bound) for b in FOLLOWERS}
        self.reads = 0

    def news(self, p: int) -> None:
        """The replica manager's `_wake` / `_mark_isr_dirty`: every session hears of it."""
        for session in self.sessions.values():
            session.mark(_key(p))

    def append(self, p: int, count: int, now_ms: int) -> None:
        self.leo[p] += count
        self.states[p].on_leader_append(leader_log_end_offset=self.leo[p], now_ms=now_ms)
        self.news(p)

    def round(self, broker_id: int, sent: FetchRequest, now_ms: int) -> FetchResponse:
        session = self.sessions[broker_id]
        if self.dirty_only:
            request = session.round_request(sent)
            read = {(e.topic, e.partition) for e in request.partitions}
            dirty = {_key(p) for p in range(PARTITIONS) if session.is_dirty(_key(p))}
            self.deferred = frozenset(dirty - read)
            assert session.deferred == len(self.deferred)
        else:
            request = session.full_request(sent)
            skip = self.skip
            partitions = tuple(e for e in request.partitions if (e.topic, e.partition) not in skip)
            request = FetchRequest(partitions, replica_id=request.replica_id)
        for key in session.take_left():
            self.states[key[1]].unpark_follower(broker_id, session.clock)
        results = []
        for entry in request.partitions:
            self.reads += 1
            p = entry.partition
            state, leo = self.states[p], self.leo[p]
            state.unpark_follower(broker_id, session.clock)
            high_watermark = state.high_watermark  # the answer's, taken before the update
            records = b"r" * max(0, leo - entry.fetch_offset)
            results.append(
                FetchPartitionResult(
                    "t", p, high_watermark=high_watermark, log_start_offset=0, records=records
                )
            )
            update = state.on_follower_fetch(
                replica_id=broker_id,
                broker_epoch=-1,
                fetch_offset=entry.fetch_offset,
                log_start_offset=0,
                leader_log_end_offset=leo,
                now_ms=now_ms,
            )
            if update.isr_change is not None:
                self.news(p)
            if update.high_watermark_moved:
                self.news(p)
            elif (
                self.dirty_only
                and not records
                and state.park_follower(broker_id, session.clock, leader_log_end_offset=leo)
            ):
                session.park(_key(p))
        session.clock.advance(now_ms)
        return session.answer(sent, FetchResponse(tuple(results)))

    def shrink(self, now_ms: int) -> list[Any]:
        changes = []
        for p, state in enumerate(self.states):
            change = state.maybe_shrink_isr(leader_log_end_offset=self.leo[p], now_ms=now_ms)
            if change is not None:
                self.news(p)
                changes.append((p, change.new_isr))
        return changes

    def answer_changes(self, accept: bool, now_ms: int) -> None:
        for p, state in enumerate(self.states):
            change = state.pending_isr_change
            if change is None:
                continue
            if accept:
                state.on_isr_change_committed(
                    isr=change.new_isr,
                    leader_epoch=change.leader_epoch,
                    partition_epoch=change.partition_epoch + 1,
                    leader_log_end_offset=self.leo[p],
                    now_ms=now_ms,
                    change=change,
                )
            else:
                state.on_isr_change_failed(OperationNotAttemptedError("no"), change=change)
            self.news(p)

    def set_eligibility(self, fenced: bool, now_ms: int) -> None:
        eligible = (1, 2) if fenced else (1, 2, 3)
        self.eligibility = ReplicaEligibility.everyone(eligible)
        for p, state in enumerate(self.states):
            if state.update_eligibility(
                self.eligibility, leader_log_end_offset=self.leo[p], now_ms=now_ms
            ):
                self.news(p)
        for session in self.sessions.values():
            session.mark_all()

    def restart(self, broker_id: int) -> None:
        self.sessions[broker_id] = LeaderFetchSession(self.bound)

    def decisions(self, now_ms: int) -> list[Any]:
        out = []
        for p, state in enumerate(self.states):
            progress = [state.progress(b) for b in FOLLOWERS]
            out.append(
                (
                    state.high_watermark,
                    state.isr,
                    state.maximal_isr,
                    state.pending_isr_change,
                    progress,
                    [
                        pr is not None and pr.is_caught_up(self.leo[p], now_ms, LAG_MS)
                        for pr in progress
                    ],
                )
            )
        return out


class Follower:
    """A follower's log end offsets and its side of the session."""

    def __init__(self) -> None:
        self.offsets = [0] * PARTITIONS
        self.session = FetcherSession()

    def request(self, broker_id: int, dropped: frozenset[int]) -> tuple[FetchRequest, Any]:
        wanted = FetchRequest(
            tuple(
                FetchPartition("t", p, self.offsets[p], log_start_offset=0)
                for p in range(PARTITIONS)
                if p not in dropped
            ),
            replica_id=broker_id,
        )
        return wanted, self.session.to_send(wanted)

    def take(self, answer: FetchResponse, most: int) -> None:
        for result in answer.partitions:
            if result.records:
                self.offsets[result.partition] += min(most, len(result.records))


class World:
    def __init__(self, *, dirty_only: bool, bound: int = PARTITIONS) -> None:
        self.now_ms = 1_000_000
        self.leader = Leader(dirty_only=dirty_only, now_ms=self.now_ms, bound=bound)
        self.followers = {b: Follower() for b in FOLLOWERS}

    def step(self, step: tuple[Any, ...]) -> Any:
        kind = step[0]
        if kind == "append":
            self.leader.append(step[1], step[2], self.now_ms)
            return None
        if kind == "round":
            _, broker_id, most, dropped = step
            follower = self.followers[broker_id]
            _, sent = follower.request(broker_id, dropped)
            answer = self.leader.round(broker_id, sent, self.now_ms)
            follower.take(answer, most)
            return [(r.partition, r.high_watermark, len(r.records)) for r in answer.partitions]
        if kind == "time":
            self.now_ms += step[1]
            return self.leader.shrink(self.now_ms)
        if kind == "answer":
            self.leader.answer_changes(step[1], self.now_ms)
            return None
        if kind == "fence":
            self.leader.set_eligibility(step[1], self.now_ms)
            return None
        if kind == "restart":
            self.leader.restart(step[1])
            self.followers[step[1]].session.reset()
            return None
        raise AssertionError(kind)


_partitions = st.integers(0, PARTITIONS - 1)
_steps = st.lists(
    st.one_of(
        st.tuples(st.just("append"), _partitions, st.integers(1, 3)),
        st.tuples(
            st.just("round"),
            st.sampled_from(FOLLOWERS),
            st.integers(1, 4),
            st.frozensets(_partitions, max_size=2).map(lambda s: s if len(s) < 2 else frozenset()),
        ),
        st.tuples(st.just("round"), st.just(2), st.just(99), st.just(frozenset())),
        st.tuples(st.just("time"), st.sampled_from([1, 400, 4_000, 6_000, 11_000])),
        st.tuples(st.just("answer"), st.booleans()),
        st.tuples(st.just("fence"), st.booleans()),
        st.tuples(st.just("restart"), st.sampled_from(FOLLOWERS)),
    ),
    min_size=1,
    max_size=80,
)


def _run(steps: list[tuple[Any, ...]], bound: int = PARTITIONS) -> tuple[World, World]:
    walking, dirty = World(dirty_only=False), World(dirty_only=True, bound=bound)
    for index, step in enumerate(steps):
        dirty_outcome = dirty.step(step)
        walking.leader.skip = dirty.leader.deferred if step[0] == "round" else frozenset()
        outcomes = [walking.step(step), dirty_outcome]
        assert outcomes[0] == outcomes[1], f"step {index} {step}: outcomes differ"
        now_ms = walking.now_ms
        assert walking.leader.decisions(now_ms) == dirty.leader.decisions(now_ms), (
            f"step {index} {step}: ISR, HW or progress differ"
        )
    return walking, dirty


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_steps, st.integers(1, PARTITIONS))
def test_dirty_only_rounds_decide_as_walking_every_partition(steps: list[Any], bound: int) -> None:
    _run(steps, bound)


def test_bounded_rounds_read_every_dirty_partition_in_turn() -> None:
    # Every partition has news; rounds of at most 1 partition read them one after the other,
    # each round deferring the rest, and decide as the walking leader all along.
    steps: list[Any] = [("append", p, 1) for p in range(PARTITIONS)]
    # Each partition is read twice: its records, then the follower at the end of the log.
    steps += [("round", 2, 99, frozenset())] * (2 * PARTITIONS + 1)
    _, dirty = _run(steps, bound=1)
    assert dirty.followers[2].offsets == [1] * PARTITIONS
    assert dirty.leader.sessions[2].deferred == 0
    assert dirty.leader.reads == 2 * PARTITIONS
    # Caught up everywhere: the idle rounds that follow read nothing.
    _, idle = _run([*steps, *[("time", 1_000), ("round", 2, 99, frozenset())] * 3], bound=1)
    assert idle.leader.reads == 2 * PARTITIONS


def test_idle_rounds_read_nothing_and_keep_the_isr() -> None:
    # Everything caught up, then many idle rounds over more than the lag limit: the dirty-only
    # leader reads no partition, and still nobody leaves the ISR.
    steps: list[Any] = [("append", p, 2) for p in range(PARTITIONS)]
    # Two rounds to catch up, a third to be told the new HW.
    steps += [("round", b, 99, frozenset()) for _ in range(3) for b in FOLLOWERS]
    walking, dirty = _run(steps)
    reads = dirty.leader.reads
    idle: list[Any] = []
    for _ in range(30):
        idle += [("time", 1_000), *[("round", b, 99, frozenset()) for b in FOLLOWERS]]
    walking, dirty = _run(steps + idle)
    assert dirty.leader.reads == reads  # nothing read in the idle rounds
    assert walking.leader.reads > reads + 30 * len(FOLLOWERS) * PARTITIONS - 1
    assert all(state.isr == (1, 2, 3) for state in dirty.leader.states)
    assert all(state.high_watermark == 2 for state in dirty.leader.states)


def test_a_follower_that_stops_fetching_ages_out_of_the_isr() -> None:
    steps: list[Any] = [("append", 0, 1), *[("round", b, 99, frozenset()) for b in FOLLOWERS] * 2]
    # Follower 3 goes quiet while records arrive; follower 2 keeps fetching.
    steps += [("append", p, 1) for p in range(PARTITIONS)]
    for _ in range(12):
        steps += [("time", 1_000), ("round", 2, 99, frozenset())]
    _, dirty = _run(steps)
    assert all(state.pending_isr_change is not None for state in dirty.leader.states)
    assert all(state.pending_isr_change.new_isr == (1, 2) for state in dirty.leader.states)  # type: ignore[union-attr]


def test_parked_progress_reads_as_the_rounds_it_skipped() -> None:
    clock = FetchSessionClock()
    progress = ReplicaProgress(2)
    progress.update_fetch_state(
        fetch_offset=5, log_start_offset=0, leader_log_end_offset=5, broker_epoch=-1, now_ms=100
    )
    assert not progress.park(clock, leader_log_end_offset=6)  # behind: never parked
    assert progress.park(clock, leader_log_end_offset=5)
    clock.advance(100)
    clock.advance(900)
    assert progress.caught_up_time_ms == 900
    assert progress.is_caught_up(7, 900 + LAG_MS, LAG_MS)
    assert not progress.is_caught_up(7, 901 + LAG_MS, LAG_MS)
    # Records arrived (L = 7) after the round at 900: the next fetch, at 1000 from 5, is
    # caught up as of 900 (the f >= P branch: T is the skipped round's time), not 1000.
    progress.update_fetch_state(
        fetch_offset=5, log_start_offset=0, leader_log_end_offset=7, broker_epoch=-1, now_ms=1000
    )
    assert progress.parked_on is None
    assert (progress.last_caught_up_time_ms, progress.last_fetch_time_ms) == (900, 1000)


def test_an_unfenced_follower_rejoins_the_isr_without_news() -> None:
    # Follower 3 catches up while fenced (not ISR-eligible), so its partitions park outside
    # the ISR; unfencing it is no partition's news, yet its next round must expand the ISR.
    everyone: list[Any] = [("round", b, 99, frozenset()) for b in FOLLOWERS]
    steps: list[Any] = [("fence", True), *[("append", p, 1) for p in range(PARTITIONS)]]
    steps += [*everyone, ("round", 2, 99, frozenset()), ("time", 11_000), ("answer", True)]
    steps += [("round", 3, 99, frozenset())] * 3
    steps += [("fence", False), ("round", 3, 99, frozenset())]
    _, dirty = _run(steps)
    assert all(state.pending_isr_change is not None for state in dirty.leader.states)
    assert all(state.pending_isr_change.is_expansion for state in dirty.leader.states)  # type: ignore[union-attr]
