"""RaftNode: the KRaft-style Raft state machine of one quorum node, with no I/O.

Inputs are `step(message, now_ms)`, `tick(now_ms)`, `request_failed(...)`,
`propose(values, now_ms)`, `resign(now_ms)`, `create_snapshot(...)` and
`delete_log_prefix(...)`. Outputs come out of `ready()` as a `Ready`
(see `ready.py` for the shell's contract: persist, then send, then `advance`, then apply).

Rules:
1. Every role transition and every protocol decision lives in this file; `roles.py` holds data.
2. A transition that changes (quorum epoch, leader, vote) updates `ElectionState` first; the
   shell persists it before sending anything of the same `Ready`. Prospective and Resigned are
   memory-only and persist nothing.
3. A higher epoch seen in any request or response moves the node to that epoch at once: to
   Follower when the message names a leader, else to Unattached. A message from a lower epoch is
   answered with FENCED_LEADER_EPOCH (requests) or ignored (responses).
4. Votes (KIP-595): one per epoch, only to a voter whose (last epoch, log end offset) is at least
   ours, only while we know no leader. Pre-votes (KIP-996) are non-binding and persist nothing;
   a follower that fetched from its leader in this epoch refuses them, so a voter returning from
   a partition cannot depose a healthy leader.
5. Only a Prospective that won a majority of pre-votes becomes Candidate (epoch + 1); only a
   Candidate that won a majority of votes becomes Leader.
6. A new leader appends a LeaderChange control batch at its epoch start offset and exposes a high
   watermark only once that offset is committed. The high watermark is the offset that a
   majority of voters reached, counting a voter's entries (the leader's included) only once they
   are flushed: a follower's Fetch offset is flushed by the Ready contract, the leader's own end
   is what `advance` reports flushed. The high watermark never decreases. After a start it is
   the latest snapshot's end, a lower bound, until learned in this run (`high_watermark_known`:
   the leader's Fetch answer, or the leader's own epoch start commit); nothing waits for that.
7. A leader that heard no Fetch from a majority of voters within 1.5 x fetch timeout resigns
   (check-quorum). A follower takes its leader for lost when it heard nothing from it within the
   fetch timeout, when two Fetches in a row could not be delivered to it (refused: the process is
   gone, so waiting out the fetch timeout would only delay the failover), or on its
   EndQuorumEpoch. From then on it grants pre-votes; a voter becomes Prospective after a random
   delay in [0, T/2) (EndQuorumEpoch: the successor ranking's delay instead) so that followers
   that lost the leader together do not split the vote; an observer forgets the leader and asks
   the voters again. A valid answer from the leader meanwhile cancels all of this.
8. Followers truncate only on the leader's DIVERGING answer (`divergence.py`) and never below
   their high watermark; a fetcher below the leader's log start downloads the snapshot instead.
9. A request the shell could not deliver or got no answer to (`request_failed`) is retried after
   the retry backoff instead of a request timeout: Fetch after the backoff (to the leader, or
   to a random voter while none is known), votes and EndQuorumEpoch to the voters that have not
   answered. BeginQuorumEpoch is resent only by its own timer.

Theory of operation:
- Pull-based replication (KIP-595): there is no AppendEntries. A follower sends Fetch(log end
  offset, last epoch); the leader validates that position against its own log, answers with
  records, a diverging epoch, or a snapshot id, and learns the follower's progress from the fetch
  offset. An empty answer is parked (long poll) until data arrives or the wait ends; one whose
  only news is a higher high watermark waits at most `high_watermark_linger_ms`, so that the
  next append, usually close behind a commit, answers it with records and high watermark
  together. A leader answers parked fetches in the Ready of its append, before its fsync. It
  parks one Fetch per fetcher: a second one answers the first, as its expiry would.
- Request/response matching: a fetcher keeps one Fetch in flight and accepts only the response
  whose correlation id matches it; the response also echoes the fetch position, so a stale copy
  from an earlier run of this node is recognised too. Lost requests are retried after
  `request_timeout_ms`; the network may drop, duplicate and reorder messages.
- `_poll(now_ms)` runs the current role's timers after every input; `wake_at_ms` is the earliest
  deadline of the current role.
- Pending log changes live in a `LogTail` until the shell applied them, so each decision sees
  the log as it will be when the messages of the same `Ready` are sent.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from replog.errors import (
    CorruptRecordError,
    InvalidRecordError,
    MessageSizeTooLargeError,
    NotLeaderOrFollowerError,
)
from replog.quorum.raft.config import RaftConfig
from replog.quorum.raft.control_records import LeaderChangeRecord, leader_change_batch
from replog.quorum.raft.divergence import (
    DivergingPosition,
    FetchPosition,
    SnapshotPosition,
    ValidPosition,
    truncation_offset,
    validate_fetch_position,
)
from replog.quorum.raft.election_state import ElectionState
from replog.quorum.raft.log_tail import LogTail
from replog.quorum.raft.log_view import EpochStart, RaftLog
from replog.quorum.raft.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    DescribeQuorumRequest,
    DescribeQuorumResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    ErrorCode,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    Message,
    RaftBody,
    ReplicaDescription,
    VoteRequest,
    VoteResponse,
)
from replog.quorum.raft.ready import (
    ApplyItem,
    CommittedBatch,
    LeaderChange,
    LoadSnapshot,
    Ready,
)
from replog.quorum.raft.roles import (
    Candidate,
    Fetching,
    Follower,
    Leader,
    OutstandingRequest,
    ParkedFetch,
    PendingRecord,
    Prospective,
    ReplicaProgress,
    Resigned,
    Role,
    SnapshotDownload,
    Unattached,
)
from replog.quorum.raft.snapshot_id import SnapshotId
from replog.quorum.raft.timers import RandomSource, election_backoff_ms, election_timeout_ms
from replog.quorum.raft.voters import (
    VoteResult,
    VoteTally,
    end_quorum_epoch_delay_ms,
    majority_size,
    offset_reached_by_majority,
)
from replog.record import (
    RECORD_BATCH_OVERHEAD,
    build_batch,
    iter_frames,
    read_header,
    validate_batch,
)

# A record's framing overhead in a batch is at most this many bytes beyond its value (varints
# for length, attributes, deltas, key and header count); used to bound batch sizes up front.
_RECORD_OVERHEAD_MAX = 24
# How many role transitions one `_poll` may chain (e.g. Follower -> Prospective -> Candidate ->
# Leader for a single voter); more would be a transition loop.
_TRANSITIONS_PER_POLL_MAX = 8
# Two refusals in a row (retry backoff apart), not one: a single refusal may be a connection
# reset by a restart of the transport, the second means nobody listens at the leader's port.
UNREACHABLE_FETCHES_TO_LOSE_LEADER = 2


@dataclass(frozen=True, slots=True)
class ProposeResult:
    """Where a proposal went: offsets [base_offset, last_offset] in `quorum_epoch`.

    It is committed once a committed batch at `base_offset` carries `quorum_epoch`; if a
    committed batch at that offset carries another epoch, the proposal was lost.
    """

    quorum_epoch: int
    base_offset: int
    last_offset: int


@dataclass(frozen=True, slots=True)
class NodeStatus:
    """A read-only snapshot of a node's state, for tests, the CLI and DescribeQuorum."""

    node_id: int
    is_voter: bool
    role: str
    quorum_epoch: int
    leader_id: int | None
    voted_id: int | None
    high_watermark: int
    log_start_offset: int
    log_end_offset: int
    last_quorum_epoch: int
    flushed_end_offset: int
    applied_offset: int
    epoch_start_offset: int | None
    # Whether `high_watermark` was learned in this run (see RaftNode.__init__); before, it is
    # only the latest snapshot's end, a lower bound.
    high_watermark_known: bool


