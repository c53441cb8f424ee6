"""One test per rule of the Raft core that the vote matrix and the scenarios do not pin down.

Each test builds node 1 of voters {1, 2, 3} in some role, feeds it messages and time, and checks
what comes out of its Readies.
"""

from __future__ import annotations

import random
from dataclasses import replace

import pytest
from raft_helpers import (
    bodies,
    config,
    drain,
    log_with,
    merge,
    node,
    step,
    stored_batches,
    vote_request,
    write_snapshot,
)

from replog.errors import NotLeaderOrFollowerError
from replog.quorum.raft import (
    CommittedBatch,
    ElectionState,
    EpochEndOffset,
    LeaderChange,
    LoadSnapshot,
    Message,
    RaftNode,
    Ready,
    SnapshotId,
    TruncateTo,
)
from replog.quorum.raft.messages import (
    DescribeQuorumRequest,
    DescribeQuorumResponse,
    EndQuorumEpochRequest,
    ErrorCode,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    VoteResponse,
)
from replog.record import build_batch, read_header
from replog.server.raft.raft_storage import RaftStorage

EPOCH = 5


def make_leader(
    epochs: list[tuple[int, int]] | None = None, **overrides: int
) -> tuple[RaftNode, RaftStorage]:
    """Node 1, leader of epoch 5 (voted for by node 3) over a log of `epochs`."""
    raft, log, _ = node(1, ElectionState(EPOCH, None, 1), log_with(epochs or [(1, 2)]), **overrides)
    step(raft, log, 3, VoteResponse(1, ErrorCode.NONE, EPOCH, None, True, False))
    assert raft.status().role == "leader"
    return raft, log


def fetch(
    offset: int,
    last_epoch: int,
    *,
    epoch: int = EPOCH,
    hw: int = 0,
    replica: int = 2,
    max_wait_ms: int = 0,
) -> FetchRequest:
    return FetchRequest(9, replica, epoch, offset, last_epoch, hw, max_wait_ms, 1 << 20)


def fetch_response(
    raft: RaftNode, log: RaftStorage, source: int, request: FetchRequest
) -> FetchResponse:
    (response,) = bodies(step(raft, log, source, request), FetchResponse, source)
    assert isinstance(response, FetchResponse)
    return response


# --- the leader's high watermark ---------------------------------------------------------------


def test_a_new_leader_exposes_a_high_watermark_only_past_its_epoch_start() -> None:
    raft, log = make_leader([(1, 2)])  # epoch start offset 2: the LeaderChange batch
    assert raft.status().epoch_start_offset == 2
    # Node 2 has the old entries only: a majority reached 2, which is not past the epoch start.
    assert fetch_response(raft, log, 2, fetch(2, 1)).high_watermark is None
    assert raft.status().high_watermark == 0
    response = fetch_response(raft, log, 2, fetch(3, EPOCH))
    assert response.high_watermark == 3
    assert raft.status().high_watermark == 3


@pytest.mark.parametrize(("followers_at_4", "high_watermark"), [((2,), 3), ((2, 3), 4)])
def test_the_leader_counts_its_own_entries_only_once_flushed(
    followers_at_4: tuple[int, ...], high_watermark: int
) -> None:
    raft, log = make_leader([(1, 2)])
    raft.propose([b"x"], raft.now_ms)
    ready = raft.ready()
    log.apply(ready, flush=False)
    # The shell wrote the batch [3, 4) but reports only offsets below 3 flushed.
    raft.advance(ready, flushed_end_offset=3)
    for follower in followers_at_4:
        fetch_response(raft, log, follower, fetch(4, EPOCH, replica=follower))
    # Voters at [3 (leader, flushed), 4, unknown] reach 3; at [3, 4, 4] they reach 4.
    assert raft.status().high_watermark == high_watermark


def test_the_high_watermark_never_decreases() -> None:
    raft, log = make_leader([(1, 2)])
    fetch_response(raft, log, 2, fetch(3, EPOCH))
    assert raft.status().high_watermark == 3
    # Node 2 reports a lower offset (it lost data it had promised was flushed).
    fetch_response(raft, log, 2, fetch(2, 1))
    assert raft.status().high_watermark == 3


