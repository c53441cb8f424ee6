"""How stale a node's committed metadata may be, from what its Raft driver last heard.

A node serves metadata at its committed offset whether or not the quorum still has a leader:
with the quorum lost, leaders and ISRs stay as last committed (only an active controller
fences a dead broker or moves a leadership), and nothing in them says so. This says it:

- `age_ms`: how long since the node last heard from the quorum's leader (0 while it leads: a
  leader that loses its majority resigns within the check-quorum timeout); since the node
  started if it never did.
- `stale`: the node does not lead, and has not heard from a leader within the fetch timeout
  (`controller.quorum.fetch.timeout.ms`, after which a follower gives up on its leader): the
  quorum is lost, or an election runs. Not the role alone: with the quorum lost a node goes
  from campaigning back to following its last leader (KIP-996's prospective state) and on,
  and a follower that has not heard from its leader for that long is no more current.
- `unreachable`: once stale for longer than `broker.session.timeout.ms`, the brokers of the
  answer the node has not heard from (any Raft message) within that timeout, itself excepted:
  what an active controller would have fenced by now, as far as this node can tell. Judged
  only then: while a leader is known, voters talk to the leader, not to each other, and a
  campaigning node asks every voter for its vote about every election timeout, so that a live
  one answers within the window. A broker that is not a quorum voter is heard from only if it
  asks this node something, so it counts as unreachable too: the node cannot tell it is live.
Pure: the times come in on the driver's clock (`RaftDriver.quorum_contact`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class QuorumContact:
    """What a Raft driver last heard, on its clock (ms)."""

    node_id: int
    now_ms: int
    started_ms: int
    role: str  # RaftNode.role: "leader", "follower", "prospective", "candidate", ...
    fetch_timeout_ms: int
    leader_contact_ms: int | None  # last heard from (or was) the leader; None: never
    heard_ms: Mapping[int, int]  # other node id -> last message from it


@dataclass(frozen=True, slots=True)
class Staleness:
    age_ms: int
    stale: bool
    ever_reached: bool  # whether the node heard from a leader since it started
    unreachable: frozenset[int]


def metadata_staleness(
    contact: QuorumContact, broker_ids: Iterable[int], session_timeout_ms: int
) -> Staleness:
    """How stale the node's metadata may be (module docstring)."""
    reached = contact.leader_contact_ms
    since = contact.started_ms if reached is None else reached
    age_ms = max(0, contact.now_ms - since)
    stale = contact.role != "leader" and age_ms > contact.fetch_timeout_ms
    unreachable: frozenset[int] = frozenset()
    if stale and age_ms > session_timeout_ms:
        unreachable = frozenset(
            broker_id
            for broker_id in broker_ids
            if broker_id != contact.node_id
            and contact.now_ms - contact.heard_ms.get(broker_id, contact.started_ms)
            > session_timeout_ms
        )
    return Staleness(age_ms, stale, reached is not None, unreachable)
