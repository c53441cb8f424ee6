"""The in-memory state of each Raft role: what it remembers and which deadlines it keeps.

Roles hold data only. Every transition between them, and every decision taken in them, lives in
`node.py` (h11's rule: one file owns the state machine). Deadlines are absolute `now_ms`
values; None means "no such timer in this role".

Roles (KIP-595 with KIP-996 pre-vote):
- `Unattached`: knows an epoch, no leader; a voter waits for its election timeout, an observer
  asks random voters who the leader is.
- `Prospective`: a voter collecting non-binding pre-votes in its current epoch (memory only).
- `Candidate`: a voter that bumped the epoch and voted for itself, collecting votes.
- `Leader`: accepts proposals, answers Fetch, computes the high watermark.
- `Follower`: fetches from a known leader (voters and observers alike).
- `Resigned`: a former leader telling voters, with EndQuorumEpoch, to elect someone else.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from replog.quorum.raft.messages import FetchRequest
from replog.quorum.raft.snapshot_id import SnapshotId
from replog.quorum.raft.voters import VoteTally


@dataclass(slots=True)
class OutstandingRequest:
    """The one Fetch or FetchSnapshot a fetcher has in flight; a response must match it."""

    correlation_id: int
    destination_id: int
    deadline_ms: int


@dataclass(slots=True)
class Fetching:
    """What every fetching role (Follower, observer-Unattached) keeps about its requests."""

    next_fetch_ms: int
    outstanding: OutstandingRequest | None = None


@dataclass(slots=True)
class Unattached:
    election_deadline_ms: int | None
    fetching: Fetching | None = None  # observers only: leader discovery


@dataclass(slots=True)
class Prospective:
    tally: VoteTally
    election_deadline_ms: int
    resend_ms: int


@dataclass(slots=True)
class Candidate:
    tally: VoteTally
    election_deadline_ms: int
    resend_ms: int
    backoff_until_ms: int | None = None


@dataclass(slots=True)
class SnapshotDownload:
    snapshot_id: SnapshotId
    position: int = 0


@dataclass(slots=True)
class Follower:
    leader_id: int
    fetch_deadline_ms: int
    fetching: Fetching
    # KIP-996: a follower that heard from its leader in this epoch refuses pre-votes.
    has_fetched_from_leader: bool = False
    download: SnapshotDownload | None = None
    # Set once the leader is taken for lost (fetch timeout, refused connections, its
    # EndQuorumEpoch): the follower campaigns at this time unless the leader answers first.
    campaign_at_ms: int | None = None
    # Consecutive Fetches the transport could not even deliver to the leader (refused).
    unreachable_fetches: int = 0


@dataclass(slots=True)
class ReplicaProgress:
    """The leader's view of one replica in the current epoch."""

    end_offset: int | None = None
    last_fetch_ms: int | None = None
    last_caught_up_ms: int | None = None


@dataclass(slots=True)
class ParkedFetch:
    """A Fetch with nothing to return yet, answered when data arrive or its deadline passes."""

    source_id: int
    request: FetchRequest
    deadline_ms: int


@dataclass(slots=True)
class PendingRecord:
    timestamp_ms: int
    value: bytes


@dataclass(slots=True)
class Leader:
    epoch_start_offset: int
    granting_voters: frozenset[int]
    check_quorum_deadline_ms: int | None
    begin_epoch_resend_ms: int
    # The high watermark this leader exposes: None until an entry of its own epoch commits.
    high_watermark: int | None = None
    voters: dict[int, ReplicaProgress] = field(default_factory=dict)
    observers: dict[int, ReplicaProgress] = field(default_factory=dict)
    # Voters that fetched since the check-quorum timer last restarted.
    voters_heard: set[int] = field(default_factory=set)
    # Voters that have not yet acknowledged this epoch (BeginQuorumEpoch is resent to them).
    voters_unaware: set[int] = field(default_factory=set)
    parked: dict[int, ParkedFetch] = field(default_factory=dict)
    # Proposals waiting for the linger deadline, to be appended as one batch.
    accumulator: list[PendingRecord] = field(default_factory=list)
    accumulator_bytes: int = 0
    linger_deadline_ms: int | None = None


@dataclass(slots=True)
class Resigned:
    election_deadline_ms: int
    preferred_successors: tuple[int, ...]
    voters_unaware: set[int]
    resend_ms: int


Role = Unattached | Prospective | Candidate | Leader | Follower | Resigned