def test_after_a_restart_the_high_watermark_is_known_only_once_the_leader_answers() -> None:
    # Not the latest snapshot's end: with that as its high watermark, the broker's metadata
    # loader would count itself caught up on the snapshot alone.
    log = log_with([(1, 4)])
    write_snapshot(log, SnapshotId(2, 1), b"state")
    raft, log, first = node(101, ElectionState(1, 2), log)  # an observer following node 2
    assert isinstance(first.to_apply[0], LoadSnapshot)
    status = raft.status()
    assert (status.high_watermark, status.high_watermark_known) == (2, False)
    (request,) = bodies(first, FetchRequest, 2)
    assert isinstance(request, FetchRequest)
    # An answer without a high watermark (a new leader's, before its epoch start commits)
    # teaches nothing; the next one does, even when it is the value the node already had.
    answer = FetchResponse(request.correlation_id, ErrorCode.NONE, 1, 2, 4, 1)
    (again,) = bodies(step(raft, log, 2, answer), FetchRequest, 2)
    assert not raft.status().high_watermark_known and raft.learned_high_watermark() is None
    assert isinstance(again, FetchRequest)
    step(raft, log, 2, replace(answer, correlation_id=again.correlation_id, high_watermark=2))
    status = raft.status()
    assert (status.high_watermark, status.high_watermark_known) == (2, True)
    assert raft.learned_high_watermark() == 2


def test_a_leader_knows_its_high_watermark_once_its_epoch_start_commits() -> None:
    raft, log = make_leader([(1, 2)])
    assert not raft.status().high_watermark_known
    fetch_response(raft, log, 2, fetch(3, EPOCH))
    assert raft.status().high_watermark_known
    # A lone voter restarted from a snapshot comes up at once: it leads, and commits alone.
    log = log_with([(1, 4)])
    write_snapshot(log, SnapshotId(2, 1), b"state")
    alone, _, _ = node(1, ElectionState(1, 1, 1), log, voters=(1,))
    status = alone.status()
    assert (status.role, status.high_watermark, status.high_watermark_known) == ("leader", 5, True)


def test_observers_do_not_count_for_the_high_watermark() -> None:
    raft, log = make_leader([(1, 2)])
    fetch_response(raft, log, 101, fetch(3, EPOCH, replica=101))
    assert raft.status().high_watermark == 0
    (described,) = bodies(step(raft, log, 999, DescribeQuorumRequest(4)), DescribeQuorumResponse)
    assert isinstance(described, DescribeQuorumResponse)
    assert [(r.replica_id, r.log_end_offset) for r in described.observers] == [(101, 3)]
    assert [(r.replica_id, r.log_end_offset) for r in described.voters] == [
        (1, 3),
        (2, None),
        (3, None),
    ]


def test_the_leader_announces_itself_after_applying_its_epoch_start() -> None:
    raft, log, _ = node(1, ElectionState(EPOCH, None, 1), log_with([(1, 2)]))
    ready = step(raft, log, 3, VoteResponse(1, ErrorCode.NONE, EPOCH, None, True, False))
    assert not [a for a in ready.to_apply if isinstance(a, LeaderChange)]
    ready = step(raft, log, 2, fetch(3, EPOCH))
    kinds = [type(item) for item in ready.to_apply]
    # Old committed entries, the LeaderChange batch, then the announcement.
    assert kinds == [CommittedBatch, CommittedBatch, CommittedBatch, LeaderChange]
    assert ready.to_apply[-1] == LeaderChange(1, EPOCH)


# --- check-quorum -------------------------------------------------------------------------------


def test_a_leader_that_hears_from_no_majority_resigns_after_one_and_a_half_fetch_timeouts() -> None:
    raft, log = make_leader()
    start = raft.now_ms
    raft.tick(start + 2999)
    assert raft.status().role == "leader"
    raft.tick(start + 3000)
    assert raft.status().role == "resigned"
    ready = merge(drain(raft, log))
    assert {
        m.destination_id for m in ready.messages if isinstance(m.body, EndQuorumEpochRequest)
    } == {2, 3}


def test_fetches_from_a_majority_keep_the_leader() -> None:
    raft, log = make_leader()
    for now in (1000, 2000, 3000, 4000):
        raft.tick(now)
        step(raft, log, 2, fetch(2, 1))
        assert raft.status().role == "leader", now


