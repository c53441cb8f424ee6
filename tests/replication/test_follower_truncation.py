"""Follower truncation (docs/design/replication.md#follower-truncation, #truncate-on-fetch,
#follower-out-of-range, #iterative-truncation-example, #scenarios, S1-S3): every branch, the worked
examples, convergence.

Replicas are modelled as a list of leader epochs (one per offset) plus a leader-epoch cache kept
by Kafka's rules (assign on append and election, truncate-from-end on truncation), so the
dangling entry of a leader that wrote nothing is modelled too.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replog.checkpoints.leader_epoch_checkpoint import EpochEntry
from replog.errors import OffsetOutOfRangeError
from replog.replication.fetch_rules import check_fetch_offset, diverging_epoch
from replog.replication.follower_truncation import (
    TruncationState,
    follower_high_watermark,
    initial_fetch_offset,
    offset_truncation_state,
)
from replog.storage.leader_epoch_cache import InMemoryLeaderEpochStore, LeaderEpochCache

WHERE = "t-0"


@dataclass
class Replica:
    """A replica's log (the leader epoch of each offset) and its leader-epoch cache."""

    log: list[int] = field(default_factory=list)
    cache: list[tuple[int, int]] = field(default_factory=list)  # (leader_epoch, start_offset)
    high_watermark: int = 0

    @classmethod
    def of(cls, log: list[int], high_watermark: int = 0) -> Replica:
        replica = cls(high_watermark=high_watermark)
        for leader_epoch in log:
            replica.append(leader_epoch)
        return replica

    @property
    def log_end_offset(self) -> int:
        return len(self.log)

    @property
    def latest_epoch(self) -> int | None:
        return self.cache[-1][0] if self.cache else None

    def assign(self, leader_epoch: int, start_offset: int) -> None:
        """`assign` of docs/design/replication.md#leader-epoch-cache."""
        if self.cache and self.cache[-1][0] == leader_epoch and self.cache[-1][1] <= start_offset:
            return
        while self.cache and (
            self.cache[-1][0] >= leader_epoch or self.cache[-1][1] >= start_offset
        ):
            self.cache.pop()
        self.cache.append((leader_epoch, start_offset))

    def append(self, leader_epoch: int) -> None:
        self.assign(leader_epoch, len(self.log))
        self.log.append(leader_epoch)

    def truncate_to(self, target: int) -> None:
        """docs/design/replication.md#follower-truncation: the log, then the cache from the end
        (with LEO even when target >= LEO)."""
        end = min(target, len(self.log))
        del self.log[end:]
        self.cache = [(e, s) for e, s in self.cache if s < end]
        self.high_watermark = min(self.high_watermark, end)

    def end_offset_for(self, requested: int) -> tuple[int, int]:
        """docs/design/replication.md#end-offset-for-an-epoch, written out naively."""
        if requested == -1:
            return (-1, -1)
        if self.cache and requested == self.cache[-1][0]:
            return (requested, len(self.log))
        higher = [(e, s) for e, s in self.cache if e > requested]
        if not higher:
            return (-1, -1)
        lower = [(e, s) for e, s in self.cache if e <= requested]
        if not lower:
            return (requested, higher[0][1])
        return (lower[-1][0], higher[0][1])

    def follower_lookup(self, requested: int) -> tuple[int, int] | None:
        """`UnifiedLog.endOffsetForEpoch`: no cache or an unknown end offset is None."""
        if not self.cache:
            return None
        answer = self.end_offset_for(requested)
        return None if answer[1] == -1 else answer


def truncation_for(follower: Replica, leader_answer: tuple[int, int]) -> TruncationState:
    return offset_truncation_state(
        leader_epoch=leader_answer[0],
        leader_end_offset=leader_answer[1],
        follower_end_offset_for=follower.follower_lookup,
        follower_log_end_offset=follower.log_end_offset,
        initial_fetch_offset=initial_fetch_offset(
            log_end_offset=follower.log_end_offset,
            latest_leader_epoch=follower.latest_epoch,
            high_watermark=follower.high_watermark,
        ),
    )


def truncate_via_offsets_for_leader_epoch(follower: Replica, leader: Replica) -> list[int]:
    """The Truncating-state path: ask about the latest epoch until done; returns the targets."""
    targets = []
    while True:
        if follower.latest_epoch is None:
            # No epochs: truncate to the HW (docs/design/replication.md#truncate-on-fetch).
            follower.truncate_to(follower.high_watermark)
            targets.append(follower.high_watermark)
            return targets
        state = truncation_for(follower, leader.end_offset_for(follower.latest_epoch))
        follower.truncate_to(state.offset)
        targets.append(state.offset)
        if state.truncation_completed:
            return targets
        assert len(targets) <= 1000, "truncation does not converge"


