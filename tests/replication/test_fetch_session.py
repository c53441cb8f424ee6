"""Incremental fetch sessions (`replication.fetch_session`, KIP-227): the follower sends what
changed, the leader rebuilds the whole request and answers only what has news. Scenarios for
each rule, and a property: over any sequence of rounds the leader sees exactly the partitions
the follower wants, and the follower, reading missing partitions as "nothing new", always
knows every partition's latest high watermark and log start offset."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replog.errors import (
    InvalidFetchSessionEpochError,
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
)
from replog.replication.fetch_session import (
    FULL_FETCH_EPOCH,
    FetchChanges,
    FetcherSession,
    LeaderFetchSession,
    next_session_epoch,
)
from replog.replication.messages import (
    NO_SESSION,
    EpochEndOffsetResult,
    FetchPartition,
    FetchPartitionResult,
    FetchRequest,
    FetchResponse,
)


def entry(partition: int, offset: int = 0, topic: str = "t") -> FetchPartition:
    return FetchPartition(topic, partition, fetch_offset=offset, current_leader_epoch=1)


def wanting(*entries: FetchPartition) -> FetchRequest:
    return FetchRequest(entries, replica_id=2, replica_epoch=7)


def result(partition: int, hw: int = 0, **fields: object) -> FetchPartitionResult:
    return FetchPartitionResult(  # type: ignore[arg-type]
        "t", partition, high_watermark=hw, last_stable_offset=hw, log_start_offset=0, **fields
    )


def keys(request: FetchRequest) -> list[int]:
    return [e.partition for e in request.partitions]


# --- the follower's side -------------------------------------------------------------------


def test_the_follower_sends_everything_first_then_only_changes_and_drops() -> None:
    follower = FetcherSession()
    first = follower.to_send(wanting(entry(0), entry(1), entry(2)))
    assert first.session_epoch == FULL_FETCH_EPOCH and keys(first) == [0, 1, 2]
    assert first.replica_id == 2 and first.replica_epoch == 7  # the rest travels as it is
    same = follower.to_send(wanting(entry(0), entry(1), entry(2)))
    assert (same.session_epoch, same.partitions, same.forgotten) == (1, (), ())
    moved = follower.to_send(wanting(entry(0), entry(1, offset=5), entry(2)))
    assert (moved.session_epoch, keys(moved), moved.forgotten) == (2, [1], ())
    # Partition 2 backs off (left out), partition 3 is new.
    dropped = follower.to_send(wanting(entry(0), entry(1, offset=5), entry(3)))
    assert (keys(dropped), dropped.forgotten) == ([3], (("t", 2),))
    back = follower.to_send(wanting(entry(0), entry(1, offset=5), entry(2), entry(3)))
    assert (keys(back), back.forgotten) == ([2], ())
    # Any field counts: a new leader epoch is a change.
    bumped = follower.to_send(
        wanting(replace(entry(0), current_leader_epoch=2), entry(1, 5), entry(2), entry(3))
    )
    assert keys(bumped) == [0]


def test_told_what_changed_the_follower_compares_only_that() -> None:
    follower = FetcherSession()
    first = wanting(entry(0), entry(1), entry(2))
    follower.to_send(first)
    # Partition 1 moved and 2 left; 0 changed as well, but the hint does not say so: only the
    # entries named are compared (this is what makes a round cost what changed).
    second = wanting(entry(0, offset=9), entry(1, offset=4))
    told = FetchChanges(first, {("t", 1): entry(1, offset=4), ("t", 2): None})
    sent = follower.to_send(second, (("t", 3),), told)
    assert (keys(sent), sent.forgotten, sent.session_epoch) == ([1], (("t", 2),), 1)
    # A hint relative to another request than the one last sent is not taken.
    stale = FetchChanges(first, {})
    third = wanting(entry(0, offset=9), entry(1, offset=4), entry(5))
    assert keys(follower.to_send(third, (), stale)) == [0, 5]
    # Named partitions to answer again go out unchanged.
    fourth = wanting(entry(0, offset=9), entry(1, offset=4), entry(5))
    again = follower.to_send(fourth, (("t", 1),), FetchChanges(third, {}))
    assert keys(again) == [1]


def test_a_reset_follower_session_starts_again_with_a_full_fetch() -> None:
    follower = FetcherSession()
    follower.to_send(wanting(entry(0), entry(1)))
    follower.to_send(wanting(entry(0)))
    follower.reset()
    again = follower.to_send(wanting(entry(0), entry(1)))
    assert (again.session_epoch, keys(again), again.forgotten) == (0, [0, 1], ())


def test_a_bounded_follower_adds_partitions_a_batch_a_request_oldest_first() -> None:
    follower = FetcherSession(adds_per_request=2)
    five = replace(wanting(*(entry(p) for p in range(5))), max_wait_ms=500)
    first = follower.to_send(five)
    # Two join; three wait, and while any waits the leader is asked to answer at once.
    assert (keys(first), first.session_epoch, first.max_wait_ms) == ([0, 1], 0, 0)
    assert follower.waiting == 3 and follower.holds(("t", 1)) and not follower.holds(("t", 2))
    # Partition 3 moved while it waited and 4 stopped being wanted; 5 is new and queues
    # behind the older ones; 0 changed and goes at once (a change is not an addition).
    second_intent = replace(
        wanting(entry(0, offset=1), entry(1), entry(2), entry(3, offset=8), entry(5)),
        max_wait_ms=500,
    )
    told = FetchChanges(
        five,
        {
            ("t", 0): entry(0, offset=1),
            ("t", 3): entry(3, offset=8),
            ("t", 4): None,
            ("t", 5): entry(5),
        },
    )
    second = follower.to_send(second_intent, (), told)
    assert [(e.partition, e.fetch_offset) for e in second.partitions] == [(0, 1), (2, 0), (3, 8)]
    assert (second.forgotten, second.max_wait_ms, follower.waiting) == ((), 0, 1)
    third = follower.to_send(second_intent, (), FetchChanges(second_intent, {}))
    assert (keys(third), third.max_wait_ms, follower.waiting) == ([5], 500, 0)
    # Without a hint the same bound holds.
    unhinted = FetcherSession(adds_per_request=2)
    unhinted.to_send(wanting(entry(0)))
    grown = unhinted.to_send(wanting(*(entry(p) for p in range(4))))
    assert (keys(grown), grown.max_wait_ms, unhinted.waiting) == ([1, 2], 0, 1)
    assert keys(unhinted.to_send(wanting(*(entry(p) for p in range(4))))) == [3]


def test_session_epochs_count_up_and_wrap_past_zero() -> None:
    assert next_session_epoch(0) == 1
    assert next_session_epoch(41) == 42
    assert next_session_epoch(2**31 - 1) == 1  # 0 would open a new session


# --- the leader's side ---------------------------------------------------------------------


def test_the_leader_rebuilds_the_whole_request_from_the_changes() -> None:
    leader = LeaderFetchSession()
    full = leader.full_request(replace(wanting(entry(0), entry(1), entry(2)), session_epoch=0))
    assert keys(full) == [0, 1, 2] and len(leader) == 3
    step = replace(wanting(entry(1, offset=9), entry(5)), session_epoch=1, forgotten=(("t", 0),))
    rebuilt = leader.full_request(step)
    # A changed entry keeps its place; a new one joins the end; a forgotten one is gone.
    assert [(e.partition, e.fetch_offset) for e in rebuilt.partitions] == [(1, 9), (2, 0), (5, 0)]
    assert rebuilt.session_epoch == 1 and rebuilt.forgotten == ()
    quiet = leader.full_request(replace(wanting(), session_epoch=2))
    assert keys(quiet) == [1, 2, 5]


@pytest.mark.parametrize(
    ("epochs", "refused", "expects"),
    [
        ((1,), 1, 0),  # a new call must open with a full fetch
        ((0, 2), 2, 1),  # one skipped
        ((0, 1, 1), 1, 2),  # one repeated
    ],
)
def test_an_epoch_out_of_turn_is_refused_naming_both(
    epochs: tuple[int, ...], refused: int, expects: int
) -> None:
    leader = LeaderFetchSession()
    *accepted, last = epochs
    for epoch in accepted:
        leader.full_request(replace(wanting(entry(0)), session_epoch=epoch))
    with pytest.raises(InvalidFetchSessionEpochError) as raised:
        leader.full_request(replace(wanting(entry(0)), session_epoch=last))
    assert f"fetch session epoch {refused} on this ReplicaFetch call, which expects {expects}" in (
        str(raised.value)
    )


def test_a_full_fetch_mid_session_starts_the_session_afresh() -> None:
    leader = LeaderFetchSession()
    leader.full_request(replace(wanting(entry(0), entry(1)), session_epoch=0))
    leader.full_request(replace(wanting(entry(2)), session_epoch=1))
    again = leader.full_request(replace(wanting(entry(7)), session_epoch=0))
    assert keys(again) == [7]


def test_the_leader_answers_only_partitions_with_news_after_the_full_fetch() -> None:
    leader = LeaderFetchSession()
    first = replace(wanting(entry(0), entry(1), entry(2), entry(3)), session_epoch=0)
    leader.full_request(first)
    quiet = [result(p) for p in range(4)]
    assert len(leader.answer(first, FetchResponse(tuple(quiet))).partitions) == 4  # full: all
    second = replace(wanting(), session_epoch=1)
    leader.full_request(second)
    answered = leader.answer(second, FetchResponse(tuple(quiet)))
    assert answered.partitions == ()  # nothing new anywhere
    third = replace(wanting(), session_epoch=2)
    leader.full_request(third)
    news = FetchResponse(
        (
            result(0, records=b"batch"),
            result(1, hw=4),  # the high watermark moved
            result(2, error=NotLeaderOrFollowerError("t-2: not the leader")),
            result(3, diverging_epoch=EpochEndOffsetResult(1, 0)),
        )
    )
    assert [r.partition for r in leader.answer(third, news).partitions] == [0, 1, 2, 3]
    fourth = replace(wanting(), session_epoch=3)
    leader.full_request(fourth)
    again = FetchResponse((result(0), result(1, hw=4), replace(result(2), log_start_offset=3)))
    assert [r.partition for r in leader.answer(fourth, again).partitions] == [2]


class _InFile:
    """Records a leader left in its segment file (`FetchPartitionResult.region`)."""

    def __len__(self) -> int:
        return 100

    def close(self) -> None:
        pass


def test_records_left_in_the_leaders_file_are_news_as_records_are() -> None:
    leader = LeaderFetchSession()
    first = replace(wanting(entry(0), entry(1)), session_epoch=0)
    leader.full_request(first)
    leader.answer(first, FetchResponse((result(0), result(1))))
    second = replace(wanting(), session_epoch=1)
    leader.full_request(second)
    in_file = result(0, region=_InFile())
    assert in_file.records == b"" and in_file.records_size == 100
    assert leader.answer(second, FetchResponse((in_file, result(1)))).partitions == (in_file,)


def test_after_an_error_the_first_clean_answer_carries_the_high_watermark_again() -> None:
    # A fetcher does not take an error answer's high watermark for the partition's (a consumer
    # resetting after OFFSET_OUT_OF_RANGE), so it must come again once the error is gone.
    leader = LeaderFetchSession()
    first = replace(wanting(entry(0), entry(1)), session_epoch=0)
    leader.full_request(first)
    leader.answer(first, FetchResponse((result(0), result(1))))
    second = replace(wanting(), session_epoch=1)
    leader.full_request(second)
    failed = result(1, hw=5, error=OffsetOutOfRangeError("t-1: offset 9 out of range"))
    assert leader.answer(second, FetchResponse((result(0), failed))).partitions == (failed,)
    third = replace(wanting(), session_epoch=2)
    leader.full_request(third)
    clean = result(1, hw=5)
    assert leader.answer(third, FetchResponse((result(0), clean))).partitions == (clean,)
    fourth = replace(wanting(), session_epoch=3)
    leader.full_request(fourth)
    assert leader.answer(fourth, FetchResponse((result(0), clean))).partitions == ()


def test_an_entry_the_fetcher_sends_is_answered_in_full_news_or_not() -> None:
    # A consumer that re-assigned a partition knows nothing of it, though the leader's
    # session may hold the very same entry; sending the entry asks for it in full.
    fetcher, leader = FetcherSession(), LeaderFetchSession()
    first = fetcher.to_send(wanting(entry(0), entry(1)))
    leader.full_request(first)
    leader.answer(first, FetchResponse((result(0, hw=3), result(1, hw=3))))
    quiet = fetcher.to_send(wanting(entry(0), entry(1)))
    leader.full_request(quiet)
    assert leader.answer(quiet, FetchResponse((result(0, hw=3), result(1, hw=3)))).partitions == ()
    again = fetcher.to_send(wanting(entry(0), entry(1)), resend={("t", 1)})
    assert keys(again) == [1] and again.session_epoch == 2
    leader.full_request(again)
    answered = leader.answer(again, FetchResponse((result(0, hw=3), result(1, hw=3))))
    assert [r.partition for r in answered.partitions] == [1]


def test_partitions_that_got_records_move_to_the_end_of_the_session_order() -> None:
    leader = LeaderFetchSession()
    first = replace(wanting(entry(0), entry(1), entry(2)), session_epoch=0)
    leader.full_request(first)
    leader.answer(first, FetchResponse((result(0, records=b"x"), result(1), result(2))))
    rotated = leader.full_request(replace(wanting(), session_epoch=1))
    assert keys(rotated) == [1, 2, 0]


def test_a_dirty_only_round_reads_what_has_news_in_session_order() -> None:
    leader = LeaderFetchSession()
    first = replace(wanting(entry(0), entry(1), entry(2), entry(3)), session_epoch=0)
    assert keys(leader.round_request(first)) == [0, 1, 2, 3]  # all new: all dirty
    for p in (0, 1, 2, 3):
        leader.park(("t", p))
    assert keys(leader.round_request(replace(wanting(), session_epoch=1))) == []
    leader.mark(("t", 3))
    leader.mark(("t", 9))  # not in the session: nothing
    leader.mark(("t", 1))
    carried = replace(wanting(entry(2, offset=4)), session_epoch=2)
    assert keys(leader.round_request(carried)) == [1, 2, 3]
    leader.answer(carried, FetchResponse((result(1, records=b"x"), result(2), result(3))))
    assert keys(leader.round_request(replace(wanting(), session_epoch=3))) == [2, 3, 1]
    leader.mark_all()
    gone = replace(wanting(), session_epoch=4, forgotten=(("t", 0),))
    assert keys(leader.round_request(gone)) == [2, 3, 1]
    assert leader.take_left() == [("t", 0)] and leader.take_left() == []


def test_a_waiting_round_hears_of_each_news() -> None:
    leader = LeaderFetchSession()
    leader.round_request(replace(wanting(entry(0), entry(1)), session_epoch=0))
    heard: list[object] = []
    leader.waiter = heard.append
    leader.mark(("t", 1))
    leader.mark(("t", 7))
    leader.mark_all()  # no answer changes with it: nobody is woken
    assert heard == [("t", 1)]


def test_a_sessionless_request_is_not_a_session_request() -> None:
    assert wanting(entry(0)).session_epoch == NO_SESSION
    assert FetcherSession().to_send(wanting(entry(0))).session_epoch == 0


# --- the property ----------------------------------------------------------------------------

PARTITIONS = range(6)
round_step = st.tuples(
    st.sets(st.sampled_from(PARTITIONS)),  # the partitions the follower fetches this round
    st.dictionaries(st.sampled_from(PARTITIONS), st.integers(0, 3)),  # fetch offsets moved by
    st.dictionaries(st.sampled_from(PARTITIONS), st.integers(0, 3)),  # leader HW moved by
    st.sets(st.sampled_from(PARTITIONS)),  # partitions answered with records
    st.booleans(),  # the call ends after this round
)


@settings(max_examples=200, deadline=None)
@given(rounds=st.lists(round_step, min_size=1, max_size=30))
def test_both_sides_agree_over_any_rounds(
    rounds: list[tuple[set[int], dict[int, int], dict[int, int], set[int], bool]],
) -> None:
    follower = FetcherSession()
    leader = LeaderFetchSession()
    offsets = dict.fromkeys(PARTITIONS, 0)
    leader_hw = dict.fromkeys(PARTITIONS, 0)
    known_hw: dict[int, int] = {}  # what the follower learned, per partition
    for wanted, moved, hw_moved, with_records, call_ends in rounds:
        for p, by in moved.items():
            offsets[p] += by
        for p, by in hw_moved.items():
            leader_hw[p] += by
        intent = wanting(*(entry(p, offsets[p]) for p in sorted(wanted)))
        sent = follower.to_send(intent)
        seen = leader.full_request(sent)
        # The leader's view is exactly the follower's intent (order aside: it rotates).
        assert sorted(seen.partitions, key=lambda e: e.partition) == list(intent.partitions)
        response = FetchResponse(
            tuple(
                result(
                    e.partition,
                    leader_hw[e.partition],
                    records=b"r" * (e.partition in with_records),
                )
                for e in seen.partitions
            )
        )
        answered = leader.answer(sent, response)
        assert {r.partition for r in answered.partitions} <= wanted
        if sent.session_epoch == FULL_FETCH_EPOCH:
            known_hw = {}
        for r in answered.partitions:
            known_hw[r.partition] = r.high_watermark
        # Missing means "nothing new": the follower knows every fetched partition's HW.
        for p in wanted:
            assert known_hw.get(p) == leader_hw[p], (p, known_hw, leader_hw)
        if call_ends:
            follower.reset()
            leader = LeaderFetchSession()


def _hint(previous: FetchRequest | None, intent: FetchRequest) -> FetchChanges | None:
    """What a follower's plans would tell the session changed from `previous` to `intent`."""
    if previous is None:
        return None
    before = {("t", e.partition): e for e in previous.partitions}
    now = {("t", e.partition): e for e in intent.partitions}
    changed: dict[Any, FetchPartition | None] = {k: e for k, e in now.items() if before.get(k) != e}
    changed.update({k: None for k in before if k not in now})
    return FetchChanges(previous, changed)


