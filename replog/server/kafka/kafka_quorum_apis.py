"""DescribeQuorum (API 55) on a Kafka listener, a broker's or a controller's: the metadata
quorum as its Raft leader describes it, in Kafka's form (`kafka-metadata-quorum describe`).

Rules:
- The quorum is asked of the Raft leader over gRPC (`RaftQuorum.DescribeQuorum`, what `replog
  quorum describe` reads; `replog.admin.quorum.LeaderSearch` walks to the leader): the leader
  this node knows first, then every voter in turn. A Kafka broker forwards the request to the
  controller; here any node asks the quorum itself.
- The answer names one partition, `__cluster_metadata`-0, Kafka's metadata topic. A request
  naming another topic or partition gets UNKNOWN_TOPIC_OR_PARTITION for it (Kafka's check).
- Voters (the leader first) and observers (nodes that fetch the metadata log without a vote:
  broker-only nodes) carry their log end offsets and their last fetch and caught-up times in
  wall-clock ms (-1: not known in this epoch). Directory ids are zero: the quorum is static
  (`controller.quorum.voters`), with no KIP-853 directory ids.
- v2 lists each voter's listeners: its Kafka controller listener where it serves one
  (`controller_endpoints`), else its gRPC address under the name of this node's first listener,
  as `controller.quorum.voters` gives it.
- No leader found (none elected, none reachable): NOT_LEADER_OR_FOLLOWER, which the admin
  client retries until its timeout, with the message naming what each voter said.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping

from replog.admin.quorum import LeaderSearch, ask_or_why_async
from replog.errors import NotLeaderOrFollowerError, ReplogError, UnknownTopicOrPartitionError
from replog.kafka.connection import KafkaRequest, Served
from replog.kafka.messages import describe_quorum_response as dqr
from replog.kafka.messages.describe_quorum_request import DescribeQuorumRequest
from replog.net_address import format_host_port
from replog.pb import raft_pb2 as pb
from replog.quorum.metadata.records import Endpoint
from replog.quorum.raft.config import VoterAddress

DESCRIBE_QUORUM = 55
QUORUM_SERVED: Mapping[int, tuple[int, int]] = {DESCRIBE_QUORUM: (0, 2)}
METADATA_TOPIC = "__cluster_metadata"
METADATA_PARTITION = 0
NODES_VERSION = 2  # DescribeQuorum's first version with the voters' listeners
DESCRIBE_TIMEOUT_S = 2.0
# The quorum as the leader describes it; raises ReplogError when no leader answered.
DescribeFromLeader = Callable[[], Awaitable[pb.DescribeQuorumResponse]]
# Voter id -> its Kafka controller listener, for the voters that serve one.
ControllerListeners = Callable[[], Awaitable[Mapping[int, Endpoint]]]


def describe_from_leader(
    voters: Iterable[VoterAddress],
    leader_id: Callable[[], int | None],
    timeout_s: float = DESCRIBE_TIMEOUT_S,
) -> DescribeFromLeader:
    """Ask the leader `leader_id` names first, then every voter (module docstring)."""
    addresses = {v.node_id: format_host_port(v.host, v.port) for v in voters}

    async def describe() -> pb.DescribeQuorumResponse:
        leader = leader_id()
        order = sorted(addresses, key=lambda i: (i != leader, i))
        search = LeaderSearch([addresses[i] for i in order], addresses)
        while (address := search.next_address()) is not None:
            answer = await ask_or_why_async(address, timeout_s)
            if search.take(address, answer) is not None:
                assert isinstance(answer, pb.DescribeQuorumResponse)
                return answer
        raise search.failure()

    return describe


class KafkaQuorumApis:
    """The DescribeQuorum handler of a node's Kafka listeners."""

    def __init__(
        self,
        describe: DescribeFromLeader,
        *,
        controller_listeners: ControllerListeners,
        grpc_listener_name: str,
    ) -> None:
        self._describe = describe
        self._controller_listeners = controller_listeners
        self._grpc_listener_name = grpc_listener_name

    @property
    def served(self) -> Served:
        return QUORUM_SERVED

    async def handle(self, request: KafkaRequest, listener_name: str) -> dqr.DescribeQuorumResponse:
        body = request.body
        assert isinstance(body, DescribeQuorumRequest)
        return await self.describe_quorum(body, request.api_version)

    async def describe_quorum(
        self, request: DescribeQuorumRequest, version: int
    ) -> dqr.DescribeQuorumResponse:
        asked = [(t.topic_name, p.partition_index) for t in request.topics for p in t.partitions]
        if asked != [(METADATA_TOPIC, METADATA_PARTITION)]:
            return _unknown_partitions(asked)
        try:
            answer = await self._describe()
        except ReplogError as exc:
            return dqr.DescribeQuorumResponse(
                error_code=NotLeaderOrFollowerError.code,
                error_message=f"no quorum leader answered DescribeQuorum: {exc}",
            )
        partition = dqr.PartitionData(
            partition_index=METADATA_PARTITION,
            leader_id=answer.leader_id,
            leader_epoch=answer.quorum_epoch,
            high_watermark=answer.high_watermark,
            current_voters=[_replica(r) for r in _leader_first(answer)],
            observers=[_replica(r) for r in answer.observers],
        )
        nodes = await self._nodes(answer) if version >= NODES_VERSION else []
        return dqr.DescribeQuorumResponse(
            topics=[dqr.TopicData(topic_name=METADATA_TOPIC, partitions=[partition])],
            nodes=nodes,
        )

    async def _nodes(self, answer: pb.DescribeQuorumResponse) -> list[dqr.Node]:
        controllers = await self._controller_listeners()
        nodes = []
        for voter in sorted(answer.nodes, key=lambda n: n.node_id):
            listener = controllers.get(voter.node_id)
            if listener is None:
                listener = Endpoint(self._grpc_listener_name, voter.host, voter.port)
            nodes.append(
                dqr.Node(
                    node_id=voter.node_id,
                    listeners=[
                        dqr.Listener(name=listener.name, host=listener.host, port=listener.port)
                    ],
                )
            )
        return nodes


def _leader_first(answer: pb.DescribeQuorumResponse) -> list[pb.ReplicaState]:
    return sorted(answer.voters, key=lambda r: r.replica_id != answer.leader_id)


def _replica(replica: pb.ReplicaState) -> dqr.ReplicaState:
    return dqr.ReplicaState(
        replica_id=replica.replica_id,
        log_end_offset=replica.log_end_offset,
        last_fetch_timestamp=replica.last_fetch_ms,
        last_caught_up_timestamp=replica.last_caught_up_ms,
    )


def _unknown_partitions(asked: list[tuple[str, int]]) -> dqr.DescribeQuorumResponse:
    by_topic: dict[str, list[dqr.PartitionData]] = {}
    for topic, partition in asked:
        by_topic.setdefault(topic, []).append(
            dqr.PartitionData(
                partition_index=partition,
                error_code=UnknownTopicOrPartitionError.code,
                error_message=(
                    f"{topic}-{partition}: the metadata quorum is "
                    f"{METADATA_TOPIC}-{METADATA_PARTITION}"
                ),
            )
        )
    return dqr.DescribeQuorumResponse(
        topics=[dqr.TopicData(topic_name=t, partitions=p) for t, p in by_topic.items()]
    )
