"""Small builders for unit tests of the Raft core: logs with given epochs, nodes in given roles."""

from __future__ import annotations

import random
from collections.abc import Sequence

from sim_memory_log import MemoryLog

from replog.quorum.raft import (
    AppendBatches,
    ElectionState,
    Message,
    RaftConfig,
    RaftNode,
    Ready,
    VoterAddress,
)
from replog.quorum.raft.messages import RaftBody, VoteRequest
from replog.record import build_batch

VOTERS = (1, 2, 3)


def config(voters: Sequence[int] = VOTERS, **overrides: int) -> RaftConfig:
    settings = {"append_linger_ms": 0, "high_watermark_linger_ms": 0, **overrides}
    return RaftConfig(
        voters=tuple(VoterAddress(v, "localhost", 9000 + v) for v in voters), **settings
    )


def log_with(epochs: Sequence[tuple[int, int]]) -> MemoryLog:
    """A flushed log holding, in order, `count` one-record batches of each (epoch, count)."""
    log = MemoryLog()
    for quorum_epoch, count in epochs:
        for _ in range(count):
            offset = log.log_end_offset
            batch = build_batch(
                [(0, None, f"e{quorum_epoch}o{offset}".encode(), ())],
                base_offset=offset,
                partition_leader_epoch=quorum_epoch,
            )
            log.apply(AppendBatches(offset, offset + 1, batch, as_leader=False))
    log.flush()
    return log


def node(
    node_id: int = 1,
    election: ElectionState | None = None,
    log: MemoryLog | None = None,
    *,
    voters: Sequence[int] = VOTERS,
    now_ms: int = 0,
    **overrides: int,
) -> tuple[RaftNode, MemoryLog, Ready]:
    """A node restarted from `election` and `log`, and what its first Readies held."""
    log = log if log is not None else MemoryLog()
    raft = RaftNode(
        node_id=node_id,
        config=config(voters, **overrides),
        log=log,
        election_state=election or ElectionState(0),
        rng=random.Random(7),
        now_ms=now_ms,
    )
    return raft, log, merge(drain(raft, log))


def drain(raft: RaftNode, log: MemoryLog) -> list[Ready]:
    """Process every pending Ready (write, flush, advance) and return them."""
    readies = []
    while raft.has_ready():
        ready = raft.ready()
        for op in ready.log_ops:
            log.apply(op)
        if ready.flush_log:
            log.flush()
        raft.advance(ready, flushed_end_offset=log.flushed_end_offset)
        readies.append(ready)
    return readies


def step(
    raft: RaftNode, log: MemoryLog, source: int, body: RaftBody, now_ms: int | None = None
) -> Ready:
    """Deliver one message (at the node's current time by default) and return the merged
    output of the Readies it caused."""
    raft.step(Message(source, raft.node_id, body), raft.now_ms if now_ms is None else now_ms)
    return merge(drain(raft, log))


def merge(readies: list[Ready]) -> Ready:
    election = next((r.election_state for r in reversed(readies) if r.election_state), None)
    return Ready(
        election_state=election,
        log_ops=tuple(op for r in readies for op in r.log_ops),
        flush_log=any(r.flush_log for r in readies),
        flush_before_send=any(r.flush_before_send for r in readies),
        messages=tuple(m for r in readies for m in r.messages),
        to_apply=tuple(a for r in readies for a in r.to_apply),
        high_watermark=readies[-1].high_watermark if readies else 0,
        wake_at_ms=readies[-1].wake_at_ms if readies else None,
    )


def vote_request(
    quorum_epoch: int,
    candidate_id: int,
    last_epoch: int,
    last_offset: int,
    *,
    pre_vote: bool = False,
) -> VoteRequest:
    return VoteRequest(7, quorum_epoch, candidate_id, last_epoch, last_offset, pre_vote)


def bodies(ready: Ready, kind: type, destination: int | None = None) -> list[object]:
    return [
        m.body
        for m in ready.messages
        if isinstance(m.body, kind) and destination in (None, m.destination_id)
    ]
