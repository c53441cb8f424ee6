"""Kafka's broker-wide fetch session cache (`replication.fetch_session_cache`, KIP-227): session
ids and epochs on the wire, the refusals (FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH,
FETCH_SESSION_TOPIC_ID_ERROR), closing, and Kafka's eviction rules, with properties over any
sequence of session creations: the cache never holds more than its slots, ids are distinct
positive int32s, and a session is evicted only when Kafka's rules allow it."""

from __future__ import annotations

import random
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replog.errors import (
    FetchSessionIdNotFoundError,
    FetchSessionTopicIdError,
    InvalidFetchSessionEpochError,
)
from replog.replication.fetch_session import LeaderFetchSession
from replog.replication.fetch_session_cache import (
    NO_SESSION_ID,
    SESSION_ID_MAX,
    FetchContext,
    FetchSessionCache,
    SessionRefusal,
    new_context,
)
from replog.replication.messages import (
    NO_SESSION,
    FetchPartition,
    FetchPartitionResult,
    FetchRequest,
    FetchResponse,
)


def ids(seed: int = 0) -> FetchSessionCache:
    rng = random.Random(seed)
    return FetchSessionCache(lambda: rng.randint(1, SESSION_ID_MAX), max_slots=3, eviction_ms=100)


def request(epoch: int, *partitions: int, forgotten: tuple[int, ...] = ()) -> FetchRequest:
    return FetchRequest(
        tuple(FetchPartition("t", p, fetch_offset=0) for p in partitions),
        session_epoch=epoch,
        forgotten=tuple(("t", p) for p in forgotten),
    )


def read(req: FetchRequest, hw: int = 5) -> FetchResponse:
    return FetchResponse(
        tuple(
            FetchPartitionResult("t", p.partition, high_watermark=hw, log_start_offset=0)
            for p in req.partitions
        )
    )


def opened(context: FetchContext | SessionRefusal) -> FetchContext:
    assert isinstance(context, FetchContext), context
    return context


def fetch(
    cache: FetchSessionCache,
    session_id: int,
    req: FetchRequest,
    now_ms: int = 0,
    *,
    topic_ids: bool = False,
    hw: int = 5,
) -> tuple[int, list[int], list[int]]:
    """(session id answered, partitions read, partitions answered)."""
    context = opened(new_context(cache, session_id, req, now_ms, uses_topic_ids=topic_ids))
    assert context.request.session_epoch == NO_SESSION and not context.request.forgotten
    answered_id, answer = context.answer(read(context.request, hw), now_ms)
    return (
        answered_id,
        [p.partition for p in context.request.partitions],
        [p.partition for p in answer.partitions],
    )


def test_a_full_fetch_opens_a_session_and_incremental_ones_carry_only_changes() -> None:
    cache = ids()
    session_id, read_, answered = fetch(cache, 0, request(0, 0, 1))
    assert session_id > 0 and read_ == answered == [0, 1]
    # Epoch 1 adds partition 2: the whole session is read, only the new one has news.
    assert fetch(cache, session_id, request(1, 2)) == (session_id, [0, 1, 2], [2])
    # Epoch 2 forgets partition 0; a high watermark moved on the others.
    assert fetch(cache, session_id, request(2, forgotten=(0,)), hw=6) == (
        session_id,
        [1, 2],
        [1, 2],
    )
    assert fetch(cache, session_id, request(3), hw=6) == (session_id, [1, 2], [])


def test_sessionless_fetches_and_closing() -> None:
    cache = ids()
    assert fetch(cache, 0, request(NO_SESSION, 0)) == (NO_SESSION_ID, [0], [0])
    assert len(cache) == 0
    session_id, _, _ = fetch(cache, 0, request(0, 0))
    # Epoch -1 with the id closes the session, and the fetch is sessionless.
    assert fetch(cache, session_id, request(NO_SESSION, 0)) == (NO_SESSION_ID, [0], [0])
    assert cache.get(session_id) is None


def test_a_full_fetch_naming_a_session_replaces_it() -> None:
    cache = ids()
    first, _, _ = fetch(cache, 0, request(0, 0))
    second, read_, _ = fetch(cache, first, request(0, 1))
    assert second != first and read_ == [1]
    assert cache.get(first) is None and len(cache) == 1


def refusal(context: FetchContext | SessionRefusal) -> SessionRefusal:
    assert isinstance(context, SessionRefusal), context
    return context


def test_an_unknown_id_a_wrong_epoch_and_a_switch_to_topic_ids_are_refused() -> None:
    cache = ids()
    session_id, _, _ = fetch(cache, 0, request(0, 0))
    missing = refusal(new_context(cache, session_id + 1, request(1), 0, uses_topic_ids=False))
    assert isinstance(missing.error, FetchSessionIdNotFoundError) and missing.error.code == 70
    wrong = refusal(new_context(cache, session_id, request(2), 0, uses_topic_ids=False))
    assert isinstance(wrong.error, InvalidFetchSessionEpochError) and wrong.error.code == 71
    assert f"fetch session {session_id} expects epoch 1, got 2" in str(wrong.error)
    switched = refusal(new_context(cache, session_id, request(1), 0, uses_topic_ids=True))
    assert isinstance(switched.error, FetchSessionTopicIdError) and switched.error.code == 106
    # The refusals left the session as it was: epoch 1 is still the next one.
    assert fetch(cache, session_id, request(1)) == (session_id, [0], [])