# --- Fetch validation ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("request_", "error"),
    [
        (fetch(-1, 1), ErrorCode.INVALID_REQUEST),
        (fetch(2, -1), ErrorCode.INVALID_REQUEST),
        (fetch(2, EPOCH + 1), ErrorCode.INVALID_REQUEST),
        (fetch(2, 1, epoch=EPOCH - 1), ErrorCode.FENCED_LEADER_EPOCH),
        (fetch(2, 1, epoch=EPOCH + 1), ErrorCode.UNKNOWN_LEADER_EPOCH),
    ],
)
def test_fetch_errors(request_: FetchRequest, error: ErrorCode) -> None:
    raft, log = make_leader()
    response = fetch_response(raft, log, 2, request_)
    assert (response.error, response.quorum_epoch) == (error, EPOCH)


def test_a_non_leader_answers_fetches_with_the_leader_it_knows() -> None:
    raft, log, _ = node(1, ElectionState(EPOCH, 3), log_with([(1, 2)]))
    response = fetch_response(raft, log, 2, fetch(2, 1))
    assert (response.error, response.leader_id) == (ErrorCode.NOT_LEADER_OR_FOLLOWER, 3)


def test_a_parked_fetch_is_answered_empty_after_its_wait() -> None:
    raft, log = make_leader()
    fetch_response(raft, log, 2, fetch(3, EPOCH))
    start = raft.now_ms
    assert not bodies(step(raft, log, 2, fetch(3, EPOCH, hw=3, max_wait_ms=500)), FetchResponse)
    raft.tick(start + 499)
    assert not bodies(merge(drain(raft, log)), FetchResponse)
    raft.tick(start + 500)
    (response,) = bodies(merge(drain(raft, log)), FetchResponse)
    assert isinstance(response, FetchResponse)
    assert (response.error, response.records) == (ErrorCode.NONE, b"")


@pytest.mark.parametrize("second_waits", [True, False])
def test_a_second_fetch_from_the_same_fetcher_answers_the_parked_one(second_waits: bool) -> None:
    # A second Fetch must not just replace the parked one: left unanswered, the parked one
    # times out in the follower's transport, which tears the connection down.
    raft, log = make_leader()
    fetch_response(raft, log, 2, fetch(3, EPOCH))  # caught up; high watermark 3
    first = replace(fetch(3, EPOCH, hw=3, max_wait_ms=500), correlation_id=301)
    assert not bodies(step(raft, log, 2, first), FetchResponse)
    second = replace(first, correlation_id=302, max_wait_ms=500 if second_waits else 0)
    answered = fetch_answers(step(raft, log, 2, second))
    # The parked one is answered as at its expiry: empty, no error.
    assert answered == [(301, ErrorCode.NONE, b"")] + (
        [] if second_waits else [(302, ErrorCode.NONE, b"")]
    )
    raft.tick(raft.now_ms + 500)
    assert fetch_answers(merge(drain(raft, log))) == (
        [(302, ErrorCode.NONE, b"")] if second_waits else []
    )


def fetch_answers(ready: Ready) -> list[tuple[int, ErrorCode, bytes]]:
    """(correlation id, error, records) of each Fetch answer to node 2 in `ready`."""
    answers = [b for b in bodies(ready, FetchResponse, 2) if isinstance(b, FetchResponse)]
    return [(a.correlation_id, a.error, a.records) for a in answers]


def test_a_fetcher_behind_the_high_watermark_is_answered_within_the_linger() -> None:
    raft, log = make_leader(high_watermark_linger_ms=5)
    fetch_response(raft, log, 2, fetch(3, EPOCH))
    start = raft.now_ms
    assert not bodies(
        step(raft, log, 3, fetch(3, EPOCH, replica=3, hw=0, max_wait_ms=500)), FetchResponse
    )
    raft.tick(start + 4)
    assert not bodies(merge(drain(raft, log)), FetchResponse)
    raft.tick(start + 5)
    (response,) = bodies(merge(drain(raft, log)), FetchResponse, 3)
    assert isinstance(response, FetchResponse)
    assert (response.high_watermark, response.records) == (3, b"")


