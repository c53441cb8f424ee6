"""`describe_quorum` (the CLI's blocking walk) and a controller's `describe_from_leader` (the
asyncio walk behind Kafka's DescribeQuorum) walk to the leader the same way.

Two in-process fakes of the RaftQuorum service: a follower that names the leader (with the
address it listens on) and the leader, which describes the quorum. Both walks follow the
follower's answer and read the leader's; with the leader gone, both name every address tried
and what each said. The asyncio walk runs on `grpc.aio`: no thread is started for it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from concurrent import futures

import grpc
import pytest

from replog.admin import quorum as quorum_module
from replog.admin.quorum import describe_quorum
from replog.admin.quorum_description import NONE, QuorumDescription
from replog.errors import NotLeaderOrFollowerError, ReplogError
from replog.pb import common_pb2, raft_pb2_grpc
from replog.pb import raft_pb2 as pb
from replog.quorum.raft.config import VoterAddress
from replog.server.kafka.kafka_quorum_apis import describe_from_leader

LEADER_ID = 2


class FakeQuorumNode(raft_pb2_grpc.RaftQuorumServicer):
    """Answers DescribeQuorum with `answer`; counts the calls."""

    def __init__(self, answer: pb.DescribeQuorumResponse) -> None:
        self.answer = answer
        self.calls = 0

    def DescribeQuorum(self, request: pb.DescribeQuorumRequest, context: object) -> object:
        self.calls += 1
        return self.answer


@pytest.fixture
def quorum() -> Iterator[tuple[str, str, FakeQuorumNode]]:
    """(follower address, leader address, the leader's fake)."""
    servers = []
    addresses = []
    for _ in range(2):
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        port = server.add_insecure_port("127.0.0.1:0")
        servers.append(server)
        addresses.append(f"127.0.0.1:{port}")
    leader = FakeQuorumNode(
        pb.DescribeQuorumResponse(
            quorum_epoch=3,
            leader_id=LEADER_ID,
            high_watermark=10,
            voters=[
                pb.ReplicaState(replica_id=1, log_end_offset=8, last_fetch_ms=5),
                pb.ReplicaState(replica_id=LEADER_ID, log_end_offset=10, last_fetch_ms=NONE),
            ],
        )
    )
    _, leader_port = addresses[1].rsplit(":", 1)
    follower = FakeQuorumNode(
        pb.DescribeQuorumResponse(
            error_code=NotLeaderOrFollowerError.code,
            quorum_epoch=3,
            leader_id=LEADER_ID,
            nodes=[
                common_pb2.NodeEndpoint(node_id=LEADER_ID, host="127.0.0.1", port=int(leader_port))
            ],
        )
    )
    for server, fake in zip(servers, (follower, leader), strict=True):
        raft_pb2_grpc.add_RaftQuorumServicer_to_server(fake, server)  # type: ignore[no-untyped-call]
        server.start()
    try:
        yield addresses[0], addresses[1], leader
    finally:
        for server in servers:
            server.stop(None)


def voters(follower: str, leader: str) -> list[VoterAddress]:
    """The follower as voter 1 (asked first: the leader this node knows), the leader as 2."""
    hosts_ports = [(1, follower.rsplit(":", 1)), (LEADER_ID, leader.rsplit(":", 1))]
    return [VoterAddress(node_id, host, int(port)) for node_id, (host, port) in hosts_ports]


def assert_described(description: QuorumDescription, leader_address: str) -> None:
    assert description.answered_by == leader_address
    assert (description.leader_id, description.leader_epoch) == (LEADER_ID, 3)
    assert description.high_watermark == 10
    assert [(r.node_id, r.lag, r.status) for r in description.replicas] == [
        (LEADER_ID, 0, "Leader"),
        (1, 2, "Follower"),
    ]


def test_the_blocking_walk_follows_a_follower_to_the_leader(
    quorum: tuple[str, str, FakeQuorumNode],
) -> None:
    follower, leader, _ = quorum
    assert_described(describe_quorum([follower], {}, 2.0), leader)


@pytest.mark.asyncio
async def test_a_controllers_asyncio_walk_follows_a_follower_to_the_leader_on_grpc_aio(
    quorum: tuple[str, str, FakeQuorumNode], monkeypatch: pytest.MonkeyPatch
) -> None:
    follower, leader, _ = quorum

    def blocking(*args: object) -> None:
        raise AssertionError("the asyncio walk asked through the blocking channel")

    monkeypatch.setattr(quorum_module, "ask_describe_quorum", blocking)
    answer = await describe_from_leader(voters(follower, leader), lambda: 1)()
    assert_described(QuorumDescription.from_answer(answer, leader), leader)


@pytest.mark.asyncio
async def test_both_walks_name_what_each_address_said_when_no_leader_answers(
    quorum: tuple[str, str, FakeQuorumNode],
) -> None:
    follower, leader, leader_fake = quorum
    leader_fake.answer = pb.DescribeQuorumResponse(
        error_code=NotLeaderOrFollowerError.code, quorum_epoch=4, leader_id=NONE
    )
    expected = f"no quorum leader found: {leader}: no leader known in quorum epoch 4"
    with pytest.raises(ReplogError) as blocking:
        await asyncio.to_thread(describe_quorum, [follower, leader], {}, 2.0)
    with pytest.raises(ReplogError) as aio:
        await describe_from_leader(voters(follower, leader), lambda: 1)()
    assert str(blocking.value) == str(aio.value) == expected
    assert leader_fake.calls == 2  # once per walk: the follower's answer led there first
