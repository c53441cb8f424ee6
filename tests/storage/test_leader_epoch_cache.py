"""The leader-epoch cache: Kafka's assign/truncate/end-offset rules, persistence, convergence."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from replog.checkpoints.leader_epoch_checkpoint import (
    LEADER_EPOCH_CHECKPOINT,
    EpochEntry,
    is_strictly_increasing,
)
from replog.errors import CorruptCheckpointError
from replog.storage.checkpoint_file import LeaderEpochCheckpointFile
from replog.storage.leader_epoch_cache import (
    UNDEFINED_END_OFFSET,
    UNDEFINED_LEADER_EPOCH,
    EpochEndOffset,
    InMemoryLeaderEpochStore,
    LeaderEpochCache,
)

UNDEFINED = (UNDEFINED_LEADER_EPOCH, UNDEFINED_END_OFFSET)


def cache_and_store(*pairs: tuple[int, int]) -> tuple[LeaderEpochCache, InMemoryLeaderEpochStore]:
    """A cache holding (leader_epoch, start_offset) `pairs`, and its in-memory store."""
    store = InMemoryLeaderEpochStore([EpochEntry(e, s) for e, s in pairs])
    return LeaderEpochCache(store), store


def cache_of(*pairs: tuple[int, int]) -> LeaderEpochCache:
    return cache_and_store(*pairs)[0]


def cache_of_entries(entries: Sequence[EpochEntry]) -> LeaderEpochCache:
    return LeaderEpochCache(InMemoryLeaderEpochStore(entries))


def pairs_of(cache: LeaderEpochCache) -> list[tuple[int, int]]:
    return [(e.leader_epoch, e.start_offset) for e in cache.entries()]


# --- assign (docs/design/replication.md#leader-epoch-cache) --------------------------------------


@pytest.mark.parametrize(
    ("before", "assigned", "changed", "after"),
    [
        pytest.param([], (0, 0), True, [(0, 0)], id="first-entry"),
        pytest.param([(1, 5)], (1, 9), False, [(1, 5)], id="same-epoch-later-offset-is-no-op"),
        pytest.param([(1, 5)], (1, 5), False, [(1, 5)], id="same-entry-is-no-op"),
        pytest.param([(0, 0), (1, 5)], (1, 3), True, [(0, 0), (1, 3)], id="same-epoch-earlier"),
        pytest.param([(0, 0), (1, 5)], (3, 8), True, [(0, 0), (1, 5), (3, 8)], id="new-epoch"),
        # A leader elected in epoch 1 that wrote nothing before losing leadership: its entry
        # starts where the next one does and is replaced.
        pytest.param([(0, 0), (1, 5)], (2, 5), True, [(0, 0), (2, 5)], id="empty-epoch-replaced"),
        pytest.param(
            [(1, 0), (3, 5), (4, 9)], (2, 7), True, [(1, 0), (2, 7)], id="older-epoch-drops-newer"
        ),
        pytest.param(
            [(1, 0), (3, 5), (4, 9)], (5, 6), True, [(1, 0), (3, 5), (5, 6)], id="earlier-offset"
        ),
        pytest.param([(1, 0), (3, 5)], (1, 0), True, [(1, 0)], id="re-assign-old-entry"),
        pytest.param([(1, 4), (3, 5)], (0, 0), True, [(0, 0)], id="below-everything"),
    ],
)
def test_assign_follows_kafka_rules(
    before: list[tuple[int, int]],
    assigned: tuple[int, int],
    changed: bool,
    after: list[tuple[int, int]],
) -> None:
    cache, store = cache_and_store(*before)
    assert cache.assign(*assigned) is changed
    assert store.writes == int(changed)
    assert pairs_of(cache) == after


@pytest.mark.parametrize(
    ("leader_epoch", "start_offset", "reason"),
    [
        (-1, 0, "negative leader epoch -1"),
        (0, -1, "negative start offset -1"),
        (2**31, 0, "leader epoch 2147483648 is larger"),
    ],
)
def test_assign_rejects_out_of_range_values_naming_them(
    leader_epoch: int, start_offset: int, reason: str
) -> None:
    cache = LeaderEpochCache(InMemoryLeaderEpochStore([EpochEntry(0, 0)]), name="orders-0")
    message = (
        f"orders-0: cannot assign leader epoch {leader_epoch} at start offset {start_offset}: "
    )
    with pytest.raises(ValueError, match=f"^{message}{reason}"):
        cache.assign(leader_epoch, start_offset)
    assert pairs_of(cache) == [(0, 0)]


# --- end_offset_for (docs/design/replication.md#end-offset-for-an-epoch) -------------------------

LEADER_EPOCHS = [(1, 0), (3, 10), (5, 20)]
LOG_END_OFFSET = 30


@pytest.mark.parametrize(
    ("requested", "expected"),
    [
        pytest.param(-1, UNDEFINED, id="1-undefined-request"),
        pytest.param(5, (5, LOG_END_OFFSET), id="2-latest-epoch-ends-at-log-end"),
        pytest.param(6, UNDEFINED, id="3-newer-than-known"),
        pytest.param(0, (0, 0), id="4-older-than-known-resumes-at-first-start"),
        pytest.param(1, (1, 10), id="5-known-epoch"),
        pytest.param(2, (1, 10), id="5-unknown-epoch-floors-to-1"),
        pytest.param(3, (3, 20), id="5-known-middle-epoch"),
        pytest.param(4, (3, 20), id="5-unknown-epoch-floors-to-3"),
    ],
)
def test_end_offset_for_covers_the_five_cases(requested: int, expected: tuple[int, int]) -> None:
    answer = cache_of(*LEADER_EPOCHS).end_offset_for(requested, LOG_END_OFFSET)
    assert answer == expected
    assert isinstance(answer, EpochEndOffset)


@pytest.mark.parametrize("requested", [-1, 0, 7])
def test_end_offset_for_on_an_empty_cache_is_undefined(requested: int) -> None:
    assert cache_of().end_offset_for(requested, 12) == UNDEFINED


def test_latest_epoch_starting_at_log_end_offset_answers_the_log_end_offset() -> None:
    # A new leader assigns (leader_epoch, log_end_offset) before writing anything.
    cache = cache_of((1, 0), (2, 7))
    assert cache.end_offset_for(2, 7) == (2, 7)
    assert cache.end_offset_for(1, 7) == (1, 7)


# --- truncations ---------------------------------------------------------------------------------


THREE_EPOCHS = [(0, 0), (1, 5), (2, 10)]


@pytest.mark.parametrize(
    ("action", "offset", "after"),
    [
        pytest.param("truncate_from_end", 11, THREE_EPOCHS, id="end-past-last-start-is-no-op"),
        pytest.param("truncate_from_end", 10, [(0, 0), (1, 5)], id="end-at-last-start"),
        pytest.param("truncate_from_end", 6, [(0, 0), (1, 5)], id="end-inside-an-epoch"),
        pytest.param("truncate_from_end", 5, [(0, 0)], id="end-at-a-boundary"),
        pytest.param("truncate_from_end", 0, [], id="end-at-zero"),
        pytest.param("truncate_from_start", 6, [(1, 6), (2, 10)], id="start-reference-example"),
        pytest.param("truncate_from_start", 0, THREE_EPOCHS, id="start-at-first-start-is-no-op"),
        pytest.param("truncate_from_start", 5, [(1, 5), (2, 10)], id="start-at-a-boundary"),
        pytest.param("truncate_from_start", 10, [(2, 10)], id="start-at-last-start"),
        pytest.param("truncate_from_start", 15, [(2, 15)], id="start-inside-latest-epoch"),
    ],
)
def test_truncations_follow_kafka_rules_and_write_only_changes(
    action: str, offset: int, after: list[tuple[int, int]]
) -> None:
    """truncate_from_end drops entries starting at or after the offset; truncate_from_start
    drops entries starting at or before it and keeps the epoch in force with a corrected start."""
    cache, store = cache_and_store(*THREE_EPOCHS)
    changed = getattr(cache, action)(offset)
    assert pairs_of(cache) == after
    assert changed is (after != THREE_EPOCHS)
    assert store.writes == int(changed)


def test_truncate_from_start_before_the_first_entry_changes_nothing() -> None:
    cache = cache_of((3, 100))
    assert cache.truncate_from_start(50) is False
    assert cache_of().truncate_from_start(50) is False
    assert pairs_of(cache) == [(3, 100)]


@pytest.mark.parametrize("action", ["truncate_from_end", "truncate_from_start"])
def test_truncations_reject_negative_offsets(action: str) -> None:
    with pytest.raises(ValueError, match=r"^orders-0: cannot truncate .*: negative .* -1$"):
        getattr(LeaderEpochCache(InMemoryLeaderEpochStore(), name="orders-0"), action)(-1)


def test_clear_and_flush_empties_and_always_writes() -> None:
    cache, store = cache_and_store((0, 0), (1, 5))
    cache.clear_and_flush()
    assert len(cache) == 0
    assert store.entries == ()
    cache.clear_and_flush()
    assert store.writes == 2


def test_recovery_repairs_a_checkpoint_left_stale_by_a_crash() -> None:
    """docs/design/storage.md#crash-scenarios S8 item 6 and #log-recovery step 7, on the cache: cut
    to the log end, then to the log start."""
    cache = cache_of((0, 0), (1, 40), (2, 90), (3, 120))
    recovered_log_end_offset, log_start_offset_checkpoint = 100, 50
    cache.truncate_from_end(recovered_log_end_offset)
    cache.truncate_from_start(log_start_offset_checkpoint)
    assert pairs_of(cache) == [(1, 50), (2, 90)]


# --- queries -------------------------------------------------------------------------------------


def test_queries_on_an_empty_cache() -> None:
    cache = cache_of()
    assert len(cache) == 0
    assert cache.entries() == ()
    assert cache.latest_epoch is None
    assert cache.previous_epoch is None
    assert cache.latest_entry is None
    assert cache.earliest_entry is None
    assert cache.epoch_for_offset(0) is None


def test_queries_on_a_filled_cache() -> None:
    cache = cache_of((1, 5), (3, 10), (4, 12))
    assert len(cache) == 3
    assert cache.latest_epoch == 4
    assert cache.previous_epoch == 3
    assert cache.latest_entry == EpochEntry(4, 12)
    assert cache.earliest_entry == EpochEntry(1, 5)
    assert [cache.epoch_for_offset(o) for o in (0, 4, 5, 9, 10, 11, 12, 1000)] == [
        None,
        None,
        1,
        1,
        3,
        3,
        4,
        4,
    ]
    assert repr(cache) == "LeaderEpochCache('leader-epoch cache', [1@5, 3@10, 4@12])"


def test_entries_is_a_copy() -> None:
    cache = cache_of((1, 5))
    entries = cache.entries()
    cache.assign(2, 9)
    assert entries == (EpochEntry(1, 5),)


# --- persistence ---------------------------------------------------------------------------------


def test_every_change_is_on_disk_when_it_returns(tmp_path: Path) -> None:
    path = tmp_path / LEADER_EPOCH_CHECKPOINT
    cache = LeaderEpochCache(LeaderEpochCheckpointFile(str(path)), name="orders-0")

    def reopened() -> tuple[EpochEntry, ...]:
        return LeaderEpochCache(LeaderEpochCheckpointFile(str(path))).entries()

    for leader_epoch, start_offset in [(0, 0), (2, 1500), (5, 3200)]:
        cache.assign(leader_epoch, start_offset)
        assert reopened() == cache.entries()
    assert path.read_bytes() == b"0\n3\n0 0\n2 1500\n5 3200\n"

    cache.truncate_from_end(3200)
    assert reopened() == cache.entries() == (EpochEntry(0, 0), EpochEntry(2, 1500))
    cache.truncate_from_start(100)
    assert reopened() == cache.entries() == (EpochEntry(0, 100), EpochEntry(2, 1500))
    cache.clear_and_flush()
    assert reopened() == ()
    assert path.read_bytes() == b"0\n0\n"


def test_a_failed_write_leaves_the_cache_unchanged() -> None:
    class FailingStore(InMemoryLeaderEpochStore):
        def write(self, entries: Sequence[EpochEntry]) -> None:
            raise OSError(28, "No space left on device")

    cache = LeaderEpochCache(FailingStore([EpochEntry(0, 0)]))
    with pytest.raises(OSError, match="No space left"):
        cache.assign(1, 10)
    with pytest.raises(OSError, match="No space left"):
        cache.truncate_from_end(0)
    assert pairs_of(cache) == [(0, 0)]


def test_a_corrupt_checkpoint_raises_from_the_constructor(tmp_path: Path) -> None:
    path = tmp_path / LEADER_EPOCH_CHECKPOINT
    path.write_bytes(b"0\n2\n5 0\n4 10\n")
    with pytest.raises(CorruptCheckpointError, match=f"^{path}: line 4: "):
        LeaderEpochCache(LeaderEpochCheckpointFile(str(path)))


def test_loading_out_of_order_entries_from_another_store_is_a_bug() -> None:
    with pytest.raises(AssertionError, match="out of order"):
        LeaderEpochCache(InMemoryLeaderEpochStore([EpochEntry(2, 0), EpochEntry(1, 5)]))


# --- follower truncation (docs/design/replication.md#follower-truncation) to convergence ----------


@dataclass
class Replica:
    """A partition replica reduced to what truncation needs: the leader epoch of each offset."""

    cache: LeaderEpochCache = field(default_factory=lambda: cache_of())
    log: list[int] = field(default_factory=list)
    high_watermark: int = 0

    @classmethod
    def with_log(cls, leader_epochs: list[int]) -> Replica:
        replica = cls()
        for leader_epoch in leader_epochs:
            replica.append(leader_epoch)
        return replica

    @property
    def log_end_offset(self) -> int:
        return len(self.log)

    def append(self, leader_epoch: int) -> None:
        self.cache.assign(leader_epoch, self.log_end_offset)
        self.log.append(leader_epoch)

    def truncate_to(self, offset: int) -> None:
        del self.log[offset:]
        self.cache.truncate_from_end(offset)


@dataclass(frozen=True)
class Round:
    """One truncation round: the leader's answer, the follower's own view, and the outcome."""

    leader_answer: tuple[int, int]
    follower_answer: tuple[int, int] | None
    target: int
    done: bool


def truncation_round(follower: Replica, leader_answer: tuple[int, int]) -> Round:
    """The follower's side of docs/design/replication.md#follower-truncation for one leader answer
    (E_L, O_L); truncates the follower."""
    leader_epoch, leader_end_offset = leader_answer
    log_end_offset = follower.log_end_offset
    follower_answer: tuple[int, int] | None = None
    if leader_end_offset == UNDEFINED_END_OFFSET:
        target, done = follower.high_watermark, True
    elif leader_epoch == UNDEFINED_LEADER_EPOCH:
        target, done = min(leader_end_offset, log_end_offset), True
    else:
        follower_answer = follower.cache.end_offset_for(leader_epoch, log_end_offset)
        follower_epoch, follower_end_offset = follower_answer
        if follower_end_offset == UNDEFINED_END_OFFSET:
            target, done = min(leader_end_offset, log_end_offset), True
        elif follower_epoch != leader_epoch:
            target, done = min(follower_end_offset, log_end_offset), False
        else:
            target, done = min(leader_end_offset, follower_end_offset, log_end_offset), True
    follower.truncate_to(target)
    return Round(leader_answer, follower_answer, target, done)


def truncate_by_offsets_for_leader_epoch(follower: Replica, leader: Replica) -> list[Round]:
    """Ask the leader about the follower's latest leader epoch until truncation is done."""
    rounds: list[Round] = []
    rounds_max = len(follower.cache) + 1  # one per divergent leader epoch, then the last
    while not rounds or not rounds[-1].done:
        assert len(rounds) < rounds_max, "truncation does not converge"
        requested = follower.cache.latest_epoch
        answer = leader.cache.end_offset_for(
            UNDEFINED_LEADER_EPOCH if requested is None else requested, leader.log_end_offset
        )
        rounds.append(truncation_round(follower, answer))
    return rounds


