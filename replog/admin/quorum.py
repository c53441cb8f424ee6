"""Describe the metadata quorum over the cluster's internal Raft service: ask nodes'
DescribeQuorum, follow a non-leader's answer to the leader, and read the leader's answer as
Kafka's tools do (`quorum_description.QuorumDescription`).

Used by `replog cluster start --wait`, `cluster status` and `cluster restart-node` (blocking: a
plain gRPC channel per call), and by a controller's Kafka DescribeQuorum (`kafka_quorum_apis`,
`ask_or_why_async` on `grpc.aio`), which walks to the leader the same way (`LeaderSearch`).
Clients ask Kafka's DescribeQuorum on a controller's Kafka listener instead.

Rules:
- Only the leader describes the quorum: another node answers with the leader's id, and
  `describe_quorum` asks the leader next, at the address the caller's `addresses` or the
  answering node's endpoints give for that id.
- Each node gets a private channel (no subchannel shared with an earlier failed call) and one
  attempt bounded by `timeout_s`; a node that does not answer is `NodeUnreachable` naming its
  address and why ("connection refused", "no answer within 2 s").
- No leader found: `ReplogError` naming every address tried and what each said.
- -1 on the wire ("not known in this epoch") is None here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor

import grpc

from replog.admin import bootstrap as admin_bootstrap
from replog.admin.quorum_description import NONE, QuorumDescription
from replog.errors import NotLeaderOrFollowerError, ReplogError
from replog.pb import raft_pb2 as pb
from replog.pb import raft_pb2_grpc
from replog.wire.link_security import blocking_grpc_channel, grpc_channel

REQUEST_TIMEOUT_S = 2.0
_PRIVATE_SUBCHANNEL = [("grpc.use_local_subchannel_pool", 1)]


# --- asking nodes -----------------------------------------------------------------------------


class NodeUnreachable(ReplogError):
    """A node that did not answer; `reason` is short ("connection refused", "timed out")."""

    def __init__(self, address: str, reason: str) -> None:
        super().__init__(f"{address}: {reason}")
        self.address = address
        self.reason = reason


def ask_describe_quorum(
    address: str, timeout_s: float = REQUEST_TIMEOUT_S
) -> pb.DescribeQuorumResponse:
    """One node's DescribeQuorum answer (the quorum, or NOT_LEADER naming the leader it knows)."""
    # A private subchannel: gRPC otherwise shares connections between channels to the same
    # address, and one that failed while the node was down keeps failing fast, without trying,
    # for up to its reconnect backoff (1 s and growing), after the node is back.
    with blocking_grpc_channel(address, _PRIVATE_SUBCHANNEL) as channel:
        stub = raft_pb2_grpc.RaftQuorumStub(channel)  # type: ignore[no-untyped-call]
        try:
            answer: pb.DescribeQuorumResponse = stub.DescribeQuorum(
                pb.DescribeQuorumRequest(), timeout=timeout_s
            )
        except grpc.RpcError as exc:
            raise NodeUnreachable(address, _failure_reason(exc, timeout_s)) from None
    return answer


async def ask_describe_quorum_async(
    address: str, timeout_s: float = REQUEST_TIMEOUT_S
) -> pb.DescribeQuorumResponse:
    """`ask_describe_quorum` on `grpc.aio` (the same private subchannel and failures)."""
    async with grpc_channel(address, _PRIVATE_SUBCHANNEL) as channel:
        stub = raft_pb2_grpc.RaftQuorumStub(channel)  # type: ignore[no-untyped-call]
        try:
            answer: pb.DescribeQuorumResponse = await stub.DescribeQuorum(
                pb.DescribeQuorumRequest(), timeout=timeout_s
            )
        except grpc.aio.AioRpcError as exc:
            raise NodeUnreachable(address, _failure_reason(exc, timeout_s)) from None
    return answer


def ask_each(
    addresses: Iterable[str], timeout_s: float = REQUEST_TIMEOUT_S
) -> dict[str, pb.DescribeQuorumResponse | NodeUnreachable]:
    """Every node's DescribeQuorum answer (or why it gave none), asked in parallel."""
    addresses = list(addresses)
    if not addresses:
        return {}
    with ThreadPoolExecutor(max_workers=len(addresses)) as pool:
        answers = pool.map(lambda address: ask_or_why(address, timeout_s), addresses)
        return dict(zip(addresses, answers, strict=True))


