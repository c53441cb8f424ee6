"""What the metadata quorum's leader says of it (`QuorumDescription`), read as Kafka's tools
read a DescribeQuorum answer: lags against the leader's log end, times by the leader's clock.

Rules:
- Pure data: either protocol's answer (replog's Raft service, Kafka's DescribeQuorum) comes in
  as plain numbers (`of`); nothing here imports grpc, so the client library's Admin can read
  Kafka's answer without it.
- -1 on the wire ("not known in this epoch") is None here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from replog.admin import bootstrap as admin_bootstrap

if TYPE_CHECKING:
    from replog.pb import raft_pb2 as pb

NONE = -1  # "unknown" on the wire


# A replica as DescribeQuorum answers carry it: (replica id, log end offset, last fetch ms, last
# caught-up ms), -1 where not known in this epoch.
WireReplica = tuple[int, int, int, int]


@dataclass(frozen=True, slots=True)
class ReplicaRow:
    node_id: int
    log_end_offset: int | None
    lag: int | None
    last_fetch_timestamp: int | None
    last_caught_up_timestamp: int | None
    status: str  # Leader, Follower or Observer


@dataclass(frozen=True, slots=True)
class QuorumDescription:
    """The leader's DescribeQuorum answer, with lags computed as Kafka's tool does."""

    leader_id: int
    leader_epoch: int
    high_watermark: int | None
    voters: tuple[int, ...]
    observers: tuple[int, ...]
    replicas: tuple[ReplicaRow, ...]  # the leader, the other voters, the observers
    answered_by: str
    # Where each voter listens, as the answering node's controller.quorum.voters says, or as
    # Kafka's DescribeQuorum names its listener (by listener name, `voter_listeners`).
    voter_addresses: Mapping[int, str] = field(default_factory=dict)
    voter_listeners: Mapping[int, str] = field(default_factory=dict)

    @classmethod
    def from_answer(cls, answer: pb.DescribeQuorumResponse, address: str) -> QuorumDescription:
        def replica(r: pb.ReplicaState) -> WireReplica:
            return (r.replica_id, r.log_end_offset, r.last_fetch_ms, r.last_caught_up_ms)

        return cls.of(
            answer.leader_id,
            answer.quorum_epoch,
            answer.high_watermark,
            [replica(r) for r in answer.voters],
            [replica(r) for r in answer.observers],
            address,
            admin_bootstrap.endpoint_addresses(answer.nodes),
        )

    @classmethod
    def of(
        cls,
        leader_id: int,
        leader_epoch: int,
        high_watermark: int,
        voters: Sequence[WireReplica],
        observers: Sequence[WireReplica],
        answered_by: str,
        voter_addresses: Mapping[int, str],
        voter_listeners: Mapping[int, str] | None = None,
    ) -> QuorumDescription:
        """The leader's answer, as either protocol carries it: replicas as (id, log end
        offset, last fetch, last caught up), -1 for "not known in this epoch"."""
        leader_end = next((_known(r[1]) for r in voters if r[0] == leader_id), None)

        def row(replica: WireReplica, status: str) -> ReplicaRow:
            replica_id, end_offset, fetch_ms, caught_up_ms = replica
            end = _known(end_offset)
            lag = None if end is None or leader_end is None else max(0, leader_end - end)
            return ReplicaRow(replica_id, end, lag, _known(fetch_ms), _known(caught_up_ms), status)

        leader = [row(r, "Leader") for r in voters if r[0] == leader_id]
        followers = [row(r, "Follower") for r in voters if r[0] != leader_id]
        return cls(
            leader_id=leader_id,
            leader_epoch=leader_epoch,
            high_watermark=_known(high_watermark),
            voters=tuple(sorted(r[0] for r in voters)),  # Kafka's answer lists the leader first
            observers=tuple(r[0] for r in observers),
            replicas=(*leader, *followers, *(row(r, "Observer") for r in observers)),
            answered_by=answered_by,
            voter_addresses=voter_addresses,
            voter_listeners=voter_listeners or {},
        )

    @property
    def max_follower_lag(self) -> int | None:
        lags = [r.lag for r in self.replicas if r.status != "Observer" and r.lag is not None]
        return max(lags, default=None)

    @property
    def max_follower_lag_time_ms(self) -> int | None:
        """How long ago (by the leader's clock) the least recently caught-up voter caught up."""
        voters = [r for r in self.replicas if r.status != "Observer"]
        times = [r.last_caught_up_timestamp for r in voters]
        if not times or any(t is None for t in times):
            return None
        leader_now = voters[0].last_caught_up_timestamp
        assert leader_now is not None
        return max(0, leader_now - min(t for t in times if t is not None))

    def status(self, addresses: Mapping[int, str]) -> dict[str, Any]:
        """The `--status` fields (keys of STATUS_LABELS); voters and observers with endpoints."""

        def describe(ids: Sequence[int]) -> list[dict[str, Any]]:
            return [
                {
                    "id": i,
                    "endpoints": [f"{self.voter_listeners.get(i, 'CONTROLLER')}://{addresses[i]}"]
                    if i in addresses
                    else [],
                }
                for i in ids
            ]

        return {
            "leader_id": self.leader_id,
            "leader_epoch": self.leader_epoch,
            "high_watermark": self.high_watermark,
            "max_follower_lag": self.max_follower_lag,
            "max_follower_lag_time_ms": self.max_follower_lag_time_ms,
            "current_voters": describe(self.voters),
            "current_observers": describe(self.observers),
        }


def _known(value: int) -> int | None:
    return None if value == NONE else value
