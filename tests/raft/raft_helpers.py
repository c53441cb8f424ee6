"""Small builders for unit tests of the Raft core: logs with given epochs, nodes in given roles.

A node's log is the production one (`RaftStorage`: a replog `Log`, snapshot files, quorum-state)
on an in-memory disk (`MemoryFileSystem`), so a test sees what a node's disk would hold.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from replog.quorum.raft import (
    ElectionState,
    Message,
    RaftConfig,
    RaftNode,
    Ready,
    VoterAddress,
    WriteSnapshot,
)
from replog.quorum.raft.messages import RaftBody, VoteRequest
from replog.quorum.raft.snapshot_id import SnapshotId
from replog.record import build_batch, iter_frames, read_header
from replog.server.raft.raft_storage import RaftStorage
from replog.storage.memory_fs import MemoryFileSystem

VOTERS = (1, 2, 3)


def config(voters: Sequence[int] = VOTERS, **overrides: int) -> RaftConfig:
    settings = {"append_linger_ms": 0, "high_watermark_linger_ms": 0, **overrides}
    return RaftConfig(
        voters=tuple(VoterAddress(v, "localhost", 9000 + v) for v in voters), **settings
    )


def memory_log(voters: Sequence[int] = VOTERS) -> RaftStorage:
    """An empty metadata log of a node among `voters`, on a disk of its own in memory."""
    return RaftStorage("/metadata", voters, fs=MemoryFileSystem())


def log_with(epochs: Sequence[tuple[int, int]]) -> RaftStorage:
    """A flushed log holding, in order, `count` one-record batches of each (epoch, count)."""
    log = memory_log()
    for quorum_epoch, count in epochs:
        for _ in range(count):
            offset = log.log_end_offset
            batch = build_batch(
                [(0, None, f"e{quorum_epoch}o{offset}".encode(), ())],
                base_offset=offset,
                partition_leader_epoch=quorum_epoch,
            )
            log.log.append_as_follower(batch)
    log.flush()
    return log


def write_snapshot(log: RaftStorage, snapshot_id: SnapshotId, data: bytes) -> None:
    """Freeze `data` as snapshot `snapshot_id` of `log`, as a node's shell writes one."""
    log.apply(Ready(None, (WriteSnapshot(snapshot_id, data),), False, (), (), 0, None))


def stored_batches(log: RaftStorage) -> list[bytes]:
    """Every batch `log` holds, in offset order (a read ends at its segment's end)."""
    batches: list[bytes] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 30)
        for position, size in iter_frames(data):
            batches.append(bytes(data[position : position + size]))
        offset = read_header(batches[-1]).next_offset
    return batches


def node(
    node_id: int = 1,
    election: ElectionState | None = None,
    log: RaftStorage | None = None,
    *,
    voters: Sequence[int] = VOTERS,
    now_ms: int = 0,
    **overrides: int,
) -> tuple[RaftNode, RaftStorage, Ready]:
    """A node restarted from `election` and `log`, and what its first Readies held."""
    log = log if log is not None else memory_log(voters)
    raft = RaftNode(
        node_id=node_id,
        config=config(voters, **overrides),
        log=log,
        election_state=election or ElectionState(0),
        rng=random.Random(7),
        now_ms=now_ms,
    )
    return raft, log, merge(drain(raft, log))


def drain(raft: RaftNode, log: RaftStorage) -> list[Ready]:
    """Process every pending Ready (write, flush, advance) and return them."""
    readies = []
    while raft.has_ready():
        ready = raft.ready()
        raft.advance(ready, flushed_end_offset=log.apply(ready))
        readies.append(ready)
    return readies


def step(
    raft: RaftNode, log: RaftStorage, source: int, body: RaftBody, now_ms: int | None = None
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