def fetch_until_caught_up(follower: Replica, leader: Replica) -> list[tuple[int, int]]:
    """Fetch v12+: the leader answers a diverging epoch or data; returns the diverging answers."""
    diverging: list[tuple[int, int]] = []
    diverging_max = len(follower.cache)
    while True:
        fetch_offset, last_fetched_epoch = follower.log_end_offset, follower.cache.latest_epoch
        if last_fetched_epoch is not None:
            answer = leader.cache.end_offset_for(last_fetched_epoch, leader.log_end_offset)
            assert UNDEFINED_END_OFFSET not in answer, "the leader answers OFFSET_OUT_OF_RANGE"
            if answer.leader_epoch < last_fetched_epoch or answer.end_offset < fetch_offset:
                assert len(diverging) < diverging_max, "fetching does not converge"
                diverging.append(answer)
                truncation_round(follower, answer)
                continue
        if fetch_offset == leader.log_end_offset:
            return diverging
        follower.append(leader.log[fetch_offset])


def assert_identical(follower: Replica, leader: Replica) -> None:
    assert follower.log == leader.log
    assert follower.cache.entries() == leader.cache.entries()


def test_iterative_truncation_worked_example() -> None:
    """docs/design/replication.md#iterative-truncation-example: one round per divergent
    leader epoch, then the logs are identical."""
    follower = Replica.with_log([0, 2, 4])
    leader = Replica.with_log([1, 3, 5])
    assert pairs_of(follower.cache) == [(0, 0), (2, 1), (4, 2)]
    assert pairs_of(leader.cache) == [(1, 0), (3, 1), (5, 2)]

    rounds = truncate_by_offsets_for_leader_epoch(follower, leader)

    assert rounds == [
        Round(leader_answer=(3, 2), follower_answer=(2, 2), target=2, done=False),
        Round(leader_answer=(1, 1), follower_answer=(0, 1), target=1, done=False),
        Round(leader_answer=(0, 0), follower_answer=(0, 1), target=0, done=True),
    ]
    assert follower.log == []
    assert fetch_until_caught_up(follower, leader) == []
    assert_identical(follower, leader)