def test_a_full_cache_evicts_a_stale_session_first() -> None:
    cache = ids()
    sessions = [fetch(cache, 0, request(0, *range(n + 1)), now_ms=0)[0] for n in range(3)]
    fetch(cache, sessions[0], request(1), now_ms=50)
    fetch(cache, sessions[2], request(1), now_ms=20)
    # At 101 ms only sessions[1] is stale (unused for > 100 ms): it goes, the smallest
    # (sessions[0]) stays.
    new, _, _ = fetch(cache, 0, request(0, 0), now_ms=101)
    assert new != NO_SESSION_ID and cache.evictions == 1
    assert cache.get(sessions[1]) is None and cache.get(sessions[2]) is not None


def test_a_full_cache_without_stale_sessions_evicts_only_an_aged_smaller_one() -> None:
    cache = ids()
    sessions = [fetch(cache, 0, request(0, *range(n + 1)), now_ms=0)[0] for n in range(3)]
    for s in sessions:  # keep every session in use
        fetch(cache, s, request(1), now_ms=100)
    # Young sessions (created < 100 ms ago) are not evictable by a consumer's session.
    assert fetch(cache, 0, request(0, *range(5)), now_ms=100)[0] == NO_SESSION_ID
    for s in sessions:
        fetch(cache, s, request(2), now_ms=150)
    # Aged now: the smallest (one partition) goes for a larger session, not for an equal one.
    assert fetch(cache, 0, request(0, 7), now_ms=150)[0] == NO_SESSION_ID
    new, _, _ = fetch(cache, 0, request(0, 0, 1), now_ms=150)
    assert new != NO_SESSION_ID and cache.get(sessions[0]) is None


def test_a_followers_session_evicts_a_young_consumer_session() -> None:
    cache = ids()
    sessions = [fetch(cache, 0, request(0, *range(4)))[0] for _ in range(3)]
    leader = LeaderFetchSession()
    leader.full_request(request(0, 0))
    created = cache.try_create(1, privileged=True, uses_topic_ids=False, session=leader)
    assert created != NO_SESSION_ID and len(cache) == 3
    assert sum(cache.get(s) is None for s in sessions) == 1


def test_ids_are_drawn_again_while_taken_or_not_positive() -> None:
    draws = iter([0, -3, 7, 7, 9])
    cache = FetchSessionCache(lambda: next(draws), max_slots=5)
    assert [fetch(cache, 0, request(0, 0))[0] for _ in range(2)] == [7, 9]


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="max_slots >= 0"):
        FetchSessionCache(lambda: 1, max_slots=-1)


@dataclass(frozen=True)
class Creation:
    advance_ms: int
    size: int
    privileged: bool
    touch: int  # index (mod live sessions) of a session used before creating, -1 none


creations = st.builds(
    Creation,
    st.integers(0, 80),
    st.integers(0, 6),
    st.booleans(),
    st.integers(-1, 10),
)


@settings(max_examples=100, deadline=None)
@given(st.lists(creations, max_size=40), st.integers(1, 5), st.integers(0, 2**16))
def test_any_sequence_of_creations_follows_kafkas_eviction_rules(
    steps: list[Creation], slots: int, seed: int
) -> None:
    rng = random.Random(seed)
    eviction_ms = 100
    cache = FetchSessionCache(
        lambda: rng.randint(1, SESSION_ID_MAX), max_slots=slots, eviction_ms=eviction_ms
    )
    now = 0
    for step in steps:
        now += step.advance_ms
        live = list(cache)
        if step.touch >= 0 and live:
            cache.touch(live[step.touch % len(live)], now)
        before = {s.session_id: s for s in cache}
        full = len(before) >= slots
        session = LeaderFetchSession()
        session.full_request(request(0, *range(step.size)))
        created = cache.try_create(
            now, privileged=step.privileged, uses_topic_ids=False, session=session
        )
        after = {s.session_id: s for s in cache}
        assert len(after) <= slots
        assert all(0 < i <= SESSION_ID_MAX for i in after)
        gone = set(before) - set(after)
        if created == NO_SESSION_ID:
            assert full and not gone and after.keys() == before.keys()
            # Nothing was stale, and nothing evictable was less valuable than the new one.
            assert all(now - s.last_used_ms <= eviction_ms for s in before.values())
            for s in before.values():
                aged = now - s.creation_ms > eviction_ms
                if aged or (step.privileged and not s.privileged):
                    assert (step.privileged, step.size) <= (s.privileged, s.size)
            continue
        assert created not in before and after[created].session is session
        if not full:
            assert not gone
            continue
        (evicted_id,) = gone
        evicted = before[evicted_id]
        stale = [s for s in before.values() if now - s.last_used_ms > eviction_ms]
        if stale:
            assert evicted.last_used_ms == min(s.last_used_ms for s in stale)
        else:
            aged = now - evicted.creation_ms > eviction_ms
            assert aged or (step.privileged and not evicted.privileged)
            assert (step.privileged, step.size) > (evicted.privileged, evicted.size)
