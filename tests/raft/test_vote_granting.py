"""The vote-granting matrix (KIP-595 votes, KIP-996 pre-votes), one case per role and request.

Node 1 of voters {1, 2, 3} sits in quorum epoch 5 with a log whose last epoch is 3 and whose end
offset is 4; voter 2 asks for its vote. Each row says whether the vote is granted, for a request
in the same epoch, with a log at least as up to date (ok) or behind.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from raft_helpers import bodies, log_with, node, step, vote_request

from replog.quorum.raft import ElectionState, RaftNode
from replog.quorum.raft.messages import ErrorCode, FetchRequest, FetchResponse, VoteResponse
from replog.server.raft.raft_storage import RaftStorage

EPOCH = 5
LAST_EPOCH, END = 3, 4
Setup = Callable[[], tuple[RaftNode, RaftStorage]]


def _log() -> RaftStorage:
    return log_with([(1, 2), (LAST_EPOCH, 2)])


def unattached() -> tuple[RaftNode, RaftStorage]:
    raft, log, _ = node(1, ElectionState(EPOCH), _log())
    return raft, log


def voted_for_2() -> tuple[RaftNode, RaftStorage]:
    raft, log, _ = node(1, ElectionState(EPOCH, None, 2), _log())
    return raft, log


def voted_for_3() -> tuple[RaftNode, RaftStorage]:
    raft, log, _ = node(1, ElectionState(EPOCH, None, 3), _log())
    return raft, log


def follower_not_fetched() -> tuple[RaftNode, RaftStorage]:
    raft, log, _ = node(1, ElectionState(EPOCH, 3), _log())
    return raft, log


def follower_fetched() -> tuple[RaftNode, RaftStorage]:
    raft, log, startup = node(1, ElectionState(EPOCH, 3), _log())
    (fetch,) = bodies(startup, FetchRequest, 3)
    assert isinstance(fetch, FetchRequest)
    response = FetchResponse(
        fetch.correlation_id, ErrorCode.NONE, EPOCH, 3, END, LAST_EPOCH, high_watermark=2
    )
    step(raft, log, 3, response)
    return raft, log


def candidate() -> tuple[RaftNode, RaftStorage]:
    raft, log, _ = node(1, ElectionState(EPOCH, None, 1), _log())
    assert raft.status().role == "candidate"
    return raft, log


def prospective() -> tuple[RaftNode, RaftStorage]:
    raft, log = unattached()
    raft.tick(2000)  # past any election timeout in [1000, 2000)
    assert raft.status().role == "prospective"
    return raft, log


def leader() -> tuple[RaftNode, RaftStorage]:
    raft, log = candidate()
    step(raft, log, 3, VoteResponse(1, ErrorCode.NONE, EPOCH, None, True, False))
    assert raft.status().role == "leader"
    return raft, log


def resigned() -> tuple[RaftNode, RaftStorage]:
    raft, log, _ = node(1, ElectionState(EPOCH, 1, 1), _log())
    assert raft.status().role == "resigned"
    return raft, log


# role: (vote, log ok), (vote, log behind), (pre-vote, log ok), (pre-vote, log behind)
MATRIX: dict[str, tuple[Setup, tuple[bool, bool, bool, bool]]] = {
    "unattached": (unattached, (True, False, True, False)),
    "unattached voted for the candidate": (voted_for_2, (True, False, True, False)),
    "unattached voted for another": (voted_for_3, (False, False, True, False)),
    "follower that has not fetched": (follower_not_fetched, (False, False, True, False)),
    "follower that fetched": (follower_fetched, (False, False, False, False)),
    "prospective": (prospective, (True, False, True, False)),
    "candidate": (candidate, (False, False, True, False)),
    "leader": (leader, (False, False, False, False)),  # its log is (5, 5) by now
    "resigned": (resigned, (False, False, True, False)),
}
CASES = [
    pytest.param(
        setup,
        pre_vote,
        log_ok,
        expected[2 * pre_vote + (not log_ok)],
        id=f"{role}-{'pre-vote' if pre_vote else 'vote'}-{'log ok' if log_ok else 'log behind'}",
    )
    for role, (setup, expected) in MATRIX.items()
    for pre_vote in (False, True)
    for log_ok in (True, False)
]


def ask(
    raft: RaftNode,
    log: RaftStorage,
    quorum_epoch: int,
    *,
    pre_vote: bool,
    log_ok: bool,
    candidate_id: int = 2,
) -> tuple[VoteResponse, ElectionState | None]:
    # A new leader has appended its LeaderChange batch: compare with the log as it is now.
    # A candidate's last epoch is below the epoch it asks in (a prospective's at most equal):
    # against the leader's (5, 5) a real vote in epoch 5 can only be behind.
    status = raft.status()
    end = status.log_end_offset
    last_epoch = min(status.last_quorum_epoch, quorum_epoch if pre_vote else quorum_epoch - 1)
    last = (last_epoch, end if log_ok else end - 1)
    ready = step(
        raft, log, candidate_id, vote_request(quorum_epoch, candidate_id, *last, pre_vote=pre_vote)
    )
    (response,) = bodies(ready, VoteResponse, candidate_id)
    assert isinstance(response, VoteResponse)
    return response, ready.election_state


@pytest.mark.parametrize(("setup", "pre_vote", "log_ok", "granted"), CASES)
def test_same_epoch_matrix(setup: Setup, pre_vote: bool, log_ok: bool, granted: bool) -> None:
    raft, log = setup()
    before = raft.election_state
    response, persisted = ask(raft, log, EPOCH, pre_vote=pre_vote, log_ok=log_ok)
    assert response.error == ErrorCode.NONE
    assert response.vote_granted is granted
    assert response.pre_vote is pre_vote
    if granted and not pre_vote and before.voted_id is None:
        # The vote is in the same Ready as the response: persisted before it is sent.
        assert persisted == ElectionState(EPOCH, None, 2)
    else:
        assert persisted is None, "a refused vote or a pre-vote changes nothing durable"


@pytest.mark.parametrize("setup", [s for s, _ in MATRIX.values()], ids=list(MATRIX))
@pytest.mark.parametrize("pre_vote", [False, True], ids=["vote", "pre-vote"])
def test_higher_epoch_moves_to_it_and_grants_an_up_to_date_log(
    setup: Setup, pre_vote: bool
) -> None:
    raft, log = setup()
    response, persisted = ask(raft, log, EPOCH + 1, pre_vote=pre_vote, log_ok=True)
    assert response.vote_granted
    assert response.quorum_epoch == EPOCH + 1
    expected_vote = None if pre_vote else 2
    assert persisted == ElectionState(EPOCH + 1, None, expected_vote)
    assert raft.status().role == "unattached"


@pytest.mark.parametrize("setup", [s for s, _ in MATRIX.values()], ids=list(MATRIX))
def test_lower_epoch_is_fenced(setup: Setup) -> None:
    raft, log = setup()
    response, persisted = ask(raft, log, EPOCH - 1, pre_vote=False, log_ok=True)
    assert (response.error, response.vote_granted, response.quorum_epoch) == (
        ErrorCode.FENCED_LEADER_EPOCH,
        False,
        EPOCH,
    )
    assert persisted is None


@pytest.mark.parametrize(
    ("quorum_epoch", "last_epoch", "last_offset", "pre_vote"),
    [
        (EPOCH, -1, 4, False),  # negative last epoch
        (EPOCH, 3, -1, False),  # negative last offset
        (EPOCH, EPOCH, 4, False),  # a candidate's last epoch is below its bumped epoch
        (EPOCH, EPOCH + 1, 4, True),  # a prospective's last epoch is at most its epoch
    ],
)
def test_malformed_requests_are_invalid(
    quorum_epoch: int, last_epoch: int, last_offset: int, pre_vote: bool
) -> None:
    raft, log = unattached()
    request = vote_request(quorum_epoch, 2, last_epoch, last_offset, pre_vote=pre_vote)
    (response,) = bodies(step(raft, log, 2, request), VoteResponse)
    assert isinstance(response, VoteResponse)
    assert (response.error, response.vote_granted) == (ErrorCode.INVALID_REQUEST, False)


def test_a_prevote_with_the_same_epoch_and_last_epoch_is_valid() -> None:
    raft, log = unattached()
    response, _ = ask(raft, log, EPOCH, pre_vote=True, log_ok=True)
    assert response.error == ErrorCode.NONE


def test_log_comparison_is_lexicographic_on_epoch_then_offset() -> None:
    for last, granted in [((4, 1), True), ((3, 4), True), ((3, 3), False), ((2, 99), False)]:
        raft, log = unattached()
        ready = step(raft, log, 2, vote_request(EPOCH, 2, *last))
        (response,) = bodies(ready, VoteResponse)
        assert isinstance(response, VoteResponse)
        assert response.vote_granted is granted, last


def test_only_one_vote_per_epoch() -> None:
    raft, log = unattached()
    first, _ = ask(raft, log, EPOCH, pre_vote=False, log_ok=True, candidate_id=2)
    second, persisted = ask(raft, log, EPOCH, pre_vote=False, log_ok=True, candidate_id=3)
    assert first.vote_granted and not second.vote_granted
    assert persisted is None
    assert raft.election_state == ElectionState(EPOCH, None, 2)


def test_non_voters_never_vote_and_are_never_voted_for() -> None:
    raft, log = unattached()
    response, _ = ask(raft, log, EPOCH, pre_vote=False, log_ok=True, candidate_id=9)
    assert not response.vote_granted
    observer, observer_log, _ = node(101, ElectionState(EPOCH), _log())
    response, _ = ask(observer, observer_log, EPOCH, pre_vote=False, log_ok=True)
    assert not response.vote_granted