def truncate_via_fetch(follower: Replica, leader: Replica) -> list[int]:
    """The Fetch v12 path: DivergingEpoch answers until a fetch is not divergent
    (docs/design/replication.md#truncate-on-fetch). Returns the truncation targets; leaves the
    follower ready to read at its LEO."""
    targets = []
    while True:
        fetch_offset = follower.log_end_offset
        last_fetched_epoch = -1 if follower.latest_epoch is None else follower.latest_epoch
        try:
            diverging = diverging_epoch(
                WHERE,
                fetch_offset=fetch_offset,
                last_fetched_epoch=last_fetched_epoch,
                leader_end_offset_for_last_epoch=leader.end_offset_for(last_fetched_epoch),
                log_start_offset=0,
            )
            if diverging is None:
                check_fetch_offset(
                    WHERE,
                    fetch_offset=fetch_offset,
                    log_start_offset=0,
                    log_end_offset=leader.log_end_offset,
                )
                return targets
        except OffsetOutOfRangeError:
            # docs/design/replication.md#follower-out-of-range: the leader's LEO is below ours:
            # truncate to it.
            assert leader.log_end_offset < follower.log_end_offset
            follower.truncate_to(leader.log_end_offset)
            targets.append(leader.log_end_offset)
            continue
        state = truncation_for(follower, (diverging.leader_epoch, diverging.end_offset))
        follower.truncate_to(state.offset)
        targets.append(state.offset)
        assert len(targets) <= 1000, "truncation does not converge"


def fetch(follower: Replica, leader: Replica, count: int | None = None) -> None:
    end = leader.log_end_offset if count is None else follower.log_end_offset + count
    for leader_epoch in leader.log[follower.log_end_offset : end]:
        follower.append(leader_epoch)


# --- offset_truncation_state: each branch ---------------------------------------------------


@pytest.mark.parametrize(
    ("leader_answer", "follower_answer", "expected"),
    [
        pytest.param((5, -1), (5, 9), TruncationState(4, True), id="leader-unknown-to-initial"),
        pytest.param((-1, 6), (3, 9), TruncationState(6, True), id="no-epoch-min-leader-offset"),
        pytest.param((-1, 12), (3, 9), TruncationState(10, True), id="no-epoch-min-leo"),
        pytest.param((3, 7), None, TruncationState(7, True), id="follower-no-epochs"),
        pytest.param((3, 17), None, TruncationState(10, True), id="follower-no-epochs-leo"),
        pytest.param((3, 7), (3, -1), TruncationState(7, True), id="follower-unknown-end"),
        pytest.param((3, 7), (2, 5), TruncationState(5, False), id="follower-lacks-epoch"),
        pytest.param((3, 7), (2, 15), TruncationState(10, False), id="follower-lacks-epoch-leo"),
        pytest.param((3, 7), (3, 9), TruncationState(7, True), id="same-epoch-leader-min"),
        pytest.param((3, 9), (3, 7), TruncationState(7, True), id="same-epoch-follower-min"),
        pytest.param((3, 19), (3, 17), TruncationState(10, True), id="same-epoch-leo-min"),
    ],
)
def test_every_branch(
    leader_answer: tuple[int, int],
    follower_answer: tuple[int, int] | None,
    expected: TruncationState,
) -> None:
    seen: list[int] = []

    def follower_end_offset_for(leader_epoch: int) -> tuple[int, int] | None:
        seen.append(leader_epoch)
        return follower_answer

    state = offset_truncation_state(
        leader_epoch=leader_answer[0],
        leader_end_offset=leader_answer[1],
        follower_end_offset_for=follower_end_offset_for,
        follower_log_end_offset=10,
        initial_fetch_offset=4,
    )
    assert state == expected
    # The follower's cache is consulted about the leader's epoch, and only when both are known.
    assert seen == ([] if -1 in leader_answer else [leader_answer[0]])


def test_the_follower_cache_lookup_matches_the_storage_cache() -> None:
    """The test model of docs/design/replication.md#end-offset-for-an-epoch agrees with replog's
    LeaderEpochCache on a spread of requests."""
    replica = Replica.of([0, 0, 2, 2, 2, 5, 7, 7])
    cache = LeaderEpochCache(InMemoryLeaderEpochStore([EpochEntry(e, s) for e, s in replica.cache]))
    for requested in range(-1, 10):
        real = cache.end_offset_for(requested, replica.log_end_offset)
        assert (real.leader_epoch, real.end_offset) == replica.end_offset_for(requested)


# --- initial fetch offset and follower HW (docs/design/replication.md#truncate-on-fetch) ----------