def test_a_commit_shortens_every_parked_wait_to_the_linger_and_the_wake_time_shows_it() -> None:
    raft, log = make_leader(high_watermark_linger_ms=5)
    fetch_response(raft, log, 2, fetch(3, EPOCH))  # high watermark 3
    raft.propose([b"x"], raft.now_ms)
    merge(drain(raft, log))  # [3, 4) written and flushed
    fetch_response(raft, log, 101, fetch(3, EPOCH, replica=101, hw=3))  # records [3, 4)
    start = raft.now_ms
    # The observer waits with nothing new; then follower 2's acknowledgement commits offset 4.
    parked = fetch(4, EPOCH, replica=101, hw=3, max_wait_ms=500)
    assert not bodies(step(raft, log, 101, parked), FetchResponse)
    ready = step(raft, log, 2, fetch(4, EPOCH, hw=3, max_wait_ms=500))
    assert raft.status().high_watermark == 4 and not bodies(ready, FetchResponse)
    assert ready.wake_at_ms == raft.wake_at_ms() == start + 5
    raft.tick(start + 4)
    assert not bodies(merge(drain(raft, log)), FetchResponse)
    raft.tick(start + 5)
    answers = merge(drain(raft, log)).messages
    assert sorted(
        (m.destination_id, m.body.high_watermark)
        for m in answers
        if isinstance(m.body, FetchResponse)
    ) == [(2, 4), (101, 4)]


def test_without_a_linger_a_fetcher_behind_the_high_watermark_is_answered_at_once() -> None:
    raft, log = make_leader(high_watermark_linger_ms=0)
    fetch_response(raft, log, 2, fetch(3, EPOCH))
    response = fetch_response(raft, log, 3, fetch(3, EPOCH, replica=3, hw=0, max_wait_ms=500))
    assert response.high_watermark == 3


def test_an_acknowledging_fetch_stays_parked_and_carries_the_next_append() -> None:
    # The follower's Fetch that commits offset 3 is not answered with the high watermark
    # alone: the next proposal's records go in its answer, with the high watermark.
    raft, log = make_leader(high_watermark_linger_ms=5)
    fetch_response(raft, log, 2, fetch(2, 1))  # records [2, 3)
    assert not bodies(step(raft, log, 2, fetch(3, EPOCH, max_wait_ms=500)), FetchResponse)
    assert raft.status().high_watermark == 3
    raft.propose([b"x"], raft.now_ms)
    (response,) = bodies(merge(drain(raft, log)), FetchResponse, 2)
    assert isinstance(response, FetchResponse)
    assert response.high_watermark == 3 and response.records


def test_a_parked_fetch_is_answered_in_the_ready_of_the_append_before_the_fsync() -> None:
    raft, log = make_leader()
    fetch_response(raft, log, 2, fetch(3, EPOCH))  # catch up; high watermark 3
    assert not bodies(step(raft, log, 2, fetch(3, EPOCH, hw=3, max_wait_ms=500)), FetchResponse)
    raft.propose([b"x"], raft.now_ms)
    ready = raft.ready()
    (append,) = ready.log_ops
    (response,) = bodies(ready, FetchResponse, 2)
    assert isinstance(response, FetchResponse)
    assert response.records == append.batches  # type: ignore[union-attr]
    assert ready.flush_log and not ready.flush_before_send  # it may leave before the fsync
    raft.advance(ready, flushed_end_offset=log.apply(ready, flush=False))
    # Not flushed yet: the leader's own entry does not count; the follower's does not either.
    assert raft.status().high_watermark == 3


def test_an_acknowledgement_that_commits_carries_the_next_lingering_batch() -> None:
    raft, log = make_leader(append_linger_ms=25)
    fetch_response(raft, log, 2, fetch(3, EPOCH))  # catch up; high watermark 3
    assert not bodies(step(raft, log, 2, fetch(3, EPOCH, hw=3, max_wait_ms=500)), FetchResponse)
    raft.propose([b"a"], raft.now_ms)
    merge(drain(raft, log))  # offset 3 appended, sent to follower 2
    raft.propose([b"b"], raft.now_ms)  # lingers behind offset 3
    response = fetch_response(raft, log, 2, fetch(4, EPOCH, hw=3, max_wait_ms=500))
    assert raft.status().high_watermark == 4
    assert response.high_watermark == 4
    assert response.records and read_header(response.records, 0).base_offset == 4