def test_diverging_epoch_worked_example() -> None:
    """docs/design/replication.md#iterative-truncation-example, Fetch v12+: the leader
    answers DivergingEpoch(2, 2), then data."""
    follower = Replica.with_log([0, 2, 4])
    leader = Replica.with_log([0, 2, 5])

    assert fetch_until_caught_up(follower, leader) == [(2, 2)]
    assert_identical(follower, leader)


def test_follower_without_leader_epochs_truncates_to_its_high_watermark() -> None:
    follower = Replica(log=[-1, -1, -1], high_watermark=2)  # pre-v2 batches carry no epochs
    leader = Replica.with_log([0, 0, 0, 0])
    rounds = truncate_by_offsets_for_leader_epoch(follower, leader)
    assert rounds == [Round(UNDEFINED, None, target=2, done=True)]


# --- Properties ----------------------------------------------------------------------------------


@st.composite
def caches_and_log_end(draw: st.DrawFn) -> tuple[list[tuple[int, int]], int]:
    """Strictly increasing (leader_epoch, start_offset) pairs and a log end offset past them."""
    leader_epochs = sorted(draw(st.sets(st.integers(0, 30), max_size=8)))
    starts = sorted(
        draw(st.sets(st.integers(0, 60), min_size=len(leader_epochs), max_size=len(leader_epochs)))
    )
    log_end_offset = (starts[-1] if starts else 0) + draw(st.integers(0, 10))
    return list(zip(leader_epochs, starts, strict=True)), log_end_offset