@pytest.mark.parametrize(
    ("latest_leader_epoch", "expected"),
    [(None, 3), (-1, 3), (0, 8), (4, 8)],
)
def test_initial_fetch_offset_is_the_leo_when_the_log_knows_an_epoch(
    latest_leader_epoch: int | None, expected: int
) -> None:
    assert (
        initial_fetch_offset(
            log_end_offset=8, latest_leader_epoch=latest_leader_epoch, high_watermark=3
        )
        == expected
    )


@pytest.mark.parametrize(
    ("leader_high_watermark", "expected"),
    [(2, 5), (5, 5), (7, 7), (9, 9), (12, 9)],
)
def test_follower_high_watermark_is_clamped_into_the_log(
    leader_high_watermark: int, expected: int
) -> None:
    assert follower_high_watermark(leader_high_watermark, 5, 9) == expected


def test_follower_high_watermark_may_move_backwards() -> None:
    # A new leader may start with a lower HW than the follower had: the follower follows it.
    assert follower_high_watermark(4, 0, 10) == 4


# --- worked examples (docs/design/replication.md#iterative-truncation-example) --------------------


def test_worked_example_needs_three_rounds_and_ends_at_zero() -> None:
    follower = Replica.of([0, 2, 4])
    leader = Replica.of([1, 3, 5])
    assert follower.cache == [(0, 0), (2, 1), (4, 2)]
    assert leader.cache == [(1, 0), (3, 1), (5, 2)]

    answers = []
    states = []
    while True:
        assert follower.latest_epoch is not None
        answer = leader.end_offset_for(follower.latest_epoch)
        state = truncation_for(follower, answer)
        answers.append(answer)
        states.append(state)
        follower.truncate_to(state.offset)
        if state.truncation_completed:
            break
    assert answers == [(3, 2), (1, 1), (0, 0)]
    assert states == [
        TruncationState(2, False),
        TruncationState(1, False),
        TruncationState(0, True),
    ]
    assert follower.cache == []
    fetch(follower, leader)
    assert follower.log == leader.log


def test_worked_example_through_diverging_epoch_fetches() -> None:
    follower = Replica.of([0, 2, 4])
    leader = Replica.of([1, 3, 5])
    assert truncate_via_fetch(follower, leader) == [2, 1, 0]
    fetch(follower, leader)
    assert follower.log == leader.log


def test_diverging_epoch_variant_of_the_worked_example() -> None:
    """testDivergingEpochs: follower {0:0, 2:1, 4:2}, leader {0:0, 2:1, 5:2}."""
    follower = Replica.of([0, 2, 4])
    leader = Replica.of([0, 2, 5])
    answer = diverging_epoch(
        WHERE,
        fetch_offset=3,
        last_fetched_epoch=4,
        leader_end_offset_for_last_epoch=leader.end_offset_for(4),
        log_start_offset=0,
    )
    assert answer is not None
    assert (answer.leader_epoch, answer.end_offset) == (2, 2)
    state = truncation_for(follower, (answer.leader_epoch, answer.end_offset))
    assert state == TruncationState(2, True)
    follower.truncate_to(state.offset)
    assert follower.latest_epoch == 2
    assert (
        diverging_epoch(
            WHERE,
            fetch_offset=2,
            last_fetched_epoch=2,
            leader_end_offset_for_last_epoch=leader.end_offset_for(2),
            log_start_offset=0,
        )
        is None
    )
    fetch(follower, leader)
    assert follower.log == [0, 2, 5]


# --- docs/design/replication.md#scenarios, S1-S3 -------------------------------------------------


def test_s1_a_restarted_follower_keeps_acked_data_above_its_high_watermark() -> None:
    leader = Replica.of([1, 1], high_watermark=2)  # m1 acked: the leader's HW is 2
    follower = Replica.of([1, 1], high_watermark=1)  # the response with HW 2 was dropped
    # Restart: the follower fetches from its LEO, not its HW.
    assert initial_fetch_offset(log_end_offset=2, latest_leader_epoch=1, high_watermark=1) == 2
    assert truncate_via_fetch(follower, leader) == []
    assert truncate_via_offsets_for_leader_epoch(follower, leader) == [2]
    assert follower.log == [1, 1]
    # The follower then leads epoch 2; the old leader returns and is not divergent either.
    follower.assign(2, follower.log_end_offset)
    assert truncate_via_fetch(leader, follower) == []
    assert leader.log == follower.log == [1, 1]


def test_s2_replicas_converge_after_a_double_hard_failure() -> None:
    a = Replica.of([1, 1], high_watermark=2)  # kept m1
    b = Replica.of([1])  # lost m1 with its page cache
    b.assign(2, b.log_end_offset)  # b leads epoch 2
    b.append(2)  # m2@1(e2)
    assert b.cache == [(1, 0), (2, 1)]
    for path in (truncate_via_fetch, truncate_via_offsets_for_leader_epoch):
        follower = Replica(list(a.log), list(a.cache), a.high_watermark)
        assert path(follower, b) == [1]
        fetch(follower, b)
        assert follower.log == b.log == [1, 2]