def ask_or_why(address: str, timeout_s: float) -> pb.DescribeQuorumResponse | NodeUnreachable:
    """`ask_describe_quorum`, its failure returned."""
    try:
        return ask_describe_quorum(address, timeout_s)
    except NodeUnreachable as exc:
        return exc


async def ask_or_why_async(
    address: str, timeout_s: float
) -> pb.DescribeQuorumResponse | NodeUnreachable:
    """`ask_describe_quorum_async`, its failure returned."""
    try:
        return await ask_describe_quorum_async(address, timeout_s)
    except NodeUnreachable as exc:
        return exc


def _failure_reason(exc: grpc.RpcError, timeout_s: float) -> str:
    code = exc.code()
    details = exc.details() or ""
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return f"no answer within {timeout_s:g} s"
    if code == grpc.StatusCode.UNAVAILABLE:
        return "connection refused" if "refused" in details.lower() else f"unavailable: {details}"
    return f"{code.name.lower()}: {details}"


# --- walking to the leader ----------------------------------------------------------------


def describe_quorum(
    bootstrap: Sequence[str],
    addresses: Mapping[int, str],
    timeout_s: float = REQUEST_TIMEOUT_S,
) -> QuorumDescription:
    """Ask the bootstrap servers in turn, following a non-leader's answer to the leader.

    `addresses` maps node ids to host:port, to reach a leader named by another node.
    Raises `ReplogError` naming every address tried and what each said.
    """
    search = LeaderSearch(bootstrap, addresses)
    while (address := search.next_address()) is not None:
        if (found := search.take(address, ask_or_why(address, timeout_s))) is not None:
            return found
    raise search.failure()


class LeaderSearch:
    """The walk of `describe_quorum` (module Rules): which address to ask next, and what the
    answers so far mean; the asking is the caller's (blocking or asyncio)."""

    def __init__(self, bootstrap: Sequence[str], addresses: Mapping[int, str]) -> None:
        self._addresses = addresses
        self._failures: list[NodeUnreachable] = []
        self._answers: list[str] = []  # what reachable nodes that are not the leader said
        self._asked: set[str] = set()
        self._pending = list(bootstrap)

    def next_address(self) -> str | None:
        """The next address to ask; None when none is left (`failure` says why)."""
        while self._pending:
            address = self._pending.pop(0)
            if address not in self._asked:
                self._asked.add(address)
                return address
        return None

    def take(
        self, address: str, answer: pb.DescribeQuorumResponse | NodeUnreachable
    ) -> QuorumDescription | None:
        """The quorum, if `address` is the leader; else None, the leader it named queued."""
        if isinstance(answer, NodeUnreachable):
            self._failures.append(answer)
            return None
        if answer.error_code == 0:
            return QuorumDescription.from_answer(answer, address)
        if answer.error_code != NotLeaderOrFollowerError.code:
            self._answers.append(f"{address}: error code {answer.error_code}")
            return None
        if answer.leader_id == NONE:
            self._answers.append(
                f"{address}: no leader known in quorum epoch {answer.quorum_epoch}"
            )
            return None
        # The caller's names first; else where the answering node says the leader listens.
        known = {**admin_bootstrap.endpoint_addresses(answer.nodes), **self._addresses}
        leader_address = known.get(answer.leader_id)
        if leader_address is None:
            self._answers.append(
                f"{address}: the leader is node {answer.leader_id}, whose address is unknown "
                f"(name it in --bootstrap-server as {answer.leader_id}@host:port)"
            )
        elif leader_address in self._asked:
            self._answers.append(
                f"{address}: the leader is node {answer.leader_id} at {leader_address}"
            )
        else:
            self._pending.insert(0, leader_address)
        return None

    def failure(self) -> ReplogError:
        """No leader found: every address tried and what each said."""
        return ReplogError(_no_leader_message(self._failures, self._answers))


def _no_leader_message(failures: Sequence[NodeUnreachable], answers: Sequence[str]) -> str:
    unreachable = ""
    if failures:
        reasons = {f.reason for f in failures}
        if len(reasons) == 1:
            unreachable = f"{', '.join(f.address for f in failures)}: {reasons.pop()}"
        else:
            unreachable = "; ".join(str(f) for f in failures)
    if not answers:
        return f"no quorum node reachable at {unreachable}"
    return "no quorum leader found: " + "; ".join([*answers, *([unreachable] if failures else [])])
