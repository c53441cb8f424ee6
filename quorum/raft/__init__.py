"""KRaft-style Raft (KIP-595, KIP-630, KIP-996) as a pure state machine: no I/O, time as now_ms.

`RaftNode` is the core; `Ready` is what it asks its shell to do; `RaftLog` is how it reads the
log the shell keeps. See docs/raft.md for the roles, the RPCs and the Ready contract.
"""

from replog.quorum.raft.config import RaftConfig, VoterAddress, parse_voters
from replog.quorum.raft.election_state import ElectionState
from replog.quorum.raft.log_view import EpochEndOffset, EpochStart, LogSummary, RaftLog, summarize
from replog.quorum.raft.messages import ErrorCode, Message
from replog.quorum.raft.node import NodeStatus, ProposeResult, RaftNode
from replog.quorum.raft.ready import (
    AbortSnapshot,
    AppendBatches,
    ApplyItem,
    CommittedBatch,
    DeleteLogPrefix,
    InstallSnapshot,
    LeaderChange,
    LoadSnapshot,
    LogOp,
    Ready,
    TruncateTo,
    WriteSnapshot,
    WriteSnapshotChunk,
)
from replog.quorum.raft.snapshot_id import SnapshotId, parse_snapshot_file_name
from replog.quorum.raft.timers import RandomSource

__all__ = [
    "AbortSnapshot",
    "AppendBatches",
    "ApplyItem",
    "CommittedBatch",
    "DeleteLogPrefix",
    "ElectionState",
    "EpochEndOffset",
    "EpochStart",
    "ErrorCode",
    "InstallSnapshot",
    "LeaderChange",
    "LoadSnapshot",
    "LogOp",
    "LogSummary",
    "Message",
    "NodeStatus",
    "ProposeResult",
    "RaftConfig",
    "RaftLog",
    "RaftNode",
    "RandomSource",
    "Ready",
    "SnapshotId",
    "TruncateTo",
    "VoterAddress",
    "WriteSnapshot",
    "WriteSnapshotChunk",
    "parse_snapshot_file_name",
    "parse_voters",
    "summarize",
]