def naive_end_offset_for(
    pairs: list[tuple[int, int]], requested: int, log_end_offset: int
) -> tuple[int, int]:
    """docs/design/replication.md#end-offset-for-an-epoch in words: the largest known leader epoch
    <= requested and where it ends in the log.

    Where it ends is found by walking the log offset by offset, not from the next entry.
    """
    known = [leader_epoch for leader_epoch, _ in pairs]
    if requested == UNDEFINED_LEADER_EPOCH or not known:
        return UNDEFINED
    if requested == known[-1]:
        return (requested, log_end_offset)
    if requested > known[-1]:
        return UNDEFINED
    first_start = pairs[0][1]
    if requested < known[0]:
        return (requested, first_start)
    floor = max(e for e in known if e <= requested)

    def leader_epoch_at(offset: int) -> int:
        return max(e for e, start in pairs if start <= offset)

    later = (o for o in range(first_start, log_end_offset) if leader_epoch_at(o) > floor)
    return (floor, next(later, log_end_offset))


@given(caches_and_log_end(), st.integers(-1, 32))
def test_end_offset_for_matches_a_naive_model(
    cache_and_end: tuple[list[tuple[int, int]], int], requested: int
) -> None:
    pairs, log_end_offset = cache_and_end
    assert cache_of(*pairs).end_offset_for(requested, log_end_offset) == naive_end_offset_for(
        pairs, requested, log_end_offset
    )