class RaftNode:
    """One quorum node's Raft state machine (module docstring); thread-unsafe, no I/O."""

    def __init__(
        self,
        *,
        node_id: int,
        config: RaftConfig,
        log: RaftLog,
        election_state: ElectionState,
        rng: RandomSource,
        now_ms: int,
        record_time_offset_ms: int = 0,
    ) -> None:
        """Start from a recovered log and the persisted election state (all written, flushed).

        `election_state` is what the quorum-state file holds (`ElectionState(0)` for a new node).
        `record_time_offset_ms` is added to `now_ms` to stamp the batches this node writes as
        leader: the shell passes its wall clock minus its monotonic one, so the records carry
        wall-clock time, as Kafka's do, while every timer runs on the monotonic clock.
        """
        self.node_id = node_id
        self.config = config
        self._voter_ids = config.voter_ids
        self._is_voter = node_id in self._voter_ids
        self._rng = rng
        self._now_ms = now_ms
        self._record_time_offset_ms = record_time_offset_ms
        self._tail = LogTail(log)
        self._election = election_state
        self._election_dirty = False
        self._messages: list[Message] = []
        self._in_flight: Ready | None = None
        self._next_correlation_id = 1
        self._election_retries = 0
        self._announced: LeaderChange | None = None
        self._flushed_end_offset = log.log_end_offset
        self._high_watermark = 0
        # Kafka's high watermark is unknown after a start until the leader's first answer (or,
        # on the leader, its epoch start's commit). Ours starts at the latest snapshot's end,
        # which is committed but may be far behind: this flag says whether the value was
        # learned in this run, for a state machine that must not take it for the current one
        # (the broker's metadata loader). Nothing in the core waits for it.
        self._high_watermark_known = False
        self._applied_offset = 0
        self._snapshot_to_load: SnapshotId | None = None
        self._snapshot_end_offset_max = 0
        self._handlers: dict[type, Callable[[int, Any, int], None]] = {
            VoteRequest: self._on_vote_request,
            VoteResponse: self._on_vote_response,
            BeginQuorumEpochRequest: self._on_begin_quorum_epoch_request,
            BeginQuorumEpochResponse: self._on_begin_quorum_epoch_response,
            EndQuorumEpochRequest: self._on_end_quorum_epoch_request,
            EndQuorumEpochResponse: self._on_end_quorum_epoch_response,
            FetchRequest: self._on_fetch_request,
            FetchResponse: self._on_fetch_response,
            FetchSnapshotRequest: self._on_fetch_snapshot_request,
            FetchSnapshotResponse: self._on_fetch_snapshot_response,
            DescribeQuorumRequest: self._on_describe_quorum_request,
        }
        self._load_latest_snapshot()
        self._role: Role = self._initial_role(now_ms)
        self._poll(now_ms)

    def _load_latest_snapshot(self) -> None:
        """Start the state machine from the latest snapshot, restarting the log at it if the log
        ends before it or disagrees with it (unflushed data lost in a crash)."""
        snapshots = self._tail.written.snapshot_ids()
        if not snapshots:
            return
        latest = snapshots[-1]
        summary = self._tail.summary()
        if (
            latest.end_offset > summary.log_end_offset
            or summary.quorum_epoch_at(latest.end_offset - 1) != latest.quorum_epoch
        ):
            self._tail.install_snapshot(latest)
        # A snapshot only ever holds committed data.
        self._high_watermark = latest.end_offset
        self._applied_offset = latest.end_offset
        self._snapshot_to_load = latest

    def _initial_role(self, now_ms: int) -> Role:
        """The role after a restart, from the persisted election state (Kafka's rules)."""
        election = self._election
        log_epoch = self._tail.summary().last_quorum_epoch
        if election.quorum_epoch < log_epoch:
            self._set_election(ElectionState(log_epoch))
            return self._unattached_role(now_ms)
        if self._voter_ids == {self.node_id}:
            # A lone voter elects itself; a placeholder role until the first poll.
            return Unattached(election_deadline_ms=now_ms)
        if election.leader_id == self.node_id and self._is_voter:
            # We led this epoch and may have lost unflushed entries of it: never lead it again
            # and never vote in it for someone else.
            return self._resigned_role(now_ms, preferred_successors=())
        if election.voted_id == self.node_id and self._is_voter:
            return self._candidate_role(now_ms)
        if election.leader_id is not None:
            return self._follower_role(election.leader_id, now_ms)
        return self._unattached_role(now_ms)

    # --- public API: inputs -----------------------------------------------------------------------

    def step(self, message: Message, now_ms: int) -> None:
        """Handle one request or response addressed to this node."""
        self._enter(now_ms)
        if message.destination_id != self.node_id or message.source_id == self.node_id:
            return
        handler = self._handlers.get(type(message.body))
        # A DescribeQuorumResponse is for clients, never for a node: it has no handler.
        if handler is not None:
            handler(message.source_id, message.body, now_ms)
        self._poll(now_ms)

    def tick(self, now_ms: int) -> None:
        """Let time pass: run every timer due at `now_ms`."""
        self._enter(now_ms)
        self._poll(now_ms)

    def request_failed(
        self, destination_id: int, correlation_id: int, *, unreachable: bool, now_ms: int
    ) -> None:
        """The shell got no answer to a request of ours: it timed out, or (`unreachable`) the
        destination refused the connection or is going away. Without this input the core
        would wait a request timeout for an answer that cannot come (module Rule 9)."""
        self._enter(now_ms)
        role = self._role
        fetching = self._take_outstanding(destination_id, correlation_id)
        if fetching is not None:
            fetching.next_fetch_ms = now_ms + self.config.retry_backoff_ms
            if isinstance(role, Follower) and role.leader_id == destination_id and unreachable:
                role.unreachable_fetches += 1
                if role.unreachable_fetches >= UNREACHABLE_FETCHES_TO_LOSE_LEADER:
                    self._lose_leader(role, now_ms, self._campaign_delay_ms())
        elif isinstance(role, Prospective | Candidate | Resigned):
            # Retry sooner than the request timeout; unanswered voters only.
            role.resend_ms = min(role.resend_ms, now_ms + self.config.retry_backoff_ms)
        self._poll(now_ms)

    def propose(self, values: Sequence[bytes], now_ms: int) -> ProposeResult:
        """Append `values` as records of one batch (leader only): at once when every earlier
        append is committed, else with the proposals that follow, once the earlier appends
        commit or the linger time passes, whichever is first.

        Raises `NotLeaderOrFollowerError` naming the current leader and epoch on a non-leader.
        """
        self._enter(now_ms)
        leader = self._role
        if not isinstance(leader, Leader):
            raise NotLeaderOrFollowerError(
                f"node {self.node_id} is not the quorum leader in quorum epoch "
                f"{self._election.quorum_epoch}; the leader is "
                f"{'unknown' if self._known_leader() is None else self._known_leader()}"
            )
        if not values:
            raise ValueError("propose needs at least one value")
        size = sum(len(value) + _RECORD_OVERHEAD_MAX for value in values)
        if size + RECORD_BATCH_OVERHEAD > self.config.append_batch_bytes_max:
            raise MessageSizeTooLargeError(
                f"proposal of {len(values)} records ({size} bytes) exceeds the batch limit "
                f"{self.config.append_batch_bytes_max}"
            )
        if (
            leader.accumulator
            and leader.accumulator_bytes + size + RECORD_BATCH_OVERHEAD
            > self.config.append_batch_bytes_max
        ):
            self._drain_accumulator(leader)
        base_offset = self._tail.summary().log_end_offset + len(leader.accumulator)
        stamp = now_ms + self._record_time_offset_ms
        leader.accumulator.extend(PendingRecord(stamp, value) for value in values)
        leader.accumulator_bytes += size
        if leader.linger_deadline_ms is None:
            # Linger only to group proposals behind an append still in flight (group commit):
            # a proposal to an idle leader is appended at once, so one proposer waits for no
            # timer. Under load the proposals gather until the append in flight commits (or the
            # linger time passes), then go as one batch.
            linger_ms = 0 if self._everything_committed() else self.config.append_linger_ms
            leader.linger_deadline_ms = now_ms + linger_ms
        self._poll(now_ms)
        return ProposeResult(
            self._election.quorum_epoch, base_offset, base_offset + len(values) - 1
        )

    def resign(self, now_ms: int) -> bool:
        """Give up leadership (graceful shutdown, or the state machine's request).

        Returns False, changing nothing, when this node is not the leader.
        """
        self._enter(now_ms)
        if not isinstance(self._role, Leader):
            return False
        self._become_resigned(now_ms)
        self._poll(now_ms)
        return True

    def create_snapshot(self, end_offset: int, data: bytes, now_ms: int) -> SnapshotId:
        """Ask the shell to store `data`, the state machine's state after every committed
        offset below `end_offset` (a batch boundary it has applied), as a snapshot."""
        self._enter(now_ms)
        summary = self._tail.summary()
        snapshots = self._tail.written.snapshot_ids()
        newest = max(self._snapshot_end_offset_max, snapshots[-1].end_offset if snapshots else 0)
        if end_offset <= newest:
            raise ValueError(f"a snapshot ending at offset {newest} >= {end_offset} exists")
        if not summary.log_start_offset < end_offset <= self._applied_offset:
            raise ValueError(
                f"snapshot end offset {end_offset} is outside (log start "
                f"{summary.log_start_offset}, applied offset {self._applied_offset}]"
            )
        snapshot_id = SnapshotId(end_offset, summary.quorum_epoch_at(end_offset - 1))
        self._tail.write_snapshot(snapshot_id, data)
        self._snapshot_end_offset_max = end_offset
        return snapshot_id

    def delete_log_prefix(self, snapshot_id: SnapshotId, now_ms: int) -> None:
        """Move the log start offset up to a frozen snapshot's end (retention)."""
        self._enter(now_ms)
        if snapshot_id not in self._tail.written.snapshot_ids():
            raise ValueError(f"snapshot {snapshot_id} is not frozen on this node")
        summary = self._tail.summary()
        if snapshot_id.end_offset <= summary.log_start_offset:
            return
        if snapshot_id.end_offset > self._applied_offset:
            raise ValueError(f"snapshot {snapshot_id} is beyond the applied offset")
        self._tail.delete_prefix(snapshot_id)

    # --- public API: outputs ----------------------------------------------------------------------

    def has_ready(self) -> bool:
        """Whether `ready()` has anything to hand out."""
        return (
            self._election_dirty
            or self._tail.has_ops()
            or bool(self._messages)
            or self._snapshot_to_load is not None
            or self._applied_offset < self._committed_bound()
            or self._leader_change_due() is not None
        )

    def wake_at_ms(self) -> int | None:
        """The earliest deadline of the current role: call `tick` then (None: no timer)."""
        role = self._role
        deadlines: list[int | None] = []
        if isinstance(role, Unattached):
            deadlines.append(role.election_deadline_ms)
            if role.fetching is not None:
                deadlines.append(_fetching_deadline(role.fetching))
        elif isinstance(role, Prospective):
            deadlines += [role.election_deadline_ms, role.resend_ms]
        elif isinstance(role, Candidate):
            if role.backoff_until_ms is not None:
                deadlines.append(role.backoff_until_ms)
            else:
                deadlines += [role.election_deadline_ms, role.resend_ms]
        elif isinstance(role, Leader):
            deadlines += [role.check_quorum_deadline_ms, role.linger_deadline_ms]
            if role.voters_unaware:
                deadlines.append(role.begin_epoch_resend_ms)
            deadlines += [parked.deadline_ms for parked in role.parked.values()]
        elif isinstance(role, Follower):
            campaign = (
                role.fetch_deadline_ms if role.campaign_at_ms is None else role.campaign_at_ms
            )
            deadlines += [campaign, _fetching_deadline(role.fetching)]
        else:
            deadlines.append(role.election_deadline_ms)
            if role.voters_unaware:
                deadlines.append(role.resend_ms)
        known = [deadline for deadline in deadlines if deadline is not None]
        return min(known) if known else None

    def ready(self) -> Ready:
        """Everything to persist, send and apply now; call `advance` once it is done."""
        assert self._in_flight is None, "ready() twice without advance()"
        to_apply = self._collect_to_apply()
        ops = self._tail.take_ops()
        flush_log = bool(ops) and self._is_voter
        # Only a leader may send before flushing: it counts its own entries once flushed, and
        # its messages promise nothing about its log (a Fetch offset, which it could have
        # queued as a follower earlier in this Ready, would promise that it is flushed).
        relaxed = isinstance(self._role, Leader) and not any(
            isinstance(message.body, FetchRequest | FetchSnapshotRequest)
            for message in self._messages
        )
        ready = Ready(
            election_state=self._election if self._election_dirty else None,
            log_ops=ops,
            flush_log=flush_log,
            messages=tuple(self._messages),
            to_apply=to_apply,
            high_watermark=self._high_watermark,
            wake_at_ms=self.wake_at_ms(),
            flush_before_send=flush_log and not relaxed,
        )
        self._election_dirty = False
        self._messages = []
        self._in_flight = ready
        return ready

    def advance(self, ready: Ready, *, flushed_end_offset: int) -> None:
        """The shell did what `ready` asked; the log is flushed up to `flushed_end_offset`."""
        assert ready is self._in_flight, "advance() for a Ready that is not in flight"
        self._in_flight = None
        self._tail.applied()
        written_end = self._tail.written.log_end_offset
        assert flushed_end_offset <= written_end, (flushed_end_offset, written_end)
        self._flushed_end_offset = flushed_end_offset
        leader = self._role
        if isinstance(leader, Leader):
            # No parked fetch waits for the written log: each append answered them with its
            # pending bytes already (`_drain_accumulator`).
            self._update_leader_high_watermark(leader)

    def status(self) -> NodeStatus:
        summary = self._tail.summary()
        role = self._role
        return NodeStatus(
            node_id=self.node_id,
            is_voter=self._is_voter,
            role=self.role,
            quorum_epoch=self._election.quorum_epoch,
            leader_id=self._known_leader(),
            voted_id=self._election.voted_id,
            high_watermark=self._high_watermark,
            log_start_offset=summary.log_start_offset,
            log_end_offset=summary.log_end_offset,
            last_quorum_epoch=summary.last_quorum_epoch,
            flushed_end_offset=self._flushed_end_offset,
            applied_offset=self._applied_offset,
            epoch_start_offset=role.epoch_start_offset if isinstance(role, Leader) else None,
            high_watermark_known=self._high_watermark_known,
        )

    def learned_high_watermark(self) -> int | None:
        """`status().high_watermark` once `high_watermark_known`, else None; without building
        the whole status (a broker's metadata follower asks every few milliseconds)."""
        return self._high_watermark if self._high_watermark_known else None

    @property
    def leader_id(self) -> int | None:
        """The leader this node knows now (itself when it leads); None if none."""
        return self._known_leader()

    @property
    def role(self) -> str:
        """The current role's name, as `status().role` says it ("leader", "follower", ...)."""
        return type(self._role).__name__.lower()

    @property
    def now_ms(self) -> int:
        """The latest time this node was given."""
        return self._now_ms

    @property
    def election_state(self) -> ElectionState:
        """The election state as decided (persisted once the next Ready is processed)."""
        return self._election

    # --- bookkeeping ------------------------------------------------------------------------------

    def _enter(self, now_ms: int) -> None:
        assert self._in_flight is None, "input between ready() and advance()"
        assert now_ms >= self._now_ms, f"time went back from {self._now_ms} to {now_ms}"
        self._now_ms = now_ms

    def _correlation_id(self) -> int:
        correlation_id = self._next_correlation_id
        self._next_correlation_id += 1
        return correlation_id

    def _send(self, destination_id: int, body: RaftBody) -> None:
        self._messages.append(Message(self.node_id, destination_id, body))

    def _set_election(self, successor: ElectionState) -> None:
        problem = self._election.successor_problem(successor)
        assert problem is None, f"node {self.node_id}: illegal election state change: {problem}"
        if successor != self._election:
            self._election = successor
            self._election_dirty = True

    def _known_leader(self) -> int | None:
        if isinstance(self._role, Resigned):
            return None
        return self._election.leader_id

    def _set_role(self, role: Role) -> None:
        """Leave the current role (answer what it owes) and enter `role`."""
        old = self._role
        self._role = role
        if isinstance(old, Leader):
            # Answered after the switch, so that the errors name what we know now.
            for parked in old.parked.values():
                self._send(
                    parked.source_id,
                    self._fetch_error(parked.request, ErrorCode.NOT_LEADER_OR_FOLLOWER),
                )
            old.parked.clear()
        if isinstance(old, Follower) and old.download is not None:
            self._tail.abort_snapshot(old.download.snapshot_id)

    # --- role constructors and transitions --------------------------------------------------------

    def _unattached_role(self, now_ms: int) -> Unattached:
        if self._is_voter:
            return Unattached(
                now_ms + election_timeout_ms(self._rng, self.config.election_timeout_ms)
            )
        return Unattached(None, Fetching(next_fetch_ms=now_ms))

    def _follower_role(self, leader_id: int, now_ms: int) -> Follower:
        return Follower(
            leader_id=leader_id,
            fetch_deadline_ms=now_ms + self.config.fetch_timeout_ms,
            fetching=Fetching(next_fetch_ms=now_ms),
        )

    def _candidate_role(self, now_ms: int) -> Candidate:
        tally = VoteTally(self._voter_ids, self.node_id)
        timeout = election_timeout_ms(self._rng, self.config.election_timeout_ms)
        return Candidate(tally, now_ms + timeout, resend_ms=now_ms)

    def _resigned_role(self, now_ms: int, preferred_successors: tuple[int, ...]) -> Resigned:
        timeout = election_timeout_ms(self._rng, self.config.election_timeout_ms)
        return Resigned(
            election_deadline_ms=now_ms + timeout,
            preferred_successors=preferred_successors,
            voters_unaware=set(self._voter_ids - {self.node_id}),
            resend_ms=now_ms,
        )

    def _become_unattached(self, quorum_epoch: int, now_ms: int) -> None:
        if quorum_epoch > self._election.quorum_epoch:
            self._set_election(ElectionState(quorum_epoch))
        else:
            assert quorum_epoch == self._election.quorum_epoch
            self._set_election(ElectionState(quorum_epoch, None, self._election.voted_id))
        self._set_role(self._unattached_role(now_ms))

    def _become_follower(self, quorum_epoch: int, leader_id: int, now_ms: int) -> None:
        assert leader_id != self.node_id
        voted = self._election.voted_id if quorum_epoch == self._election.quorum_epoch else None
        self._set_election(ElectionState(quorum_epoch, leader_id, voted))
        self._set_role(self._follower_role(leader_id, now_ms))
        self._election_retries = 0

    def _become_prospective(self, now_ms: int) -> None:
        assert self._is_voter
        timeout = election_timeout_ms(self._rng, self.config.election_timeout_ms)
        tally = VoteTally(self._voter_ids, self.node_id)
        self._set_role(Prospective(tally, now_ms + timeout, resend_ms=now_ms))

    def _become_candidate(self, now_ms: int) -> None:
        assert self._is_voter
        epoch = self._election.quorum_epoch + 1
        self._set_election(ElectionState(epoch, None, self.node_id))
        self._set_role(self._candidate_role(now_ms))

    def _become_leader(self, granting_voters: frozenset[int], now_ms: int) -> None:
        assert self._is_voter
        epoch = self._election.quorum_epoch
        assert self._election.voted_id == self.node_id, self._election
        self._set_election(ElectionState(epoch, self.node_id, self.node_id))
        epoch_start = self._tail.summary().log_end_offset
        others = self._voter_ids - {self.node_id}
        leader = Leader(
            epoch_start_offset=epoch_start,
            granting_voters=granting_voters,
            check_quorum_deadline_ms=(
                None if len(self._voter_ids) == 1 else now_ms + self.config.check_quorum_timeout_ms
            ),
            begin_epoch_resend_ms=now_ms,
            voters={voter: ReplicaProgress() for voter in self._voter_ids},
            voters_unaware=set(others),
        )
        self._set_role(leader)
        self._election_retries = 0
        record = LeaderChangeRecord(
            self.node_id, tuple(sorted(self._voter_ids)), tuple(sorted(granting_voters))
        )
        batch = leader_change_batch(
            record,
            base_offset=epoch_start,
            quorum_epoch=epoch,
            timestamp_ms=now_ms + self._record_time_offset_ms,
        )
        self._tail.append(
            epoch_start, epoch_start + 1, batch, [EpochStart(epoch, epoch_start)], as_leader=True
        )

    def _become_resigned(self, now_ms: int) -> None:
        leader = self._role
        assert isinstance(leader, Leader)
        ranked = sorted(
            (v for v in leader.voters if v != self.node_id),
            key=lambda v: (-(leader.voters[v].end_offset or -1), v),
        )
        self._set_role(self._resigned_role(now_ms, tuple(ranked)))

    def _heard_from_leader(self, role: Follower, now_ms: int) -> None:
        """A valid answer from the leader: it is alive, whatever we suspected."""
        role.fetch_deadline_ms = now_ms + self.config.fetch_timeout_ms
        role.has_fetched_from_leader = True
        role.campaign_at_ms = None
        role.unreachable_fetches = 0

    def _lose_leader(self, role: Follower, now_ms: int, delay_ms: int) -> None:
        """Take the leader for lost (module Rule 7): grant pre-votes from now on and campaign
        after `delay_ms`, unless the leader answers first."""
        role.has_fetched_from_leader = False
        campaign_at = now_ms + delay_ms
        if role.campaign_at_ms is None or campaign_at < role.campaign_at_ms:
            role.campaign_at_ms = campaign_at

    def _campaign_delay_ms(self) -> int:
        """Voters that lost their leader together (they fetched at the same moments) would
        otherwise campaign together and split the vote; a random delay in [0, T/2) lets one
        of them ask first. Observers do not campaign."""
        if not self._is_voter:
            return 0
        return self._rng.randrange(0, max(1, self.config.election_timeout_ms // 2))

    def _observe_epoch(self, quorum_epoch: int, leader_id: int | None, now_ms: int) -> None:
        """Catch up with an epoch (and leader) named by a peer (module Rule 3)."""
        current = self._election.quorum_epoch
        if quorum_epoch > current:
            if leader_id is not None and leader_id != self.node_id:
                self._become_follower(quorum_epoch, leader_id, now_ms)
            else:
                self._become_unattached(quorum_epoch, now_ms)
            return
        if quorum_epoch < current or leader_id is None or leader_id == self.node_id:
            return
        known = self._election.leader_id
        assert known in (None, leader_id), (
            f"node {self.node_id}: two leaders in quorum epoch {current}: {known} and {leader_id}"
        )
        # Learning the leader of our epoch makes us follow it; hearing again of the leader we
        # know changes nothing (a Prospective left it on purpose and keeps campaigning).
        if known is None:
            assert not isinstance(self._role, Leader | Resigned), (self._role, leader_id)
            self._become_follower(current, leader_id, now_ms)

    # --- timers -----------------------------------------------------------------------------------

    def _poll(self, now_ms: int) -> None:
        for _ in range(_TRANSITIONS_PER_POLL_MAX):
            role = self._role
            self._poll_role(now_ms)
            if self._role is role:
                return
        raise AssertionError(f"node {self.node_id}: role transitions do not settle: {self._role}")

    def _poll_role(self, now_ms: int) -> None:
        role = self._role
        if isinstance(role, Unattached):
            deadline = role.election_deadline_ms
            # A lone voter needs no election timeout: nobody else can lead.
            if self._voter_ids == {self.node_id} or (deadline is not None and now_ms >= deadline):
                self._become_prospective(now_ms)
            elif role.fetching is not None:
                self._poll_fetching(role.fetching, None, now_ms)
        elif isinstance(role, Prospective):
            self._poll_prospective(role, now_ms)
        elif isinstance(role, Candidate):
            self._poll_candidate(role, now_ms)
        elif isinstance(role, Leader):
            self._poll_leader(role, now_ms)
        elif isinstance(role, Follower):
            if role.campaign_at_ms is None and now_ms >= role.fetch_deadline_ms:
                self._lose_leader(role, now_ms, self._campaign_delay_ms())
            if role.campaign_at_ms is not None and now_ms >= role.campaign_at_ms:
                if self._is_voter:
                    self._become_prospective(now_ms)
                else:
                    self._become_unattached(self._election.quorum_epoch, now_ms)
            else:
                self._poll_fetching(role.fetching, role.leader_id, now_ms)
        else:
            self._poll_resigned(role, now_ms)

    def _poll_prospective(self, role: Prospective, now_ms: int) -> None:
        result = role.tally.result()
        if result is VoteResult.WON:
            self._become_candidate(now_ms)
        elif result is VoteResult.LOST or now_ms >= role.election_deadline_ms:
            # Back to where we were, in the same epoch: our pre-vote changed nothing durable.
            leader_id = self._election.leader_id
            if leader_id is not None and leader_id != self.node_id:
                self._set_role(self._follower_role(leader_id, now_ms))
            else:
                self._set_role(self._unattached_role(now_ms))
        elif now_ms >= role.resend_ms:
            self._request_votes(role.tally, pre_vote=True)
            role.resend_ms = now_ms + self.config.request_timeout_ms

    def _poll_candidate(self, role: Candidate, now_ms: int) -> None:
        result = role.tally.result()
        if result is VoteResult.WON:
            self._become_leader(frozenset(role.tally.granted), now_ms)
        elif role.backoff_until_ms is not None:
            if now_ms >= role.backoff_until_ms:
                self._become_prospective(now_ms)
        elif result is VoteResult.LOST or now_ms >= role.election_deadline_ms:
            self._election_retries += 1
            backoff = election_backoff_ms(
                self._rng,
                self._election_retries,
                self.config.election_backoff_ms_base,
                self.config.election_backoff_ms_max,
            )
            role.backoff_until_ms = now_ms + backoff
        elif now_ms >= role.resend_ms:
            self._request_votes(role.tally, pre_vote=False)
            role.resend_ms = now_ms + self.config.request_timeout_ms

    def _poll_leader(self, leader: Leader, now_ms: int) -> None:
        if (
            leader.check_quorum_deadline_ms is not None
            and now_ms >= leader.check_quorum_deadline_ms
        ):
            self._become_resigned(now_ms)
            return
        if leader.linger_deadline_ms is not None and (
            now_ms >= leader.linger_deadline_ms or self._everything_committed()
        ):
            self._drain_accumulator(leader)
        if leader.voters_unaware and now_ms >= leader.begin_epoch_resend_ms:
            for voter_id in sorted(leader.voters_unaware):
                self._send(
                    voter_id,
                    BeginQuorumEpochRequest(
                        self._correlation_id(), self._election.quorum_epoch, self.node_id
                    ),
                )
            leader.begin_epoch_resend_ms = now_ms + self.config.begin_quorum_epoch_resend_ms
        for parked in list(leader.parked.values()):
            if now_ms >= parked.deadline_ms:
                self._answer_parked(leader, parked)
        expiry = now_ms - self.config.observer_session_timeout_ms
        for observer_id, progress in list(leader.observers.items()):
            if progress.last_fetch_ms is not None and progress.last_fetch_ms < expiry:
                del leader.observers[observer_id]

    def _poll_resigned(self, role: Resigned, now_ms: int) -> None:
        if now_ms >= role.election_deadline_ms:
            self._become_unattached(self._election.quorum_epoch + 1, now_ms)
            return
        if role.voters_unaware and now_ms >= role.resend_ms:
            for voter_id in sorted(role.voters_unaware):
                request = EndQuorumEpochRequest(
                    self._correlation_id(),
                    self._election.quorum_epoch,
                    self.node_id,
                    role.preferred_successors,
                )
                self._send(voter_id, request)
            role.resend_ms = now_ms + self.config.request_timeout_ms

    def _poll_fetching(self, fetching: Fetching, leader_id: int | None, now_ms: int) -> None:
        outstanding = fetching.outstanding
        if outstanding is not None:
            if now_ms < outstanding.deadline_ms:
                return
            fetching.outstanding = None
            fetching.next_fetch_ms = now_ms
        if now_ms < fetching.next_fetch_ms:
            return
        if leader_id is None:
            # Leader discovery: any voter will name the leader it knows.
            candidates = sorted(self._voter_ids - {self.node_id})
            destination = candidates[self._rng.randrange(0, len(candidates))]
        else:
            destination = leader_id
        correlation_id = self._correlation_id()
        role = self._role
        download = role.download if isinstance(role, Follower) else None
        body: RaftBody
        if download is not None:
            body = FetchSnapshotRequest(
                correlation_id,
                self.node_id,
                self._election.quorum_epoch,
                download.snapshot_id,
                download.position,
                self.config.fetch_bytes_max,
            )
        else:
            summary = self._tail.summary()
            body = FetchRequest(
                correlation_id,
                self.node_id,
                self._election.quorum_epoch,
                summary.log_end_offset,
                summary.last_quorum_epoch,
                self._high_watermark,
                self.config.fetch_wait_ms_max,
                self.config.fetch_bytes_max,
            )
        self._send(destination, body)
        fetching.outstanding = OutstandingRequest(
            correlation_id, destination, now_ms + self.config.request_timeout_ms
        )

    # --- elections --------------------------------------------------------------------------------

    def _request_votes(self, tally: VoteTally, *, pre_vote: bool) -> None:
        summary = self._tail.summary()
        for voter_id in sorted(tally.unanswered()):
            self._send(
                voter_id,
                VoteRequest(
                    self._correlation_id(),
                    self._election.quorum_epoch,
                    self.node_id,
                    summary.last_quorum_epoch,
                    summary.log_end_offset,
                    pre_vote,
                ),
            )

    def _log_is_up_to_date(self, last_offset_epoch: int, last_offset: int) -> bool:
        """Whether a candidate's log is at least as up to date as ours (Raft paper, section
        5.4.1)."""
        summary = self._tail.summary()
        return (last_offset_epoch, last_offset) >= (
            summary.last_quorum_epoch,
            summary.log_end_offset,
        )

    def _can_grant(self, request: VoteRequest) -> bool:
        """The vote-granting matrix of module Rule 4, for the current role and epoch."""
        role = self._role
        if not self._is_voter or request.candidate_id not in self._voter_ids:
            return False
        if isinstance(role, Leader):
            return False
        log_ok = self._log_is_up_to_date(request.last_offset_epoch, request.last_offset)
        if request.pre_vote:
            if isinstance(role, Follower):
                return log_ok and not role.has_fetched_from_leader
            return log_ok
        if not isinstance(role, Unattached | Prospective):
            return False
        if self._election.leader_id is not None:
            return False
        voted = self._election.voted_id
        return log_ok and voted in (None, request.candidate_id)

    def _on_vote_request(self, source: int, request: VoteRequest, now_ms: int) -> None:
        def answer(error: ErrorCode, granted: bool) -> None:
            self._send(
                source,
                VoteResponse(
                    request.correlation_id,
                    error,
                    self._election.quorum_epoch,
                    self._known_leader(),
                    granted,
                    request.pre_vote,
                ),
            )

        epoch_floor = (
            request.last_offset_epoch if request.pre_vote else request.last_offset_epoch + 1
        )
        if (
            request.last_offset < 0
            or request.last_offset_epoch < 0
            or epoch_floor > request.quorum_epoch
        ):
            answer(ErrorCode.INVALID_REQUEST, False)
            return
        if request.quorum_epoch < self._election.quorum_epoch:
            answer(ErrorCode.FENCED_LEADER_EPOCH, False)
            return
        self._observe_epoch(request.quorum_epoch, None, now_ms)
        granted = self._can_grant(request)
        if granted and not request.pre_vote:
            self._set_election(
                ElectionState(self._election.quorum_epoch, None, request.candidate_id)
            )
            # Granting a vote gives the candidate a full election timeout before we campaign,
            # and a Prospective gives up its own pre-vote for it.
            self._set_role(self._unattached_role(now_ms))
        answer(ErrorCode.NONE, granted)

    def _on_vote_response(self, source: int, response: VoteResponse, now_ms: int) -> None:
        if self._handle_common_response(
            response.quorum_epoch, response.leader_id, response.error, now_ms
        ):
            return
        role = self._role
        # A pre-vote answer counts only for a Prospective, a real vote only for a Candidate.
        if isinstance(role, Prospective if response.pre_vote else Candidate):
            role.tally.record(source, response.vote_granted)

    def _handle_common_response(
        self, quorum_epoch: int, leader_id: int | None, error: ErrorCode, now_ms: int
    ) -> bool:
        """Kafka's common response handling; True when the response is done with (stale, or it
        moved us to another epoch or leader, or carries an error)."""
        current = self._election.quorum_epoch
        if quorum_epoch < current or error == ErrorCode.UNKNOWN_LEADER_EPOCH:
            return True
        self._observe_epoch(quorum_epoch, leader_id, now_ms)
        return quorum_epoch > current or error != ErrorCode.NONE

    # --- BeginQuorumEpoch / EndQuorumEpoch --------------------------------------------------------

    def _observe_announced_leader(
        self, quorum_epoch: int, leader_id: int, now_ms: int
    ) -> ErrorCode:
        """Check a leader's Begin/EndQuorumEpoch and catch up with its epoch and leadership."""
        if quorum_epoch < self._election.quorum_epoch:
            return ErrorCode.FENCED_LEADER_EPOCH
        if leader_id not in self._voter_ids or leader_id == self.node_id:
            return ErrorCode.INVALID_REQUEST
        self._observe_epoch(quorum_epoch, leader_id, now_ms)
        return ErrorCode.NONE

    def _on_begin_quorum_epoch_request(
        self, source: int, request: BeginQuorumEpochRequest, now_ms: int
    ) -> None:
        error = self._observe_announced_leader(request.quorum_epoch, request.leader_id, now_ms)
        self._send(
            source,
            BeginQuorumEpochResponse(
                request.correlation_id, error, self._election.quorum_epoch, self._known_leader()
            ),
        )

    def _on_begin_quorum_epoch_response(
        self, source: int, response: BeginQuorumEpochResponse, now_ms: int
    ) -> None:
        if self._handle_common_response(
            response.quorum_epoch, response.leader_id, response.error, now_ms
        ):
            return
        if isinstance(self._role, Leader):
            self._role.voters_unaware.discard(source)

    def _on_end_quorum_epoch_request(
        self, source: int, request: EndQuorumEpochRequest, now_ms: int
    ) -> None:
        error = self._observe_announced_leader(request.quorum_epoch, request.leader_id, now_ms)
        role = self._role
        resigning_leader = isinstance(role, Follower) and role.leader_id == request.leader_id
        if error == ErrorCode.NONE and resigning_leader and self._is_voter:
            assert isinstance(role, Follower)
            successors = request.preferred_successors
            position = successors.index(self.node_id) if self.node_id in successors else None
            delay = end_quorum_epoch_delay_ms(
                position, len(successors), self.config.election_backoff_ms_max
            )
            # The leader said it is gone: the successors it ranked campaign in its order.
            self._lose_leader(role, now_ms, delay)
        self._send(
            source,
            EndQuorumEpochResponse(
                request.correlation_id, error, self._election.quorum_epoch, self._known_leader()
            ),
        )

    def _on_end_quorum_epoch_response(
        self, source: int, response: EndQuorumEpochResponse, now_ms: int
    ) -> None:
        role = self._role
        if isinstance(role, Resigned) and response.quorum_epoch >= self._election.quorum_epoch:
            role.voters_unaware.discard(source)
        self._handle_common_response(
            response.quorum_epoch, response.leader_id, response.error, now_ms
        )

    # --- Fetch: leader side -----------------------------------------------------------------------

    def _fetch_error(self, request: FetchRequest, error: ErrorCode) -> FetchResponse:
        return FetchResponse(
            request.correlation_id,
            error,
            self._election.quorum_epoch,
            self._known_leader(),
            request.fetch_offset,
            request.last_fetched_epoch,
        )

    def _leader_request_error(
        self, quorum_epoch: int, replica_id: int | None, now_ms: int
    ) -> ErrorCode | None:
        """The epoch and role checks every leader-bound request passes, in Kafka's order."""
        if quorum_epoch < self._election.quorum_epoch:
            return ErrorCode.FENCED_LEADER_EPOCH
        if quorum_epoch > self._election.quorum_epoch:
            return ErrorCode.UNKNOWN_LEADER_EPOCH
        leader = self._role
        if not isinstance(leader, Leader):
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        if replica_id is not None and replica_id in self._voter_ids and replica_id != self.node_id:
            leader.voters_unaware.discard(replica_id)
            leader.voters_heard.add(replica_id)
            if len(leader.voters_heard) >= majority_size(len(self._voter_ids)) - 1:
                leader.voters_heard.clear()
                leader.check_quorum_deadline_ms = now_ms + self.config.check_quorum_timeout_ms
        return None

    def _on_fetch_request(self, source: int, request: FetchRequest, now_ms: int) -> None:
        if (
            request.max_wait_ms < 0
            or request.fetch_offset < 0
            or request.high_watermark < 0
            or request.last_fetched_epoch < 0
            or request.last_fetched_epoch > request.quorum_epoch
        ):
            self._send(source, self._fetch_error(request, ErrorCode.INVALID_REQUEST))
            return
        error = self._leader_request_error(request.quorum_epoch, request.replica_id, now_ms)
        leader = self._role
        if error is not None or not isinstance(leader, Leader):
            self._send(
                source, self._fetch_error(request, error or ErrorCode.NOT_LEADER_OR_FOLLOWER)
            )
            return
        replaced = leader.parked.get(source)
        if replaced is not None:
            # A fetcher keeps one Fetch in flight, so a second one means it gave up waiting for
            # the parked one (or the network repeated it). Answer that one now, as its expiry
            # would, before the new one may take its place: the shell's transport awaits an
            # answer to every request, and one never answered times out and takes the
            # fetcher's connection down with it.
            self._answer_parked(leader, replaced)
        position = self._fetch_position(request)
        if isinstance(position, ValidPosition) and request.replica_id is not None:
            self._record_progress(leader, request.replica_id, request.fetch_offset, now_ms)
        response = self._fetch_answer(request, position)
        # Park an answer without records: until data arrives or the fetcher's wait ends, or,
        # when the high watermark is news to the fetcher, at most the high watermark linger.
        if isinstance(position, ValidPosition) and not response.records and request.max_wait_ms > 0:
            wait_ms = min(request.max_wait_ms, self.config.fetch_wait_ms_max)
            if (response.high_watermark or 0) > request.high_watermark:
                wait_ms = min(wait_ms, self.config.high_watermark_linger_ms)
            if wait_ms > 0:
                leader.parked[source] = ParkedFetch(source, request, now_ms + wait_ms)
                return
        self._send(source, response)

    def _fetch_position(self, request: FetchRequest) -> FetchPosition:
        snapshots = self._tail.written.snapshot_ids()
        return validate_fetch_position(
            request.fetch_offset,
            request.last_fetched_epoch,
            self._tail.summary(),
            snapshots[-1] if snapshots else None,
        )

    def _fetch_answer(self, request: FetchRequest, position: FetchPosition) -> FetchResponse:
        leader = self._role
        assert isinstance(leader, Leader)
        summary = self._tail.summary()
        response = FetchResponse(
            request.correlation_id,
            ErrorCode.NONE,
            self._election.quorum_epoch,
            self.node_id,
            request.fetch_offset,
            request.last_fetched_epoch,
            high_watermark=leader.high_watermark,
            log_start_offset=summary.log_start_offset,
        )
        if isinstance(position, DivergingPosition):
            return replace(response, diverging_epoch=position.diverging_epoch)
        if isinstance(position, SnapshotPosition):
            return replace(response, snapshot_id=position.snapshot_id)
        if request.fetch_offset >= summary.log_end_offset:
            return response
        max_bytes = min(request.max_bytes, self.config.fetch_bytes_max)
        # Pending appends too: sent only once written (see `LogTail.read`).
        return replace(response, records=self._tail.read(request.fetch_offset, max_bytes))

    def _answer_parked(self, leader: Leader, parked: ParkedFetch) -> None:
        del leader.parked[parked.source_id]
        response = self._fetch_answer(parked.request, self._fetch_position(parked.request))
        self._send(parked.source_id, response)

    def _record_progress(
        self, leader: Leader, replica_id: int, fetch_offset: int, now_ms: int
    ) -> None:
        if replica_id == self.node_id:
            return
        progress = leader.voters.get(replica_id)
        if progress is None:
            progress = leader.observers.setdefault(replica_id, ReplicaProgress())
        progress.end_offset = fetch_offset
        progress.last_fetch_ms = now_ms
        if fetch_offset >= self._tail.summary().log_end_offset:
            progress.last_caught_up_ms = now_ms
        if replica_id in self._voter_ids:
            self._update_leader_high_watermark(leader)

    def _update_leader_high_watermark(self, leader: Leader) -> None:
        """Module Rule 6: the offset a majority of voters flushed, once past the epoch start."""
        own = min(self._flushed_end_offset, self._tail.summary().log_end_offset)
        leader.voters[self.node_id].end_offset = own
        candidate = offset_reached_by_majority([p.end_offset for p in leader.voters.values()])
        if candidate is None or candidate <= leader.epoch_start_offset:
            return
        if leader.high_watermark is not None and candidate <= leader.high_watermark:
            # Lower only if a voter lost flushed data; the high watermark never moves back.
            return
        leader.high_watermark = candidate
        self._raise_high_watermark(candidate)
        if leader.linger_deadline_ms is not None and self._everything_committed():
            # Group commit: the appends these proposals lingered behind are committed, so the
            # next batch goes now; the linger only bounds the wait (one batch per commit round
            # instead of one per linger time: 64 proposers got 2,000/s at a 25 ms linger).
            # Before the parked fetches are answered, so that the answers carry it.
            self._drain_accumulator(leader)
        # Followers learn the new high watermark from the answers to their parked fetches,
        # within the high watermark linger: a fetch still parked when the next proposal
        # arrives, usually moments after the commit, is answered with its records and the
        # high watermark together (answered at once, the follower would spend a Fetch round
        # trip before it waits again; with one proposer, one round trip per commit).
        linger_ms = self.config.high_watermark_linger_ms
        for parked in list(leader.parked.values()):
            if linger_ms == 0:
                self._answer_parked(leader, parked)
            else:
                parked.deadline_ms = min(parked.deadline_ms, self._now_ms + linger_ms)

    def _everything_committed(self) -> bool:
        return self._tail.summary().log_end_offset <= self._high_watermark

    def _raise_high_watermark(self, value: int) -> None:
        """Learn a high watermark in this run (the leader's word, or its own commit): known
        from now on, even when it is the value the node already had."""
        self._high_watermark_known = True
        if value > self._high_watermark:
            assert value <= self._tail.summary().log_end_offset, (value, self._tail.summary())
            self._high_watermark = value

    def _drain_accumulator(self, leader: Leader) -> None:
        """Append the lingering proposals as one batch of the current epoch."""
        leader.linger_deadline_ms = None
        if not leader.accumulator:
            return
        base_offset = self._tail.summary().log_end_offset
        epoch = self._election.quorum_epoch
        batch = build_batch(
            [(record.timestamp_ms, None, record.value, ()) for record in leader.accumulator],
            base_offset=base_offset,
            partition_leader_epoch=epoch,
        )
        end_offset = base_offset + len(leader.accumulator)
        leader.accumulator = []
        leader.accumulator_bytes = 0
        self._tail.append(
            base_offset, end_offset, batch, [EpochStart(epoch, base_offset)], as_leader=True
        )
        # Answer the parked fetches in this Ready, with the batch: a leader's Ready may send
        # before its fsync, so the followers' append, fsync and next Fetch overlap the
        # leader's fsync instead of following it (one fsync less per commit round).
        for parked in list(leader.parked.values()):
            self._answer_parked(leader, parked)

    # --- Fetch: fetcher side ----------------------------------------------------------------------

    def _take_outstanding(self, source: int, correlation_id: int) -> Fetching | None:
        """The fetching state whose in-flight request this response answers, or None (stale)."""
        role = self._role
        fetching = role.fetching if isinstance(role, Follower | Unattached) else None
        outstanding = fetching.outstanding if fetching is not None else None
        if (
            outstanding is None
            or outstanding.correlation_id != correlation_id
            or outstanding.destination_id != source
        ):
            return None
        assert fetching is not None
        fetching.outstanding = None
        return fetching

    def _on_fetch_response(self, source: int, response: FetchResponse, now_ms: int) -> None:
        fetching = self._take_outstanding(source, response.correlation_id)
        if fetching is None:
            return
        fetching.next_fetch_ms = now_ms + self.config.retry_backoff_ms
        if self._handle_common_response(
            response.quorum_epoch, response.leader_id, response.error, now_ms
        ):
            return
        role = self._role
        if not isinstance(role, Follower) or role.leader_id != source:
            return
        fetching = role.fetching
        fetching.next_fetch_ms = now_ms
        summary = self._tail.summary()
        if (response.fetch_offset, response.last_fetched_epoch) != (
            summary.log_end_offset,
            summary.last_quorum_epoch,
        ):
            return  # it answers a position this log no longer has: fetch again from here
        self._heard_from_leader(role, now_ms)
        if response.diverging_epoch is not None:
            target = truncation_offset(response.diverging_epoch, summary, self._high_watermark)
            self._tail.truncate_to(target)
        elif response.snapshot_id is not None:
            if role.download is None or role.download.snapshot_id != response.snapshot_id:
                if role.download is not None:
                    self._tail.abort_snapshot(role.download.snapshot_id)
                role.download = SnapshotDownload(response.snapshot_id)
        else:
            if response.records and not self._append_fetched(response):
                fetching.next_fetch_ms = now_ms + self.config.retry_backoff_ms
                return
            if response.high_watermark is not None:
                end = self._tail.summary().log_end_offset
                self._raise_high_watermark(min(response.high_watermark, end))

    def _append_fetched(self, response: FetchResponse) -> bool:
        """Append the fetched batches after checking their framing, CRC, offsets and epochs;
        False (nothing appended) when the response is malformed."""
        records = response.records
        summary = self._tail.summary()
        expected = summary.log_end_offset
        last_epoch = summary.last_quorum_epoch
        epochs: list[EpochStart] = []
        end = 0
        for position, size in iter_frames(records):
            try:
                header = validate_batch(records, position, where="fetched batch")
            except (CorruptRecordError, InvalidRecordError):
                return False
            epoch = header.partition_leader_epoch
            if header.base_offset != expected or not last_epoch <= epoch <= response.quorum_epoch:
                return False
            if not epochs or epoch != last_epoch:
                # LogTail keeps only real epoch changes against what the log already holds.
                epochs.append(EpochStart(epoch, header.base_offset))
            last_epoch = epoch
            expected = header.next_offset
            end = position + size
        if end == 0:
            return False
        self._tail.append(summary.log_end_offset, expected, records[:end], epochs, as_leader=False)
        return True

    # --- FetchSnapshot ----------------------------------------------------------------------------

    def _on_fetch_snapshot_request(
        self, source: int, request: FetchSnapshotRequest, now_ms: int
    ) -> None:
        def answer(error: ErrorCode, size: int = 0, chunk: bytes = b"") -> None:
            self._send(
                source,
                FetchSnapshotResponse(
                    request.correlation_id,
                    error,
                    self._election.quorum_epoch,
                    self._known_leader(),
                    request.snapshot_id,
                    size,
                    request.position,
                    chunk,
                ),
            )

        error = self._leader_request_error(request.quorum_epoch, request.replica_id, now_ms)
        if error is not None:
            answer(error)
            return
        written = self._tail.written
        size = written.snapshot_size(request.snapshot_id)
        if size is None or request.snapshot_id.end_offset == 0:
            answer(ErrorCode.SNAPSHOT_NOT_FOUND)
            return
        if not 0 <= request.position < size:
            answer(ErrorCode.POSITION_OUT_OF_RANGE, size)
            return
        max_bytes = min(request.max_bytes, self.config.fetch_bytes_max)
        answer(
            ErrorCode.NONE,
            size,
            written.read_snapshot(request.snapshot_id, request.position, max_bytes),
        )

    def _on_fetch_snapshot_response(
        self, source: int, response: FetchSnapshotResponse, now_ms: int
    ) -> None:
        fetching = self._take_outstanding(source, response.correlation_id)
        if fetching is None:
            return
        fetching.next_fetch_ms = now_ms + self.config.retry_backoff_ms
        role = self._role
        download = role.download if isinstance(role, Follower) else None
        if (
            response.error == ErrorCode.SNAPSHOT_NOT_FOUND
            and response.quorum_epoch == self._election.quorum_epoch
            and download is not None
        ):
            # The leader deleted it: drop the partial copy and fetch again at once.
            self._tail.abort_snapshot(download.snapshot_id)
            assert isinstance(role, Follower)
            role.download = None
            fetching.next_fetch_ms = now_ms
            return
        if self._handle_common_response(
            response.quorum_epoch, response.leader_id, response.error, now_ms
        ):
            return
        role = self._role
        if not isinstance(role, Follower) or role.leader_id != source or role.download is None:
            return
        download = role.download
        if response.snapshot_id != download.snapshot_id or response.position != download.position:
            return
        if not response.chunk or download.position + len(response.chunk) > response.size:
            return
        fetching.next_fetch_ms = now_ms
        self._heard_from_leader(role, now_ms)
        self._tail.write_snapshot_chunk(download.snapshot_id, download.position, response.chunk)
        download.position += len(response.chunk)
        if download.position == response.size:
            role.download = None
            self._install_snapshot(download.snapshot_id)

    def _install_snapshot(self, snapshot_id: SnapshotId) -> None:
        assert snapshot_id.end_offset >= self._high_watermark, (
            f"snapshot {snapshot_id} ends below the high watermark {self._high_watermark}"
        )
        self._tail.install_snapshot(snapshot_id)
        self._high_watermark = snapshot_id.end_offset
        self._applied_offset = snapshot_id.end_offset
        self._snapshot_to_load = snapshot_id

    # --- DescribeQuorum ---------------------------------------------------------------------------

    def _on_describe_quorum_request(
        self, source: int, request: DescribeQuorumRequest, now_ms: int
    ) -> None:
        leader = self._role
        if not isinstance(leader, Leader):
            self._send(
                source,
                DescribeQuorumResponse(
                    request.correlation_id,
                    ErrorCode.NOT_LEADER_OR_FOLLOWER,
                    self._election.quorum_epoch,
                    self._known_leader(),
                ),
            )
            return

        def describe(progress: dict[int, ReplicaProgress]) -> tuple[ReplicaDescription, ...]:
            return tuple(
                ReplicaDescription(replica_id, p.end_offset, p.last_fetch_ms, p.last_caught_up_ms)
                for replica_id, p in sorted(progress.items())
            )

        self._send(
            source,
            DescribeQuorumResponse(
                request.correlation_id,
                ErrorCode.NONE,
                self._election.quorum_epoch,
                self.node_id,
                leader.high_watermark,
                describe(leader.voters),
                describe(leader.observers),
            ),
        )

    # --- delivery to the state machine ------------------------------------------------------------

    def _committed_bound(self) -> int:
        """Committed batches below this offset can be read from the written log now."""
        stable_end = self._tail.stable_end()
        if stable_end is None:
            return self._applied_offset
        return min(self._high_watermark, stable_end)

    def _collect_to_apply(self) -> tuple[ApplyItem, ...]:
        items: list[ApplyItem] = []
        if self._snapshot_to_load is not None:
            items.append(LoadSnapshot(self._snapshot_to_load))
            self._snapshot_to_load = None
        bound = self._committed_bound()
        budget = self.config.fetch_bytes_max
        written = self._tail.written
        while self._applied_offset < bound and budget > 0:
            data = written.read(self._applied_offset, budget)
            assert data, f"no committed data at offset {self._applied_offset} below {bound}"
            for position, size in iter_frames(data):
                header = read_header(data, position)
                if header.base_offset >= bound:
                    break
                assert header.base_offset == self._applied_offset, (header, self._applied_offset)
                # The high watermark is always at a batch boundary: it is some voter's log end.
                assert header.next_offset <= bound, (header, bound)
                items.append(
                    CommittedBatch(
                        header.base_offset,
                        header.last_offset,
                        header.partition_leader_epoch,
                        header.is_control,
                        data[position : position + size],
                    )
                )
                self._applied_offset = header.next_offset
                budget -= size
        change = self._leader_change_due()
        if change is not None:
            items.append(change)
            self._announced = change
        return tuple(items)

    def _leader_change_due(self) -> LeaderChange | None:
        """The leader change the state machine has not been told about yet, if any."""
        role = self._role
        epoch = self._election.quorum_epoch
        if isinstance(role, Leader):
            # Announce our own leadership only once every earlier committed entry is applied.
            if self._applied_offset <= role.epoch_start_offset:
                return None
            leader_id: int | None = self.node_id
        else:
            leader_id = self._known_leader()
        announced = self._announced
        if (
            announced is not None
            and announced.leader_id == leader_id
            and announced.quorum_epoch == epoch
        ):
            return None  # asked before every Ready: no object made for the usual answer
        return LeaderChange(leader_id, epoch)


def _fetching_deadline(fetching: Fetching) -> int:
    if fetching.outstanding is not None:
        return fetching.outstanding.deadline_ms
    return fetching.next_fetch_ms
