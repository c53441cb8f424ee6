"""ReplicaProgress: Kafka's exact lastCaughtUpTimeMs rule, isCaughtUp and the two resets
(docs/design/replication.md#caught-up-time)."""

from __future__ import annotations

import pytest

from replog.replication.replica_progress import ReplicaProgress

LAG_MS = 30_000


def progress_at(
    *, caught_up_ms: int, fetch_ms: int, leader_leo_at_last_fetch: int
) -> ReplicaProgress:
    return ReplicaProgress(
        broker_id=2,
        log_end_offset=5,
        log_start_offset=0,
        last_fetch_leader_log_end_offset=leader_leo_at_last_fetch,
        last_fetch_time_ms=fetch_ms,
        last_caught_up_time_ms=caught_up_ms,
        broker_epoch=7,
    )


# (fetch offset f, leader LEO L, previous P, previous T, previous C, now t) -> (C, P, T) after.
RULE_TABLE = [
    # f >= L: C = max(C, t)
    pytest.param(10, 10, 8, 1_000, 500, 2_000, (2_000, 10, 2_000), id="f==L"),
    pytest.param(12, 10, 8, 1_000, 500, 2_000, (2_000, 10, 2_000), id="f>L"),
    # f >= L but C already later than t (clock went back): max keeps C
    pytest.param(10, 10, 8, 1_000, 5_000, 2_000, (5_000, 10, 2_000), id="f>=L-keeps-later-C"),
    # L > f >= P: C = max(C, T) -- caught up to what the leader had at the previous fetch
    pytest.param(8, 10, 8, 1_000, 500, 2_000, (1_000, 10, 2_000), id="f==P<L"),
    pytest.param(9, 10, 8, 1_000, 500, 2_000, (1_000, 10, 2_000), id="P<f<L"),
    pytest.param(9, 10, 8, 1_000, 1_500, 2_000, (1_500, 10, 2_000), id="P<f<L-keeps-later-C"),
    # f < P (and f < L): C unchanged
    pytest.param(7, 10, 8, 1_000, 500, 2_000, (500, 10, 2_000), id="f<P"),
    # P = max(L, P): a smaller L (a fetch captured an older LEO) never lowers P
    pytest.param(3, 4, 8, 1_000, 500, 2_000, (500, 8, 2_000), id="L<P-keeps-P"),
    pytest.param(4, 4, 8, 1_000, 500, 2_000, (2_000, 8, 2_000), id="f==L<P"),
]


@pytest.mark.parametrize(
    ("f", "leader_leo", "p", "t_prev", "c_prev", "now", "expected"), RULE_TABLE
)
def test_last_caught_up_time_rule_table(
    f: int,
    leader_leo: int,
    p: int,
    t_prev: int,
    c_prev: int,
    now: int,
    expected: tuple[int, int, int],
) -> None:
    progress = progress_at(caught_up_ms=c_prev, fetch_ms=t_prev, leader_leo_at_last_fetch=p)
    progress.update_fetch_state(
        fetch_offset=f,
        log_start_offset=3,
        leader_log_end_offset=leader_leo,
        broker_epoch=9,
        now_ms=now,
    )
    assert (
        progress.last_caught_up_time_ms,
        progress.last_fetch_leader_log_end_offset,
        progress.last_fetch_time_ms,
    ) == expected
    assert progress.log_end_offset == f
    assert progress.log_start_offset == 3
    assert progress.broker_epoch == 9


def test_a_follower_that_keeps_fetching_stays_caught_up_while_the_leader_appends() -> None:
    # Leader LEO grows by 10 between fetches; the follower always fetches at the LEO the
    # leader had at its previous fetch, so C follows T one round behind.
    progress = ReplicaProgress(broker_id=2)
    progress.reset_for_new_leadership(in_isr=True, now_ms=0)
    leader_leo = 0
    for step in range(1, 20):
        now = step * 1_000
        fetch_offset = leader_leo
        leader_leo += 10
        progress.update_fetch_state(
            fetch_offset=fetch_offset,
            log_start_offset=0,
            leader_log_end_offset=leader_leo,
            broker_epoch=1,
            now_ms=now,
        )
        expected = now - 1_000 if step > 1 else 0
        assert progress.last_caught_up_time_ms == expected
    assert progress.is_caught_up(leader_leo, 100_000, LAG_MS) is False  # 82 s later: stale
    assert progress.is_caught_up(leader_leo, 19_000, LAG_MS) is True