@given(caches_and_log_end(), st.integers(0, 70))
def test_epoch_for_offset_matches_a_naive_model(
    cache_and_end: tuple[list[tuple[int, int]], int], offset: int
) -> None:
    pairs, _ = cache_and_end
    covering = [leader_epoch for leader_epoch, start in pairs if start <= offset]
    assert cache_of(*pairs).epoch_for_offset(offset) == (covering[-1] if covering else None)


leader_epochs = st.integers(0, 12)
offsets = st.integers(0, 60)


class LeaderEpochCacheMachine(RuleBasedStateMachine):
    """Random assigns and truncations keep the invariant, and the store always equals memory."""

    def __init__(self) -> None:
        super().__init__()
        self.store = InMemoryLeaderEpochStore()
        self.cache = LeaderEpochCache(self.store)

    @rule(leader_epoch=leader_epochs, start_offset=offsets)
    def assign(self, leader_epoch: int, start_offset: int) -> None:
        before = self.cache.entries()
        changed = self.cache.assign(leader_epoch, start_offset)
        after = self.cache.entries()
        latest = before[-1] if before else None
        no_op = (
            latest is not None
            and latest.leader_epoch == leader_epoch
            and latest.start_offset <= start_offset
        )
        assert changed is not no_op
        if changed:
            # The new entry is last, after an untouched prefix of the old entries.
            assert after[-1] == EpochEntry(leader_epoch, start_offset)
            assert after[:-1] == before[: len(after) - 1]
        else:
            assert after == before

    @rule(end_offset=offsets)
    def truncate_from_end(self, end_offset: int) -> None:
        before = self.cache.entries()
        self.cache.truncate_from_end(end_offset)
        assert all(e.start_offset < end_offset for e in self.cache.entries())
        # Offsets below the cut keep the leader epoch they had.
        for offset in range(end_offset):
            assert self.cache.epoch_for_offset(offset) == cache_of_entries(before).epoch_for_offset(
                offset
            )

    @rule(start_offset=offsets)
    def truncate_from_start(self, start_offset: int) -> None:
        before = cache_of_entries(self.cache.entries())
        self.cache.truncate_from_start(start_offset)
        earliest = self.cache.earliest_entry
        if before.epoch_for_offset(start_offset) is not None:
            assert earliest is not None and earliest.start_offset == start_offset
        # Offsets from the new start on keep the leader epoch they had.
        for offset in range(start_offset, start_offset + 20):
            assert self.cache.epoch_for_offset(offset) == before.epoch_for_offset(offset)

    @rule()
    def clear_and_flush(self) -> None:
        self.cache.clear_and_flush()
        assert len(self.cache) == 0

    @invariant()
    def strictly_increasing_and_durable(self) -> None:
        entries = self.cache.entries()
        assert is_strictly_increasing(entries)
        assert tuple(self.store.entries) == entries
        assert LeaderEpochCache(self.store).entries() == entries


TestLeaderEpochCacheMachine = LeaderEpochCacheMachine.TestCase
