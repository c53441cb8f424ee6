"""`Ready`: everything a Raft node asks its shell to do, in the order it must be done.

The shell's loop, the only way to drive a `RaftNode`::

    node.step(message, now_ms) / node.tick(now_ms) / node.propose(values, now_ms) ...
    while node.has_ready():
        ready = node.ready()
        1. if ready.election_state: write quorum-state durably (tmp file, fsync, rename, fsync dir)
        2. apply ready.log_ops to the log, in order
        3. if ready.flush_log: fsync the log
        4. send ready.messages                      <- only now: PERSIST BEFORE SEND
        node.advance(ready, flushed_end_offset=<the log's flushed end offset>)
        5. hand ready.to_apply to the state machine, in order (it may propose at once)
    sleep until ready.wake_at_ms (or the next input), then node.tick(now_ms)

Rules:
- Persist before send: steps 1-3 complete before any message of the same `Ready` leaves the
  process. A vote, a Fetch offset (a voter's promise that everything below it is flushed) and a
  BeginQuorumEpoch are all claims about durable state; sending one before the state is durable
  lets a crash break election safety or lose committed data.
- One relaxation, for latency: when `flush_before_send` is False (a leader's Ready: no message
  in it promises anything about the log), step 4 may run before step 3. The flush must still
  happen before `advance`, because the leader counts its own entries only once flushed. A shell
  that always flushes first is correct too.
- No `step`, `tick`, `propose`, `resign` or snapshot call between `ready()` and `advance()`:
  the core's view of the log assumes the operations it handed out were applied. Inputs that
  arrive meanwhile wait in the shell's queue.
- `flushed_end_offset` in `advance` is the log's flushed end after step 3 (or later). A voter's
  own entries count toward the high watermark only up to what it reported flushed. Observers
  are never asked to flush.
- Messages may be lost, duplicated or reordered by the network; the core tolerates all three.
"""

from __future__ import annotations

from dataclasses import dataclass

from replog.quorum.raft.election_state import ElectionState
from replog.quorum.raft.messages import Message
from replog.quorum.raft.snapshot_id import SnapshotId

# --- Log operations ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AppendBatches:
    """Append `batches` (whole RecordBatch v2 batches, offsets and epochs already stamped).

    They start exactly at the log end offset, `base_offset`, and end at `end_offset`. A storage
    `Log` takes them verbatim with `append_as_follower`, which checks the start offset and keeps
    the stamped epochs in its epoch cache; `as_leader` says the leader wrote them (for metrics).
    """

    base_offset: int
    end_offset: int
    batches: bytes
    as_leader: bool


@dataclass(frozen=True, slots=True)
class TruncateTo:
    """Remove every offset >= `end_offset` (a follower's divergent suffix)."""

    end_offset: int


@dataclass(frozen=True, slots=True)
class WriteSnapshot:
    """Write `data` as snapshot `snapshot_id` and freeze it (fsync, atomic rename)."""

    snapshot_id: SnapshotId
    data: bytes


@dataclass(frozen=True, slots=True)
class WriteSnapshotChunk:
    """Write a downloaded chunk at byte `position` of the partial snapshot `snapshot_id`."""

    snapshot_id: SnapshotId
    position: int
    chunk: bytes


@dataclass(frozen=True, slots=True)
class InstallSnapshot:
    """Freeze `snapshot_id` if it was downloaded (a snapshot the log already holds whole stays
    as it is: the core installs its latest one at start-up when the log ends before it or
    disagrees with it), then empty the log and restart it at its end offset (log start = log
    end = `snapshot_id.end_offset`)."""

    snapshot_id: SnapshotId


@dataclass(frozen=True, slots=True)
class AbortSnapshot:
    """Delete the partial download of `snapshot_id`."""

    snapshot_id: SnapshotId


@dataclass(frozen=True, slots=True)
class DeleteLogPrefix:
    """Raise the log start offset to `log_start_offset`, the end offset of a frozen snapshot;
    delete the log below it and the snapshots older than that one."""

    log_start_offset: int


LogOp = (
    AppendBatches
    | TruncateTo
    | WriteSnapshot
    | WriteSnapshotChunk
    | InstallSnapshot
    | AbortSnapshot
    | DeleteLogPrefix
)

# --- State machine notifications ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CommittedBatch:
    """One committed batch, delivered in offset order with no gaps (control batches too)."""

    base_offset: int
    last_offset: int
    quorum_epoch: int
    is_control: bool
    batch: bytes


@dataclass(frozen=True, slots=True)
class LoadSnapshot:
    """Reset the state machine and load snapshot `snapshot_id`; commits continue at its end."""

    snapshot_id: SnapshotId


@dataclass(frozen=True, slots=True)
class LeaderChange:
    """The leader is now `leader_id` (None: unknown) in `quorum_epoch`.

    When `leader_id` is this node, the state machine has already been given every committed
    entry of earlier epochs, so it may start writing from up-to-date state.
    """

    leader_id: int | None
    quorum_epoch: int


ApplyItem = CommittedBatch | LoadSnapshot | LeaderChange

# --- Ready -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Ready:
    """One batch of work for the shell: persist, send, advance, apply (module docstring)."""

    election_state: ElectionState | None
    log_ops: tuple[LogOp, ...]
    flush_log: bool
    messages: tuple[Message, ...]
    to_apply: tuple[ApplyItem, ...]
    high_watermark: int
    wake_at_ms: int | None
    # False only when no message here depends on the log being flushed (module Rules).
    flush_before_send: bool = True

    @property
    def is_empty(self) -> bool:
        return (
            self.election_state is None
            and not self.log_ops
            and not self.messages
            and not self.to_apply
        )