@settings(max_examples=300, deadline=None)
@given(
    rounds=st.lists(
        st.tuples(
            st.sets(st.integers(0, 9)),
            st.dictionaries(st.integers(0, 9), st.integers(1, 3), max_size=4),
            st.booleans(),
            st.booleans(),
        ),
        min_size=1,
        max_size=25,
    ),
    bound=st.integers(1, 4),
)
def test_a_bounded_follower_session_is_what_the_leader_holds(
    rounds: list[tuple[set[int], dict[int, int], bool, bool]], bound: int
) -> None:
    """Whatever the fetcher wants, hinted or not: no request adds more than `bound`
    partitions, the leader holds exactly the partitions the fetcher says it holds, with the
    entries the fetcher wants now, the rest wait (and the request asks for an answer at once),
    and repeating a request lets every waiting partition join within ceil(waiting / bound)."""
    follower = FetcherSession(adds_per_request=bound)
    leader = LeaderFetchSession()
    offsets = dict.fromkeys(range(10), 0)
    previous: FetchRequest | None = None

    def send(intent: FetchRequest, changes: FetchChanges | None) -> FetchRequest:
        held = {k for k in (("t", p) for p in range(10)) if follower.holds(k)}
        sent = follower.to_send(intent, (), changes)
        added = [e for e in sent.partitions if ("t", e.partition) not in held]
        assert len(added) <= bound
        seen = leader.full_request(sent)
        wanted = {("t", e.partition): e for e in intent.partitions}
        holding = {k: e for k, e in wanted.items() if follower.holds(k)}
        assert {("t", e.partition): e for e in seen.partitions} == holding
        assert follower.waiting == len(wanted) - len(holding)
        assert sent.max_wait_ms == (0 if follower.waiting else intent.max_wait_ms)
        return sent

    for wanted, moved, hinted, call_ends in rounds:
        for p, by in moved.items():
            offsets[p] += by
        intent = replace(wanting(*(entry(p, offsets[p]) for p in sorted(wanted))), max_wait_ms=9)
        send(intent, _hint(previous, intent) if hinted else None)
        previous = intent
        if call_ends:
            follower.reset()
            leader = LeaderFetchSession()
            previous = None
    if previous is not None:
        for _ in range(-(-follower.waiting // bound)):
            send(previous, FetchChanges(previous, {}))
        assert follower.waiting == 0


def test_a_bounded_follower_sends_changes_a_batch_a_request_oldest_first() -> None:
    follower = FetcherSession(changes_per_request=2)
    five = replace(wanting(*(entry(p, offset=5) for p in range(5))), max_wait_ms=500)
    follower.to_send(five)
    # A leader-epoch bump of every partition: two changes go, three wait (the leader keeps
    # their old entries), and the leader is asked to answer at once.
    bumped = replace(
        wanting(*(replace(entry(p, 5), current_leader_epoch=2) for p in range(5))), max_wait_ms=500
    )
    told = FetchChanges(five, {("t", e.partition): e for e in bumped.partitions})
    first = follower.to_send(bumped, (), told)
    assert (keys(first), first.max_wait_ms, follower.changes_waiting) == ([0, 1], 0, 3)
    # An answer read at an old entry is not read; one at a sent entry is.
    answer = FetchResponse(tuple(result(p, hw=4) for p in (1, 2, 4)))
    assert [r.partition for r in follower.read_answer(answer).partitions] == [1]
    # 2 moves on while it waits (its newest entry keeps its place), 3 goes back to the entry
    # the leader holds (nothing to send), 4 truncates (a lower fetch offset never waits:
    # the leader must not record progress the log no longer has) and goes first.
    second_intent = replace(
        wanting(
            *bumped.partitions[:2],
            replace(entry(2, offset=6), current_leader_epoch=2),
            entry(3, offset=5),
            replace(entry(4, offset=3), current_leader_epoch=2, last_fetched_epoch=1),
        ),
        max_wait_ms=500,
    )
    told = FetchChanges(
        bumped,
        {
            ("t", 2): second_intent.partitions[2],
            ("t", 3): entry(3, offset=5),
            ("t", 4): second_intent.partitions[4],
        },
    )
    second = follower.to_send(second_intent, (), told)
    assert [(e.partition, e.fetch_offset) for e in second.partitions] == [(4, 3), (2, 6)]
    assert (second.max_wait_ms, follower.changes_waiting) == (500, 0)
    # Without a hint the same bound holds, oldest first.
    unhinted = FetcherSession(changes_per_request=2)
    unhinted.to_send(wanting(*(entry(p) for p in range(4))))
    moved = wanting(*(entry(p, offset=3) for p in range(4)))
    assert (keys(unhinted.to_send(moved)), unhinted.changes_waiting) == ([0, 1], 2)
    again = wanting(*(entry(p, offset=3 + (p == 0)) for p in range(4)))
    assert (keys(unhinted.to_send(again)), unhinted.changes_waiting) == ([2, 3], 1)
    assert (keys(unhinted.to_send(again)), unhinted.changes_waiting) == ([0], 0)


@settings(max_examples=300, deadline=None)
@given(
    rounds=st.lists(
        st.tuples(
            st.sets(st.integers(0, 9)),
            st.dictionaries(st.integers(0, 9), st.integers(-3, 3), max_size=6),
            st.sets(st.integers(0, 9), max_size=10),
            st.booleans(),
            st.booleans(),
        ),
        min_size=1,
        max_size=25,
    ),
    adds=st.integers(1, 4),
    changes=st.integers(1, 4),
)
def test_a_follower_bounding_changes_never_lets_the_leader_hold_an_entry_ahead(
    rounds: list[tuple[set[int], dict[int, int], set[int], bool, bool]],
    adds: int,
    changes: int,
) -> None:
    """Whatever the fetcher wants, hinted or not, its offsets moving either way and its leader
    epochs bumped: a request carries at most `changes` changed entries beside those that lower
    a fetch offset; the leader holds, for each partition the fetcher says it holds, the entry
    wanted now or one the fetcher sent before, never at a higher fetch offset; the fetcher
    reads an answer only for the partitions the leader holds at the wanted entry; and
    repeating a request sends every waiting change within ceil(waiting / changes)."""
    follower = FetcherSession(adds_per_request=adds, changes_per_request=changes)
    leader = LeaderFetchSession()
    offsets = dict.fromkeys(range(10), 5)
    epochs = dict.fromkeys(range(10), 1)
    ever_sent: dict[int, list[FetchPartition]] = {p: [] for p in range(10)}
    previous: FetchRequest | None = None

    def send(intent: FetchRequest, told: FetchChanges | None) -> None:
        before = {("t", p): e for p in range(10) if (e := leader_entry(p)) is not None}
        sent = follower.to_send(intent, (), told)
        for e in sent.partitions:
            ever_sent[e.partition].append(e)
        carried = [e for e in sent.partitions if ("t", e.partition) in before]
        lowering = [e for e in carried if e.fetch_offset < before[("t", e.partition)].fetch_offset]
        assert len(carried) <= max(changes, len(lowering))
        seen = {("t", e.partition): e for e in leader.full_request(sent).partitions}
        wanted = {("t", e.partition): e for e in intent.partitions}
        assert seen.keys() == {k for k in wanted if follower.holds(k)}
        stale = {k for k, e in seen.items() if e != wanted[k]}
        for k in stale:
            assert seen[k] in ever_sent[k[1]] and seen[k].fetch_offset <= wanted[k].fetch_offset
        assert follower.changes_waiting == len(stale)
        waits = follower.waiting or follower.changes_waiting
        assert sent.max_wait_ms == (0 if waits else intent.max_wait_ms)
        answer = FetchResponse(tuple(result(k[1]) for k in seen))
        assert {r.partition for r in follower.read_answer(answer).partitions} == {
            k[1] for k in seen if k not in stale
        }
        held_now.clear()
        held_now.update(seen)

    held_now: dict[Any, FetchPartition] = {}

    def leader_entry(p: int) -> FetchPartition | None:
        return held_now.get(("t", p))

    for wanted, moved, bumped, hinted, call_ends in rounds:
        for p, by in moved.items():
            offsets[p] = max(0, offsets[p] + by)
        for p in bumped:
            epochs[p] += 1
        intent = replace(
            wanting(
                *(
                    replace(entry(p, offsets[p]), current_leader_epoch=epochs[p])
                    for p in sorted(wanted)
                )
            ),
            max_wait_ms=9,
        )
        send(intent, _hint(previous, intent) if hinted else None)
        previous = intent
        if call_ends:
            follower.reset()
            leader = LeaderFetchSession()
            held_now.clear()
            previous = None
    if previous is not None:
        for _ in range(max(-(-follower.changes_waiting // changes), -(-follower.waiting // adds))):
            send(previous, FetchChanges(previous, {}))
        assert (follower.changes_waiting, follower.waiting) == (0, 0)


# --- bounded rounds against the rule itself ---------------------------------------------------


_session_op = st.one_of(
    st.tuples(st.just("request"), st.sets(st.integers(0, 11)), st.sets(st.integers(0, 11))),
    st.tuples(st.just("full"), st.sets(st.integers(0, 11))),
    st.tuples(st.just("mark"), st.integers(0, 13)),
    st.tuples(st.just("mark_all")),
    st.tuples(st.just("park"), st.integers(0, 11)),
    st.tuples(st.just("records"), st.sets(st.integers(0, 11))),
    st.tuples(st.just("round")),
)


@settings(max_examples=300, deadline=None)
@given(ops=st.lists(_session_op, max_size=60), bound=st.integers(1, 5))
def test_bounded_rounds_take_the_next_dirty_partitions_round_robin(
    ops: list[tuple[Any, ...]], bound: int
) -> None:
    """Whatever the requests, marks, parks and rotations, a round reads the dirty partitions
    (all of them, in session order, up to the bound; else the next `bound` in session order
    after the last one read, wrapping around) and defers the rest."""
    leader = LeaderFetchSession(round_partitions=bound)
    epoch = 0
    order: list[int] = []  # the model: the session's order,
    place: dict[int, int] = {}  # each partition's place, rising along it,
    dirty: set[int] = set()
    cursor = -1  # and the place of the last partition a bounded round read
    next_place = 0

    def add(p: int) -> None:
        nonlocal next_place
        if p not in place:
            order.append(p)
            place[p] = next_place
            next_place += 1
        dirty.add(p)

    def send(request: FetchRequest) -> list[int]:
        nonlocal epoch, cursor
        read = keys(leader.round_request(request))
        epoch = next_session_epoch(epoch)
        ranked = sorted(dirty, key=place.__getitem__)
        if len(ranked) <= bound:
            expected = ranked
        else:
            after = [p for p in ranked if place[p] > cursor]
            taken = (after + [p for p in ranked if place[p] <= cursor])[:bound]
            cursor = place[taken[-1]]
            expected = sorted(taken, key=place.__getitem__)
        assert read == expected
        assert leader.deferred == max(0, len(dirty) - bound)
        assert leader.dirty_count == len(dirty)
        return read

    send(replace(wanting(), session_epoch=0))
    for op in ops:
        kind = op[0]
        if kind == "full":
            order.clear(), place.clear(), dirty.clear()
            for p in sorted(op[1]):
                add(p)
            epoch = 0
            send(replace(wanting(*(entry(p) for p in sorted(op[1]))), session_epoch=0))
        elif kind == "request":
            forgotten = tuple(("t", p) for p in sorted(op[2]) if p not in op[1])
            for _, p in forgotten:
                if p in place:
                    order.remove(p)
                    del place[p]
                dirty.discard(p)
            for p in sorted(op[1]):
                add(p)
            carried = wanting(*(entry(p) for p in sorted(op[1])))
            send(replace(carried, session_epoch=epoch, forgotten=forgotten))
        elif kind == "mark":
            leader.mark(("t", op[1]))
            if op[1] in place:
                dirty.add(op[1])
        elif kind == "mark_all":
            leader.mark_all()
            dirty.update(place)
        elif kind == "park":
            leader.park(("t", op[1]))
            dirty.discard(op[1])
        elif kind == "records":
            request = replace(wanting(), session_epoch=epoch)
            read = send(request)
            leader.answer(request, FetchResponse(tuple(
                result(p, records=b"x" if p in op[1] else b"") for p in read
            )))  # fmt: skip
            for p in read:
                if p in op[1]:
                    order.remove(p)
                    order.append(p)
                    place[p] = next_place
                    next_place += 1
        else:
            send(replace(wanting(), session_epoch=epoch))
