"""The soak's check of what a consumer group was given (`group_positions.GroupPositions`), on
scripted sessions: what Kafka's group semantics allow passes, each way of skipping or losing
records is named."""

from __future__ import annotations

from group_positions import GroupPositions

P = 0  # the partition of every script


def give(positions: GroupPositions, session: int, member: int, offsets: range) -> None:
    for offset in offsets:
        positions.take(session, member, P, offset, f"v{offset}".encode())


def commit(positions: GroupPositions, session: int, member: int, offset: int, ok: bool) -> None:
    positions.attempt({P: offset})
    if ok:
        positions.committed(session, member, {P: offset})


def test_a_partition_handed_over_at_its_commit_is_clean() -> None:
    positions = GroupPositions()
    give(positions, 1, 0, range(10))
    commit(positions, 1, 0, 10, ok=True)
    positions.release(1, {P})
    give(positions, 2, 1, range(10, 20))
    assert positions.problems({}) == []
    assert positions.handoffs == 1
    assert positions.overlaps == 0
    assert positions.highest_next(P) == 20
    assert positions.session_next(2) == {P: 20}


def test_a_member_reading_on_beside_the_next_owner_is_an_overlap_not_a_skip() -> None:
    # Session 1's membership expired while it could not reach its coordinator: it reads on
    # from its own position while session 2 starts from the last commit, 5, and its commit of
    # 14 fails (one position per partition across members would take session 1's 10 after
    # session 2's 7 for a jump).
    positions = GroupPositions()
    give(positions, 1, 0, range(10))
    commit(positions, 1, 0, 5, ok=True)
    give(positions, 2, 1, range(5, 8))
    give(positions, 1, 0, range(10, 14))
    commit(positions, 1, 0, 14, ok=False)
    positions.release(1)
    give(positions, 2, 1, range(8, 20))
    assert positions.problems({}) == []
    assert positions.overlaps == 7
    assert positions.redelivered == 9


def test_a_holding_that_skips_records_is_named() -> None:
    positions = GroupPositions()
    give(positions, 1, 0, range(5))
    give(positions, 1, 0, range(6, 8))
    [problem] = positions.problems({})
    assert problem.startswith("skipped records: 0@6 after 4, session 1 of member 0")


def test_a_holding_may_move_to_where_delete_records_asked() -> None:
    positions = GroupPositions()
    give(positions, 1, 0, range(5))
    give(positions, 1, 0, range(100, 102))
    assert positions.problems({P: [100]}) == []
    assert positions.problems({P: [99]}) != []


def test_a_holding_that_goes_back_is_named() -> None:
    positions = GroupPositions()
    give(positions, 1, 0, range(5))
    give(positions, 1, 0, range(3, 4))
    [problem] = positions.problems({})
    assert problem.startswith("went back: 0@3 after 4")


def test_a_holding_starting_where_no_commit_was_sent_is_named() -> None:
    # Session 2 begins past what anyone was given or committed: a position ahead of what
    # poll gave was committed, or the group's offsets came back wrong.
    positions = GroupPositions()
    give(positions, 1, 0, range(10))
    commit(positions, 1, 0, 10, ok=True)
    positions.release(1)
    give(positions, 2, 1, range(12, 14))
    commit(positions, 2, 1, 12, ok=True)  # sent after it began: no excuse
    [problem] = positions.problems({})
    assert problem.startswith("started past records: 0@12, session 2 of member 1")
    assert "[(1, 0, 10), (2, 1, 12)]" in problem


def test_a_holding_may_start_at_a_commit_whose_answer_was_lost() -> None:
    positions = GroupPositions()
    give(positions, 1, 0, range(10))
    commit(positions, 1, 0, 10, ok=False)  # timed out, applied all the same
    positions.release(1)
    give(positions, 2, 1, range(10, 12))
    assert positions.problems({}) == []


def test_a_holding_starting_below_a_successful_commit_is_named() -> None:
    positions = GroupPositions()
    give(positions, 1, 0, range(10))
    commit(positions, 1, 0, 10, ok=True)
    positions.release(1)
    give(positions, 2, 1, range(0, 3))
    [problem] = positions.problems({})
    assert problem == (
        "below a commit: 0@0: session 2 of member 1 started below the last successful commit, 10"
    )


def test_an_offset_given_with_two_values_is_named() -> None:
    positions = GroupPositions()
    positions.take(1, 0, P, 0, b"a")
    positions.release(1)
    positions.take(2, 1, P, 0, b"b")
    assert positions.problems({}) == ["two values: 0@0: b'a', then b'b'"]