def test_fetch_snapshot_errors() -> None:
    raft, log = make_leader()
    missing = FetchSnapshotRequest(5, 2, EPOCH, SnapshotId(2, 1), 0, 100)
    (response,) = bodies(step(raft, log, 2, missing), FetchSnapshotResponse)
    assert isinstance(response, FetchSnapshotResponse)
    assert response.error == ErrorCode.SNAPSHOT_NOT_FOUND
    write_snapshot(log, SnapshotId(2, 1), b"0123456789")
    beyond = FetchSnapshotRequest(6, 2, EPOCH, SnapshotId(2, 1), 10, 100)
    (response,) = bodies(step(raft, log, 2, beyond), FetchSnapshotResponse)
    assert isinstance(response, FetchSnapshotResponse)
    assert (response.error, response.size) == (ErrorCode.POSITION_OUT_OF_RANGE, 10)
    chunk = FetchSnapshotRequest(7, 2, EPOCH, SnapshotId(2, 1), 4, 3)
    (response,) = bodies(step(raft, log, 2, chunk), FetchSnapshotResponse)
    assert isinstance(response, FetchSnapshotResponse)
    assert (response.error, response.chunk, response.size) == (ErrorCode.NONE, b"456", 10)


# --- the follower side --------------------------------------------------------------------------


def follower(epochs: list[tuple[int, int]]) -> tuple[RaftNode, RaftStorage, FetchRequest]:
    """Node 1 following node 3 in epoch 5, and the Fetch it sent."""
    raft, log, startup = node(1, ElectionState(EPOCH, 3), log_with(epochs))
    (request,) = bodies(startup, FetchRequest, 3)
    assert isinstance(request, FetchRequest)
    return raft, log, request


def answer(request: FetchRequest, **fields: object) -> FetchResponse:
    return FetchResponse(
        request.correlation_id,
        ErrorCode.NONE,
        EPOCH,
        3,
        request.fetch_offset,
        request.last_fetched_epoch,
        **fields,  # type: ignore[arg-type]
    )


def test_stale_or_mismatched_fetch_responses_are_ignored() -> None:
    raft, log, request = follower([(1, 2), (2, 2)])
    stale = FetchResponse(
        request.correlation_id + 100,
        ErrorCode.NONE,
        EPOCH,
        3,
        4,
        2,
        diverging_epoch=None,
        high_watermark=4,
    )
    assert step(raft, log, 3, stale).is_empty
    other_position = FetchResponse(
        request.correlation_id, ErrorCode.NONE, EPOCH, 3, 2, 1, high_watermark=4
    )
    step(raft, log, 3, other_position)
    assert raft.status().high_watermark == 0


def test_a_diverging_answer_truncates_and_refetches() -> None:
    raft, log, request = follower([(1, 2), (2, 2)])
    ready = step(raft, log, 3, answer(request, diverging_epoch=EpochEndOffset(1, 3)))
    assert TruncateTo(2) in ready.log_ops  # epoch 1 ends at 2 here
    (refetch,) = bodies(ready, FetchRequest, 3)
    assert isinstance(refetch, FetchRequest)
    assert (refetch.fetch_offset, refetch.last_fetched_epoch) == (2, 1)


def test_corrupt_records_are_not_appended() -> None:
    raft, log, request = follower([(1, 2)])
    batch = bytearray(
        build_batch([(0, None, b"x", ())], base_offset=2, partition_leader_epoch=EPOCH)
    )
    batch[-1] ^= 0xFF
    ready = step(raft, log, 3, answer(request, records=bytes(batch), high_watermark=3))
    assert not ready.log_ops
    assert raft.status().log_end_offset == 2


def test_end_quorum_epoch_moves_the_fetch_deadline_by_position() -> None:
    for successors, delay in [((1, 2), 0), ((2, 1), 500), ((2,), 1000)]:
        raft, log, _ = follower([(1, 2)])
        start = raft.now_ms
        step(raft, log, 3, EndQuorumEpochRequest(4, EPOCH, 3, successors))
        if delay:
            raft.tick(start + delay - 1)
            assert raft.status().role == "follower", successors
            raft.tick(start + delay)
        assert raft.status().role == "prospective", successors


def refuse(raft: RaftNode, log: RaftStorage, request: FetchRequest) -> FetchRequest | None:
    """The transport could not deliver `request` to the leader; the retry it causes, if any."""
    raft.request_failed(3, request.correlation_id, unreachable=True, now_ms=raft.now_ms)
    drain(raft, log)
    raft.tick(raft.now_ms + raft.config.retry_backoff_ms)
    (retry,) = bodies(merge(drain(raft, log)), FetchRequest, 3) or (None,)
    assert retry is None or isinstance(retry, FetchRequest)
    return retry