def test_s3_the_leader_lacks_the_followers_epoch() -> None:
    a = Replica.of([1, 1])  # m0@0(e1), m1@1(e1)
    b = Replica.of([1])
    b.assign(2, 1)
    b.append(2)  # m2@1(e2)
    a.assign(3, a.log_end_offset)  # a leads again in epoch 3, never having seen epoch 2
    a.append(3)  # m3@2(e3)
    assert a.cache == [(1, 0), (3, 2)]
    assert a.end_offset_for(2) == (1, 2)
    for path in (truncate_via_fetch, truncate_via_offsets_for_leader_epoch):
        follower = Replica(list(b.log), list(b.cache))
        assert path(follower, a) == [1]
        fetch(follower, a)
        assert follower.log == a.log == [1, 1, 3]


def test_s3_a_dangling_epoch_of_a_leader_that_wrote_nothing_is_removed() -> None:
    a = Replica.of([1, 1])
    a.assign(3, a.log_end_offset)  # elected in epoch 3, writes nothing, loses leadership
    assert a.cache == [(1, 0), (3, 2)]
    leader = Replica.of([1, 1])
    leader.assign(4, 2)
    leader.append(4)
    # The follower asks about epoch 3; the leader's floor is 1, ending at 2.
    assert leader.end_offset_for(3) == (1, 2)
    assert truncate_via_fetch(a, leader) == [2]
    assert a.cache == [(1, 0)]  # truncate-from-end(LEO) dropped the dangling (3, 2)
    fetch(a, leader)
    assert a.log == leader.log


# --- Property: convergence over random epoch histories --------------------------------------

Action = tuple[str, int, int]

# Fast failovers (an election with no replication since the last one) are what make epochs
# diverge, so elections and appends are drawn more often than replication and crashes.
actions = st.lists(
    st.one_of(
        st.tuples(st.just("elect"), st.integers(0, 2), st.just(0)),
        st.tuples(st.just("append"), st.integers(0, 2), st.just(0)),
        st.tuples(st.just("elect_and_append"), st.integers(0, 2), st.integers(1, 2)),
        st.tuples(st.just("sync"), st.integers(0, 2), st.integers(0, 3)),
        st.tuples(st.just("lose_tail"), st.integers(0, 2), st.integers(1, 3)),
    ),
    max_size=30,
)


def common_prefix_length(a: list[int], b: list[int]) -> int:
    length = 0
    while length < min(len(a), len(b)) and a[length] == b[length]:
        length += 1
    return length


@settings(max_examples=400, deadline=None)
@given(st.integers(2, 3), actions, st.booleans())
def test_truncation_cuts_exactly_to_the_common_prefix_with_the_leader(
    replica_count: int, script: list[Action], use_fetch_path: bool
) -> None:
    """Leaders (clean or unclean elections) write, followers partially replicate, replicas lose
    unflushed tails. Whenever a follower finishes truncating against the current leader, its log
    is exactly its longest common prefix with the leader's (nothing divergent kept, nothing
    common dropped), within one round per epoch of its cache (plus the last)."""
    replicas = [Replica() for _ in range(replica_count)]
    leader: int | None = None
    leader_epoch = -1

    def sync(index: int, count: int | None) -> None:
        assert leader is not None
        follower, source = replicas[index], replicas[leader]
        expected_length = common_prefix_length(follower.log, source.log)
        epochs_before = len(follower.cache)
        if use_fetch_path:
            rounds = truncate_via_fetch(follower, source)
        else:
            rounds = truncate_via_offsets_for_leader_epoch(follower, source)
        assert len(rounds) <= epochs_before + 1
        assert follower.log == source.log[:expected_length], (follower.log, source.log)
        fetch(follower, source, count)

    for kind, index, amount in script:
        index %= replica_count
        if kind in ("elect", "elect_and_append"):
            leader = index
            leader_epoch += 1
            replicas[leader].assign(leader_epoch, replicas[leader].log_end_offset)
            for _ in range(amount):
                replicas[leader].append(leader_epoch)
        elif kind == "append" and leader is not None:
            for _ in range(index + 1):
                replicas[leader].append(leader_epoch)
        elif kind == "sync" and leader is not None and index != leader:
            sync(index, amount)
        elif kind == "lose_tail":
            replica = replicas[index]
            replica.truncate_to(max(0, replica.log_end_offset - amount))
            if index == leader:
                leader = None  # it crashed: no appends until the next election
    if leader is not None:
        for index in range(replica_count):
            if index != leader:
                sync(index, None)
                assert replicas[index].log == replicas[leader].log