def test_a_stuck_follower_never_advances_its_caught_up_time() -> None:
    progress = ReplicaProgress(broker_id=2)
    progress.reset_for_new_leadership(in_isr=True, now_ms=1_000)
    progress.update_fetch_state(
        fetch_offset=50, log_start_offset=0, leader_log_end_offset=50, broker_epoch=1, now_ms=2_000
    )
    assert progress.last_caught_up_time_ms == 2_000
    # The leader appends; the follower keeps asking for 50 (it cannot append). P is 50, so
    # f >= P: C = max(C, T) = the previous fetch time, 2000.
    progress.update_fetch_state(
        fetch_offset=50, log_start_offset=0, leader_log_end_offset=80, broker_epoch=1, now_ms=3_000
    )
    assert progress.last_caught_up_time_ms == 2_000
    progress.update_fetch_state(
        fetch_offset=50, log_start_offset=0, leader_log_end_offset=90, broker_epoch=1, now_ms=4_000
    )
    # Now P = 80 > f: C stays at 2000 forever.
    assert progress.last_caught_up_time_ms == 2_000
    progress.update_fetch_state(
        fetch_offset=50, log_start_offset=0, leader_log_end_offset=90, broker_epoch=1, now_ms=40_000
    )
    assert progress.last_caught_up_time_ms == 2_000
    assert not progress.is_caught_up(90, 32_001, LAG_MS)
    assert progress.is_caught_up(90, 32_000, LAG_MS)  # the limit is inclusive


def test_is_caught_up_at_the_leader_log_end_offset_whatever_the_time() -> None:
    progress = ReplicaProgress(broker_id=2, log_end_offset=42, last_caught_up_time_ms=0)
    assert progress.is_caught_up(42, 10**9, LAG_MS)
    assert not progress.is_caught_up(43, 10**9, LAG_MS)
    assert progress.is_caught_up(43, LAG_MS, LAG_MS)
    assert not progress.is_caught_up(43, LAG_MS + 1, LAG_MS)


@pytest.mark.parametrize(("in_isr", "expected_c"), [(True, 5_000), (False, 0)])
def test_reset_for_new_leadership_forgets_offsets(in_isr: bool, expected_c: int) -> None:
    progress = progress_at(caught_up_ms=4_000, fetch_ms=4_500, leader_leo_at_last_fetch=70)
    progress.reset_for_new_leadership(in_isr=in_isr, now_ms=5_000)
    assert progress == ReplicaProgress(
        broker_id=2,
        log_end_offset=-1,
        log_start_offset=-1,
        last_fetch_leader_log_end_offset=-1,
        last_fetch_time_ms=0,
        last_caught_up_time_ms=expected_c,
        broker_epoch=-1,
    )
    assert not progress.has_fetched


@pytest.mark.parametrize(("in_isr", "expected_time"), [(True, 5_000), (False, 0)])
def test_reset_for_new_leader_epoch_keeps_offsets(in_isr: bool, expected_time: int) -> None:
    progress = progress_at(caught_up_ms=4_000, fetch_ms=4_500, leader_leo_at_last_fetch=70)
    progress.reset_for_new_leader_epoch(in_isr=in_isr, leader_epoch_start_offset=80, now_ms=5_000)
    assert progress == ReplicaProgress(
        broker_id=2,
        log_end_offset=5,
        log_start_offset=0,
        last_fetch_leader_log_end_offset=80,
        last_fetch_time_ms=expected_time,
        last_caught_up_time_ms=expected_time,
        broker_epoch=7,
    )
    assert progress.has_fetched


def test_after_a_new_leader_epoch_a_fetch_below_the_epoch_start_does_not_count_as_caught_up() -> (
    None
):
    # P = epoch start 80: a follower at 75 (< P, < L) keeps C; one at 80 (>= P) gets C = T.
    behind = progress_at(caught_up_ms=0, fetch_ms=0, leader_leo_at_last_fetch=0)
    behind.reset_for_new_leader_epoch(in_isr=True, leader_epoch_start_offset=80, now_ms=5_000)
    behind.update_fetch_state(
        fetch_offset=75, log_start_offset=0, leader_log_end_offset=90, broker_epoch=7, now_ms=6_000
    )
    assert behind.last_caught_up_time_ms == 5_000
    at_start = progress_at(caught_up_ms=0, fetch_ms=0, leader_leo_at_last_fetch=0)
    at_start.reset_for_new_leader_epoch(in_isr=False, leader_epoch_start_offset=80, now_ms=5_000)
    at_start.update_fetch_state(
        fetch_offset=80, log_start_offset=0, leader_log_end_offset=90, broker_epoch=7, now_ms=6_000
    )
    # T was reset to 0 for a non-ISR follower, so f >= P gives C = max(0, 0) = 0.
    assert at_start.last_caught_up_time_ms == 0


def test_negative_fetch_offset_is_refused() -> None:
    with pytest.raises(ValueError, match="replica 2: fetch offset -1"):
        ReplicaProgress(broker_id=2).update_fetch_state(
            fetch_offset=-1, log_start_offset=0, leader_log_end_offset=0, broker_epoch=1, now_ms=0
        )