def test_a_failed_fetch_is_retried_after_the_retry_backoff_not_a_request_timeout() -> None:
    raft, log, request = follower([(1, 2)])
    raft.request_failed(3, request.correlation_id, unreachable=False, now_ms=raft.now_ms)
    assert not bodies(merge(drain(raft, log)), FetchRequest)
    raft.tick(raft.now_ms + raft.config.retry_backoff_ms)
    assert bodies(merge(drain(raft, log)), FetchRequest, 3)
    # A failure report for a request that is no longer in flight changes nothing.
    raft.request_failed(3, request.correlation_id, unreachable=True, now_ms=raft.now_ms)
    assert not raft.has_ready()


def test_a_leader_refusing_two_fetches_is_lost_and_the_follower_campaigns_within_half_t() -> None:
    raft, log, request = follower([(1, 2)])
    start = raft.now_ms
    retry = refuse(raft, log, request)
    assert retry is not None  # one refusal: retried, the leader is still trusted
    assert raft.status().role == "follower"
    assert raft.wake_at_ms() == start + raft.config.fetch_timeout_ms
    retry = refuse(raft, log, retry)
    # Lost: pre-votes are granted at once, the campaign starts within T/2, long before the
    # fetch timeout (2000 ms) would have expired.
    pre_vote = step(raft, log, 2, vote_request(EPOCH, 2, 1, 2, pre_vote=True))
    (answer_,) = bodies(pre_vote, VoteResponse, 2)
    assert isinstance(answer_, VoteResponse) and answer_.vote_granted
    raft.tick(start + 2 * raft.config.retry_backoff_ms + raft.config.election_timeout_ms // 2)
    drain(raft, log)
    assert raft.status().role == "prospective"


def test_an_answer_from_the_leader_cancels_the_campaign() -> None:
    raft, log, request = follower([(1, 2)])
    retry = refuse(raft, log, request)
    assert retry is not None
    retry = refuse(raft, log, retry)
    assert retry is not None  # the follower keeps fetching while it waits to campaign
    step(raft, log, 3, answer(retry, high_watermark=2))
    raft.tick(raft.now_ms + raft.config.fetch_timeout_ms - 1)
    drain(raft, log)
    assert raft.status().role == "follower"


def test_followers_that_time_out_together_campaign_at_spread_out_times() -> None:
    """The split-vote fix: the campaign delay after a fetch timeout is random in [0, T/2)."""
    delays = set()
    for seed in range(20):
        raft = RaftNode(
            node_id=1,
            config=config(),
            log=log_with([(1, 2)]),
            election_state=ElectionState(EPOCH, 3),
            rng=random.Random(seed),
            now_ms=0,
        )
        timed_out_at = raft.config.fetch_timeout_ms
        raft.tick(timed_out_at)
        campaign_at = raft.wake_at_ms()
        assert campaign_at is not None and raft.status().role == "follower"
        delays.add(campaign_at - timed_out_at)
        raft.tick(campaign_at)
        assert raft.status().role == "prospective"
    assert len(delays) > 10
    assert all(0 <= d < raft.config.election_timeout_ms // 2 for d in delays), delays


# --- restarts -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("election", "role"),
    [
        (ElectionState(EPOCH), "unattached"),
        (ElectionState(EPOCH, None, 2), "unattached"),
        (ElectionState(EPOCH, None, 1), "candidate"),
        (ElectionState(EPOCH, 1, 1), "resigned"),
        (ElectionState(EPOCH, 3), "follower"),
    ],
)
def test_restart_roles(election: ElectionState, role: str) -> None:
    raft, _, _ = node(1, election, log_with([(1, 2)]))
    assert raft.status().role == role
    assert raft.election_state == election


def test_a_log_newer_than_the_quorum_state_wins() -> None:
    raft, _, startup = node(1, ElectionState(2, 3), log_with([(1, 2), (4, 1)]))
    assert startup.election_state == ElectionState(4)
    assert raft.status().role == "unattached"


# --- the application interface and the Ready contract ------------------------------------------


def test_proposals_on_a_follower_name_the_leader() -> None:
    raft, _, _ = follower([(1, 2)])
    with pytest.raises(NotLeaderOrFollowerError, match="quorum epoch 5; the leader is 3"):
        raft.propose([b"x"], raft.now_ms)


def idle_leader(**overrides: int) -> tuple[RaftNode, RaftStorage]:
    """A leader whose epoch-start batch (offset 2) a follower has fetched: nothing in flight."""
    raft, log = make_leader(**overrides)
    drain(raft, log)
    step(raft, log, 2, fetch(3, EPOCH))
    assert raft.status().high_watermark == 3
    return raft, log


def test_a_proposal_to_an_idle_leader_is_appended_at_once() -> None:
    raft, log = idle_leader(append_linger_ms=25)
    first = raft.propose([b"a"], raft.now_ms)
    (append,) = merge(drain(raft, log)).log_ops
    assert (append.base_offset, append.end_offset) == (first.base_offset, first.last_offset + 1)  # type: ignore[union-attr]


def test_proposals_behind_an_append_in_flight_share_one_batch() -> None:
    raft, log = idle_leader(append_linger_ms=25)
    start = raft.now_ms
    first = raft.propose([b"a"], start)
    assert merge(drain(raft, log)).log_ops  # appended at once: nothing was in flight
    second = raft.propose([b"b"], start + 1)
    third = raft.propose([b"c", b"d"], start + 10)
    assert (second.base_offset, third.base_offset, third.last_offset) == (
        first.last_offset + 1,
        first.last_offset + 2,
        first.last_offset + 3,
    )
    assert not merge(drain(raft, log)).log_ops  # lingering behind the uncommitted append
    raft.tick(start + 1 + 25)
    (append,) = merge(drain(raft, log)).log_ops
    assert (append.base_offset, append.end_offset) == (second.base_offset, third.last_offset + 1)  # type: ignore[union-attr]


def test_describe_quorum_on_a_non_leader() -> None:
    raft, log, _ = follower([(1, 2)])
    (response,) = bodies(step(raft, log, 999, DescribeQuorumRequest(3)), DescribeQuorumResponse)
    assert isinstance(response, DescribeQuorumResponse)
    assert (response.error, response.leader_id) == (ErrorCode.NOT_LEADER_OR_FOLLOWER, 3)


def test_no_input_between_ready_and_advance() -> None:
    raft, log = make_leader()
    raft.propose([b"x"], raft.now_ms)
    ready = raft.ready()
    with pytest.raises(AssertionError, match="between ready"):
        raft.tick(raft.now_ms)
    with pytest.raises(AssertionError, match="between ready"):
        raft.step(Message(2, 1, fetch(2, 1)), raft.now_ms)
    with pytest.raises(AssertionError, match="twice"):
        raft.ready()
    log.apply(ready)
    raft.advance(ready, flushed_end_offset=log.log_end_offset)
    with pytest.raises(AssertionError, match="not in flight"):
        raft.advance(ready, flushed_end_offset=log.log_end_offset)


def test_snapshots_only_of_applied_state() -> None:
    raft, log = make_leader()
    # Nothing is committed before the LeaderChange batch is: nothing applied, no snapshot.
    with pytest.raises(ValueError, match="applied offset 0"):
        raft.create_snapshot(3, b"state", raft.now_ms)
    fetch_response(raft, log, 2, fetch(3, EPOCH))
    snapshot_id = raft.create_snapshot(3, b"state", raft.now_ms)
    assert snapshot_id == SnapshotId(3, EPOCH)
    with pytest.raises(ValueError, match="exists"):
        raft.create_snapshot(3, b"state", raft.now_ms)


def test_a_leader_stamps_its_batches_with_now_plus_the_record_time_offset() -> None:
    """Timers run on the monotonic `now_ms`; records carry wall-clock time (the shell's offset
    between the two), as Kafka's metadata records do."""
    wall_minus_monotonic = 1_700_000_000_000
    log = log_with([(1, 2)])
    raft = RaftNode(
        node_id=1,
        config=config(),
        log=log,
        election_state=ElectionState(EPOCH, None, 1),
        rng=random.Random(7),
        now_ms=500,
        record_time_offset_ms=wall_minus_monotonic,
    )
    drain(raft, log)
    step(raft, log, 3, VoteResponse(1, ErrorCode.NONE, EPOCH, None, True, False))
    raft.propose([b"x"], raft.now_ms)
    drain(raft, log)
    leader_change, proposed = (read_header(batch) for batch in stored_batches(log)[-2:])
    assert leader_change.is_control and not proposed.is_control
    for header in (leader_change, proposed):
        assert header.max_timestamp == raft.now_ms + wall_minus_monotonic
