"""`ControllerClient` and `AsyncControllerClient`: small clients of the Controller gRPC service.

The blocking one serves the CLI (`replog topics`, ...), the asyncio one (on `grpc.aio`) the
Python Admin client. One method per admin RPC of `proto/replog/pb/controller.proto`, taking and
returning the dataclasses of `controller_results`; both have the same methods. How a call finds
the controller and retries is written once, as the steps a driver runs (an attempt at one
address, a pause): each client runs them its own way, blocking or awaited.

Finding the active controller:
- Requests go to the active controller once it is known, else to the bootstrap addresses in
  turn. Every response names the active controller (`controller_id`); a node that is not the
  active one answers writes with NOT_CONTROLLER, and the client asks the named node next. Its
  address comes from `node_addresses` (the CLI fills it from the local cluster's
  `cluster.json`), else from `id@host:port` bootstrap entries, else from an earlier answer
  (an address that accepted a write is the controller's), else from the DescribeCluster answer
  of the node that named it (its controllers, from `controller.quorum.voters`): one bootstrap
  address is enough, as with Kafka's `--bootstrap-server`. When it is still unknown, the
  client goes on with the other bootstrap addresses.
- Reads (Metadata, DescribeCluster, DescribeConfigs, ListPartitionReassignments) are answered
  by any controller at its committed offset. A standby may lag the active controller by a
  moment, so when a standby answers and the active controller's address is known, the client
  asks the active one too (read-your-writes across invocations) and falls back to the standby's
  answer if the active one does not answer.

Channels: one gRPC channel per address, kept between calls, each with a connection of its
own (`_CHANNEL_OPTIONS`). An attempt that fails UNAVAILABLE (refused, reset, the node going
away) drops its address's channel, closed once no attempt uses it, and the next attempt dials
afresh, paced by the backoff below: the first attempt after the node listens connects. A fresh
channel's first call waits for its own connection attempt, so its thread reads the outcome.
A kept channel would fail each call at once while gRPC reconnects it in the background, and
under gRPC's polling engine (`replog.wire.grpc_engine`) nothing reads that reconnection's
outcome for a blocking channel no call waits on but gRPC's backup poller, every 5 s: its first
answer would come 5-10 s after the node serves (docs/reliability.md, "Admin client against a
starting node").

Timeouts and retries:
- Each call has a deadline (`timeout_s`, else the client's `default_timeout_s`); each attempt
  is bounded by `request_timeout_s` and by what is left of the deadline. The request's own
  `timeout_ms` (how long the controller may wait for the commit) is a little shorter, so that
  a write that cannot commit in time comes back as the controller's REQUEST_TIMED_OUT, naming
  the cause, rather than as a silent gRPC deadline.
- Retried until the deadline: an unreachable node (gRPC UNAVAILABLE, an attempt that timed out)
  and NOT_CONTROLLER, the whole request's or every item's. After each round over the known
  addresses the client backs off (`retry_backoff_s`, doubling up to `max_retry_backoff_s`).
  As in Kafka, a retried write whose first attempt was applied reports the item's new state
  (TOPIC_ALREADY_EXISTS after a create that timed out but happened).
- Refused from the start: when every address of a round refuses the connection and none has
  answered during the call, the first refusal is logged at WARNING (once per call), and once
  the refusals have lasted `refused_timeout_s` (a client's
  `socket.connection.setup.timeout.max.ms`, 30 s) the call raises NoBrokersAvailableError
  naming the addresses and "connection refused" instead of waiting out its deadline.
- Not retried: any other error. A request-level error raises its `replog.errors` class with
  the server's message; per-item errors are returned in the item's `error`. When the deadline
  passes, `KafkaTimeoutError` (the client-side timeout, as kafka-python's admin raises and
  docs/client.md promises) names every address tried and what it last said (an attempt the
  deadline cut short to a timeout does not replace an earlier answer, nor a failure to connect
  an earlier refusal). A node that does not serve the Controller service (gRPC UNIMPLEMENTED)
  is skipped; if no node serves it, `UnsupportedVersionError`. A gRPC failure never escapes
  as a bare `grpc.RpcError`.
- Ctrl-C (KeyboardInterrupt) interrupts a call at once, cancelling the RPC in flight.

Thread safety: one client may be shared between threads; calls do not block each other.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Coroutine, Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Concatenate, Generic, ParamSpec, Protocol, TypeVar
from uuid import UUID

import grpc

from replog.admin.bootstrap import endpoint_addresses, parse_bootstrap
from replog.admin.call_budget import (
    DEFAULT_TIMEOUT_S,
    MAX_RETRY_BACKOFF_S,
    REFUSED_TIMEOUT_S,
    REQUEST_TIMEOUT_S,
    RETRY_BACKOFF_S,
    server_wait_ms,
)
from replog.admin.cluster_metadata import ClusterDescription, ClusterMetadata
from replog.admin.controller_errors import error_from_status
from replog.clock import monotonic_ms
from replog.common import TopicPartition
from replog.errors import (
    InvalidRequestError,
    KafkaTimeoutError,
    NoBrokersAvailableError,
    NotControllerError,
    ReplogError,
    UnknownServerError,
    UnsupportedVersionError,
)
from replog.pb import common_pb2
from replog.pb import controller_pb2 as pb
from replog.wire.grpc_reconnect import RECONNECT_OPTIONS
from replog.wire.link_security import blocking_grpc_channel, grpc_channel

if TYPE_CHECKING:
    from replog.admin.controller_results import (
        AlterConfigOp,
        ConfigResource,
        ConfigsAltered,
        CreatedTopic,
        DeletedTopic,
        ElectionResult,
        ElectionType,
        NewPartitions,
        NewTopic,
        OngoingReassignment,
        PartitionsCreated,
        ReassignmentResult,
        ResourceConfigs,
    )

# What `_classify` says of an address that refused the connection (the polling engine words a
# refused reconnection as a failure to connect).
_REFUSED = "connection refused"
_CANNOT_CONNECT = "cannot connect (nothing answers at this address)"
_REFUSALS = (_REFUSED, _CANNOT_CONNECT)

log = logging.getLogger("replog.admin")

_SERVICE = pb.DESCRIPTOR.services_by_name["Controller"].full_name  # replog.pb.Controller

_CHANNEL_OPTIONS = [
    # A private subchannel per channel: gRPC otherwise shares connections between channels to
    # one address, and a connection that failed while the node was down keeps failing fast,
    # without trying, for its whole reconnect backoff after the node is back.
    ("grpc.use_local_subchannel_pool", 1),
    # A node that restarts is tried again within a second, not after gRPC's default 2 minutes
    # (replog/wire/grpc_reconnect.py).
    *RECONNECT_OPTIONS,
]


@dataclass(slots=True)
class _Dial:
    """A channel to one address, its RPCs' callables (by name), and the attempts on it."""

    channel: Any
    methods: dict[str, Any] = field(default_factory=dict)
    attempts: int = 0  # in flight
    dropped: bool = False  # replaced after UNAVAILABLE: closed once its last attempt ends


class _Response(Protocol):
    """What every Controller response has."""

    controller_id: int
    error: common_pb2.ErrorStatus

    def ListFields(self) -> list[tuple[Any, Any]]: ...


_R = TypeVar("_R", bound=_Response)


class _Unreachable(Exception):
    """An attempt that got no answer from the Controller service at one address."""

    def __init__(self, reason: str, *, permanent: bool = False, timed_out: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.permanent = permanent  # the node does not serve the service: skip it for this call
        self.timed_out = timed_out  # the attempt's own time ran out (not a refusal)


@dataclass(frozen=True, slots=True)
class _Ask:
    """A step of a call: one attempt of `rpc` at `address`, bounded by `timeout_ms`."""

    address: str
    rpc: str
    request: Any
    response_type: type[Any]
    timeout_ms: int


@dataclass(frozen=True, slots=True)
class _Pause:
    """A step of a call: back off before the next round."""

    seconds: float


_Step = _Ask | _Pause
T = TypeVar("T")
P = ParamSpec("P")


@dataclass(frozen=True, slots=True)
class _Op(Generic[T]):
    """One admin RPC: its request, whether it writes, and how its answer is read."""

    rpc: str
    request: Any
    response_type: type[Any]
    write: bool
    parse: Callable[[Any], T]
    timeout_s: float | None  # the whole call's (None: the client's default)


class _ControllerRouting:
    """What both clients share: the addresses known, the active controller, and the steps of
    a call (module docstring)."""

    def __init__(
        self,
        bootstrap: str | Sequence[str],
        *,
        node_addresses: Mapping[int, str] | None = None,
        default_timeout_s: float = DEFAULT_TIMEOUT_S,
        request_timeout_s: float = REQUEST_TIMEOUT_S,
        retry_backoff_s: float = RETRY_BACKOFF_S,
        max_retry_backoff_s: float = MAX_RETRY_BACKOFF_S,
        refused_timeout_s: float = REFUSED_TIMEOUT_S,
    ) -> None:
        parsed = parse_bootstrap(bootstrap)
        self.bootstrap: tuple[str, ...] = parsed.addresses
        self._node_addresses: dict[int, str] = {**(node_addresses or {}), **parsed.node_addresses}
        self.default_timeout_s = default_timeout_s
        self.request_timeout_s = request_timeout_s
        self.retry_backoff_s = retry_backoff_s
        self.max_retry_backoff_s = max_retry_backoff_s
        self.refused_timeout_s = refused_timeout_s
        self._lock = threading.Lock()
        self._channels: dict[str, _Dial] = {}  # by address: the channel its attempts use
        self._controller: str | None = None  # the active controller's address, once known
        self._closed = False

    @property
    def node_addresses(self) -> dict[int, str]:
        """The controllers' addresses known so far, by node id (a copy)."""
        with self._lock:
            return dict(self._node_addresses)

    @property
    def controller_address(self) -> str | None:
        """The active controller's address as last learned, if any."""
        return self._controller

    # --- finding the controller and calling it ------------------------------------------------

    def _calling(
        self,
        rpc: str,
        request: Any,
        response_type: type[_R],
        write: bool,
        timeout_s: float | None,
    ) -> Generator[_Step, Any, _R]:
        """`rpc` at the active controller, retried until the deadline (module docstring), as
        the steps a driver runs: each `_Ask` is sent back its answer (or has the failure to get
        one thrown in), each `_Pause` is waited out."""
        budget_s = self.default_timeout_s if timeout_s is None else timeout_s
        deadline_ms = monotonic_ms() + int(budget_s * 1000)
        said: dict[str, str] = {}  # address -> what it last said or why it said nothing
        answered: set[str] = set()  # addresses whose Controller service answered
        skipped: set[str] = set()  # addresses that do not serve the Controller service
        consulted: set[str] = set()  # addresses asked where the controller they named is
        backoff_s = self.retry_backoff_s
        refused_since_ms: int | None = None  # every address refused since (module docstring)
        while True:
            pending = deque(a for a in self._round() if a not in skipped)
            if not pending:
                raise UnsupportedVersionError(
                    f"{rpc}: no node serves the Controller service: {_summary(said)}"
                )
            asked: set[str] = set()
            fallback: _R | None = None  # a standby's answer to a read, while the active is asked
            while pending:
                address = pending.popleft()
                if address in asked or address in skipped:
                    continue
                asked.add(address)
                remaining_ms = deadline_ms - monotonic_ms()
                if remaining_ms <= 0:
                    break
                attempt_ms = min(int(self.request_timeout_s * 1000), remaining_ms)
                if "timeout_ms" in request.DESCRIPTOR.fields_by_name:
                    request.timeout_ms = server_wait_ms(attempt_ms)
                try:
                    response: _R = yield _Ask(address, rpc, request, response_type, attempt_ms)
                except _Unreachable as exc:
                    # An attempt the call's deadline cut short says nothing about the node:
                    # what it said before (e.g. "not the controller") stays the better account.
                    cut_short = exc.timed_out and attempt_ms < self.request_timeout_s * 1000
                    # Nor does a failure to connect where the node refused before: gRPC's
                    # polling engine words later refusals so (from ~0.3 s of retries on).
                    vaguer = exc.reason == _CANNOT_CONNECT and said.get(address) == _REFUSED
                    if not (cut_short and address in said) and not vaguer:
                        said[address] = exc.reason
                    if exc.permanent:
                        skipped.add(address)
                    self._forget_controller(address)
                    if fallback is not None:
                        return fallback
                    continue
                answered.add(address)
                not_controller = _is_not_controller(response)
                controller = self._learn(address, response, write and not not_controller)
                if (
                    not_controller
                    and controller is None
                    and response.controller_id >= 0
                    and address not in consulted
                ):
                    consulted.add(address)
                    controller = yield from self._discovering(
                        address, response.controller_id, deadline_ms
                    )
                if not_controller:
                    said[address] = f"not the controller ({self._controller_text(response)})"
                    if fallback is not None:
                        return fallback
                    if controller is not None and controller not in asked:
                        pending.appendleft(controller)  # redirect at once: no backoff
                    continue
                error = error_from_status(response.error)
                if error is not None:
                    raise error
                if (
                    not write
                    and fallback is None
                    and controller is not None
                    and controller != address
                    and controller not in asked
                ):
                    fallback = response  # a standby answered: ask the active one too
                    pending.appendleft(controller)
                    continue
                return response
            if fallback is not None:
                return fallback
            if all(a in skipped for a in self._round()):
                continue  # the check at the top of the loop raises, without a pointless wait
            now_ms = monotonic_ms()
            remaining_ms = deadline_ms - now_ms
            if answered or not asked or any(said.get(a) not in _REFUSALS for a in asked):
                refused_since_ms = None
            elif refused_since_ms is None:
                refused_since_ms = now_ms
                log.warning(
                    "%s: connection refused at %s; retrying for up to "
                    "socket.connection.setup.timeout.max.ms=%d ms",
                    rpc,
                    ", ".join(asked),
                    int(self.refused_timeout_s * 1000),
                )
            wait_ms = remaining_ms
            if refused_since_ms is not None:
                refused_ms = int(self.refused_timeout_s * 1000) - (now_ms - refused_since_ms)
                if refused_ms <= 0:
                    raise NoBrokersAvailableError(
                        f"{rpc}: no answer from {', '.join(asked)}: connection refused, at "
                        f"every attempt for {now_ms - refused_since_ms} ms "
                        f"(socket.connection.setup.timeout.max.ms="
                        f"{int(self.refused_timeout_s * 1000)}): is the cluster running, and "
                        "is the bootstrap address right?"
                    )
                wait_ms = min(wait_ms, refused_ms)
            if remaining_ms <= 0:
                # A node without the Controller service (skipped) answered too.
                raise KafkaTimeoutError(_no_answer(rpc, budget_s, said, answered | skipped))
            yield _Pause(min(backoff_s, wait_ms / 1000))
            backoff_s = min(backoff_s * 2, self.max_retry_backoff_s)

    def _round(self) -> list[str]:
        """Where to ask, in order: the active controller when known, then the bootstrap list."""
        controller = self._controller
        first = [controller] if controller is not None else []
        return list(dict.fromkeys([*first, *self.bootstrap]))

    def _learn(self, address: str, response: _Response, accepted_write: bool) -> str | None:
        """Remember what an answer says about the active controller; its address, if known.
        `accepted_write`: this answer is the node's acceptance of a write."""
        with self._lock:
            controller_id = response.controller_id
            if accepted_write and controller_id >= 0:
                # A node that accepted a write is the active controller: now its id has an
                # address even when neither the local cluster nor the bootstrap list named it.
                self._node_addresses.setdefault(controller_id, address)
            controller = self._node_addresses.get(controller_id) if controller_id >= 0 else None
            if accepted_write and controller is None:
                controller = address
            if controller is not None:
                self._controller = controller
            return controller

    def _discovering(
        self, address: str, controller_id: int, deadline_ms: int
    ) -> Generator[_Step, Any, str | None]:
        """The address of node `controller_id`, asked of the node at `address` that named it:
        its DescribeCluster lists the quorum's controllers (`controller.quorum.voters`). One
        attempt; None when it gives no answer or does not know the node either."""
        remaining_ms = deadline_ms - monotonic_ms()
        if remaining_ms <= 0:
            return None
        attempt_ms = min(int(self.request_timeout_s * 1000), remaining_ms)
        try:
            answer = yield _Ask(
                address,
                "DescribeCluster",
                pb.DescribeClusterRequest(),
                pb.DescribeClusterResponse,
                attempt_ms,
            )
        except (_Unreachable, ReplogError):
            return None
        with self._lock:
            for node_id, node_address in endpoint_addresses(answer.controllers).items():
                # Addresses the caller gave win: it may reach the nodes another way.
                self._node_addresses.setdefault(node_id, node_address)
            controller = self._node_addresses.get(controller_id)
            if controller is not None:
                self._controller = controller
            return controller

    def _dialled(self, ask: _Ask, open_channel: Callable[..., Any]) -> tuple[_Dial, Any]:
        """The channel to `ask.address` (opened with `open_channel` when there is none) and
        `ask.rpc`'s callable on it, counted as one attempt in flight until `_ended`. The
        callable is built from the RPC's name and message types, as the generated stub builds
        it, without loading the stub's module (one import less at each command's start-up)."""
        with self._lock:
            if self._closed:
                raise ReplogError("the controller client is closed")
            dial = self._channels.get(ask.address)
            if dial is None:
                channel = open_channel(ask.address, options=_CHANNEL_OPTIONS)
                dial = self._channels[ask.address] = _Dial(channel)
            method = dial.methods.get(ask.rpc)
            if method is None:
                method = dial.methods[ask.rpc] = dial.channel.unary_unary(
                    f"/{_SERVICE}/{ask.rpc}",
                    request_serializer=type(ask.request).SerializeToString,
                    response_deserializer=ask.response_type.FromString,
                    _registered_method=True,
                )
            dial.attempts += 1
            return dial, method

    def _ended(self, address: str, dial: _Dial, unavailable: bool) -> bool:
        """An attempt on `dial` ended (`unavailable`: failed UNAVAILABLE, which drops the
        channel: the next attempt dials afresh, module docstring). True when the caller is to
        close the channel now: dropped, and no attempt left on it."""
        with self._lock:
            dial.attempts -= 1
            if unavailable and self._channels.get(address) is dial:
                del self._channels[address]
                dial.dropped = True
            return dial.dropped and dial.attempts == 0

    def _forget_controller(self, address: str) -> None:
        with self._lock:
            if self._controller == address:
                self._controller = None

    def _controller_text(self, response: _Response) -> str:
        controller_id = response.controller_id
        if controller_id < 0:
            return "no active controller known"
        address = self._node_addresses.get(controller_id)
        if address is None:
            return f"the controller is node {controller_id}, whose address is unknown"
        return f"the controller is node {controller_id} at {address}"


# --- the admin RPCs, each declared once for both clients (`_Op`) -------------------------
# The result classes of the changes, configs and reassignments are imported by the RPC that
# returns them: a command that only reads the cluster's metadata (`replog topics list`) loads
# none of them (their dataclasses are a good part of its start-up).


def _create_topics_op(
    topics: Sequence[NewTopic],
    *,
    validate_only: bool = False,
    timeout_s: float | None = None,
) -> _Op[list[CreatedTopic]]:
    from replog.admin.controller_results import CreatedTopic

    request = pb.CreateTopicsRequest(
        topics=[t.to_pb() for t in topics], validate_only=validate_only
    )
    return _Op(
        "CreateTopics",
        request,
        pb.CreateTopicsResponse,
        True,
        lambda response: [CreatedTopic.from_pb(t) for t in response.topics],
        timeout_s,
    )


def _delete_topics_op(
    names: Sequence[str] = (),
    *,
    topic_ids: Sequence[UUID] = (),
    timeout_s: float | None = None,
) -> _Op[list[DeletedTopic]]:
    from replog.admin.controller_results import DeletedTopic

    request = pb.DeleteTopicsRequest(
        topic_names=list(names), topic_ids=[i.bytes for i in topic_ids]
    )
    return _Op(
        "DeleteTopics",
        request,
        pb.DeleteTopicsResponse,
        True,
        lambda response: [DeletedTopic.from_pb(t) for t in response.topics],
        timeout_s,
    )


def _create_partitions_op(
    increases: Sequence[NewPartitions],
    *,
    validate_only: bool = False,
    timeout_s: float | None = None,
) -> _Op[list[PartitionsCreated]]:
    from replog.admin.controller_results import PartitionsCreated

    request = pb.CreatePartitionsRequest(
        topics=[i.to_pb() for i in increases], validate_only=validate_only
    )
    return _Op(
        "CreatePartitions",
        request,
        pb.CreatePartitionsResponse,
        True,
        lambda response: [PartitionsCreated.from_pb(r) for r in response.results],
        timeout_s,
    )


def _describe_cluster_op(*, timeout_s: float | None = None) -> _Op[ClusterDescription]:
    return _Op(
        "DescribeCluster",
        pb.DescribeClusterRequest(),
        pb.DescribeClusterResponse,
        False,
        lambda response: ClusterDescription.from_pb(response),
        timeout_s,
    )


def _metadata_op(
    topics: Sequence[str] | None = None, *, timeout_s: float | None = None
) -> _Op[ClusterMetadata]:
    """The brokers and the topics named (None or empty: every topic)."""
    request = pb.MetadataRequest(topics=list(topics or ()))
    return _Op(
        "Metadata",
        request,
        pb.MetadataResponse,
        False,
        lambda response: ClusterMetadata.from_pb(response),
        timeout_s,
    )


def _describe_configs_op(
    resources: Sequence[ConfigResource],
    *,
    keys: Sequence[str] = (),
    timeout_s: float | None = None,
) -> _Op[list[ResourceConfigs]]:
    """Every config of each resource, or only `keys` when given."""
    from replog.admin.controller_results import ResourceConfigs

    request = pb.DescribeConfigsRequest(
        resources=[
            pb.ConfigResourceKeys(
                resource_type=int(r.resource_type),
                resource_name=r.name,
                configuration_keys=list(keys),
            )
            for r in resources
        ]
    )
    return _Op(
        "DescribeConfigs",
        request,
        pb.DescribeConfigsResponse,
        False,
        lambda response: [ResourceConfigs.from_pb(r) for r in response.results],
        timeout_s,
    )


def _incremental_alter_configs_op(
    changes: Mapping[ConfigResource, Sequence[AlterConfigOp]],
    *,
    validate_only: bool = False,
    timeout_s: float | None = None,
) -> _Op[list[ConfigsAltered]]:
    from replog.admin.controller_results import ConfigsAltered

    request = pb.IncrementalAlterConfigsRequest(
        resources=[
            pb.AlterConfigsResource(
                resource_type=int(resource.resource_type),
                resource_name=resource.name,
                configs=[op.to_pb() for op in ops],
            )
            for resource, ops in changes.items()
        ],
        validate_only=validate_only,
    )
    return _Op(
        "IncrementalAlterConfigs",
        request,
        pb.IncrementalAlterConfigsResponse,
        True,
        lambda response: [ConfigsAltered.from_pb(r) for r in response.results],
        timeout_s,
    )


def _elect_leaders_op(
    election_type: ElectionType,
    partitions: Iterable[TopicPartition] | None = None,
    *,
    timeout_s: float | None = None,
) -> _Op[list[ElectionResult]]:
    """Elect leaders of `partitions` (None: every eligible partition)."""
    from replog.admin.controller_results import ElectionResult, topic_partitions_to_pb

    request = pb.ElectLeadersRequest(
        election_type=int(election_type), partitions=topic_partitions_to_pb(partitions)
    )
    return _Op(
        "ElectLeaders",
        request,
        pb.ElectLeadersResponse,
        True,
        lambda response: [ElectionResult.from_pb(r) for r in response.results],
        timeout_s,
    )


def _list_partition_reassignments_op(
    partitions: Iterable[TopicPartition] | None = None,
    *,
    timeout_s: float | None = None,
) -> _Op[list[OngoingReassignment]]:
    """The ongoing reassignments of `partitions` (None: of every partition)."""
    from replog.admin.controller_results import OngoingReassignment, topic_partitions_to_pb

    request = pb.ListPartitionReassignmentsRequest(partitions=topic_partitions_to_pb(partitions))
    return _Op(
        "ListPartitionReassignments",
        request,
        pb.ListPartitionReassignmentsResponse,
        False,
        lambda response: [OngoingReassignment.from_pb(r) for r in response.reassignments],
        timeout_s,
    )


def _alter_partition_reassignments_op(
    reassignments: Mapping[TopicPartition, Sequence[int] | None],
    *,
    timeout_s: float | None = None,
) -> _Op[list[ReassignmentResult]]:
    """Move each partition to the replicas given; None cancels its ongoing reassignment."""
    from replog.admin.controller_results import ReassignmentResult

    by_topic: dict[str, list[pb.ReassignablePartition]] = {}
    for (topic, partition), replicas in reassignments.items():
        entry = pb.ReassignablePartition(partition_index=partition)
        if replicas is not None:
            entry.replicas.broker_ids.extend(replicas)
        by_topic.setdefault(topic, []).append(entry)
    request = pb.AlterPartitionReassignmentsRequest(
        topics=[pb.ReassignableTopic(name=t, partitions=ps) for t, ps in by_topic.items()]
    )
    return _Op(
        "AlterPartitionReassignments",
        request,
        pb.AlterPartitionReassignmentsResponse,
        True,
        lambda response: [ReassignmentResult.from_pb(r) for r in response.results],
        timeout_s,
    )


def _blocking(build: Callable[P, _Op[T]]) -> Callable[Concatenate[Any, P], T]:
    """The blocking client's method for the RPC `build` describes (its signature and doc)."""

    def method(self: ControllerClient, *args: Any, **kwargs: Any) -> Any:
        return self._perform(build(*args, **kwargs))

    named: Callable[Concatenate[Any, P], T] = _named(method, build)
    return named


def _awaited(build: Callable[P, _Op[T]]) -> Callable[Concatenate[Any, P], Coroutine[Any, Any, T]]:
    """The asyncio client's method for the RPC `build` describes (its signature and doc)."""

    async def method(self: AsyncControllerClient, *args: Any, **kwargs: Any) -> Any:
        return await self._perform(build(*args, **kwargs))

    named: Callable[Concatenate[Any, P], Coroutine[Any, Any, T]] = _named(method, build)
    return named


def _named(method: Callable[..., Any], build: Callable[..., Any]) -> Any:
    name = build.__name__.removeprefix("_").removesuffix("_op")
    method.__name__ = method.__qualname__ = name
    method.__doc__ = build.__doc__
    signature = inspect.signature(build)
    this = inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)
    method.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=[this, *signature.parameters.values()]
    )
    return method


class ControllerClient(_ControllerRouting):
    """A blocking client of the active controller (see the module docstring).

    `bootstrap`: `"host:port,id@host:port,..."` or a sequence of such entries.
    `node_addresses`: node id -> host:port of the controllers, when known (entries written
    `id@host:port` in `bootstrap` add to it).
    """

    # --- lifecycle ----------------------------------------------------------------------------

    def close(self) -> None:
        with self._lock:
            self._closed = True
            channels, self._channels = self._channels, {}
        for dial in channels.values():
            dial.channel.close()

    def __enter__(self) -> ControllerClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # The admin RPCs (`_Op`), blocking.
    create_topics = _blocking(_create_topics_op)
    delete_topics = _blocking(_delete_topics_op)
    create_partitions = _blocking(_create_partitions_op)
    describe_cluster = _blocking(_describe_cluster_op)
    metadata = _blocking(_metadata_op)
    describe_configs = _blocking(_describe_configs_op)
    incremental_alter_configs = _blocking(_incremental_alter_configs_op)
    elect_leaders = _blocking(_elect_leaders_op)
    list_partition_reassignments = _blocking(_list_partition_reassignments_op)
    alter_partition_reassignments = _blocking(_alter_partition_reassignments_op)

    # --- running a call -----------------------------------------------------------------------

    def _perform(self, op: _Op[T]) -> T:
        return op.parse(self._call(op.rpc, op.request, op.response_type, op.write, op.timeout_s))

    def _call(
        self,
        rpc: str,
        request: Any,
        response_type: type[_R],
        write: bool,
        timeout_s: float | None,
    ) -> _R:
        """`rpc` at the active controller, retried until the deadline (module docstring)."""
        steps = self._calling(rpc, request, response_type, write, timeout_s)
        answer: Any = None
        failure: BaseException | None = None
        while True:
            try:
                step = steps.send(answer) if failure is None else steps.throw(failure)
            except StopIteration as done:
                return done.value  # type: ignore[no-any-return]
            answer, failure = None, None
            if isinstance(step, _Pause):
                time.sleep(step.seconds)
                continue
            try:
                answer = self._attempt(step)
            except (_Unreachable, ReplogError) as exc:
                failure = exc

    def _attempt(self, ask: _Ask) -> Any:
        """One RPC to one address; a failure to get an answer is `_Unreachable`."""
        dial, method = self._dialled(ask, blocking_grpc_channel)
        unavailable = False
        try:
            call = method.future(ask.request, timeout=ask.timeout_ms / 1000)
            try:
                response = call.result()
            except KeyboardInterrupt:
                call.cancel()  # so that the server stops waiting on our behalf
                raise
        except grpc.RpcError as exc:
            unavailable = exc.code() == grpc.StatusCode.UNAVAILABLE
            raise _classify(ask.address, ask.rpc, exc, ask.timeout_ms) from None
        finally:
            if self._ended(ask.address, dial, unavailable):
                dial.channel.close()
        return _checked(ask, response)


class AsyncControllerClient(_ControllerRouting):
    """The asyncio client of the active controller, on `grpc.aio` (module docstring): the
    blocking `ControllerClient`'s methods, awaited. It belongs to the event loop it was first
    used on (its channels do)."""

    async def close(self) -> None:
        with self._lock:
            self._closed = True
            channels, self._channels = self._channels, {}
        for dial in channels.values():
            await dial.channel.close()

    async def __aenter__(self) -> AsyncControllerClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    # --- topics and partitions ----------------------------------------------------------------

    # The admin RPCs (`_Op`), awaited.
    create_topics = _awaited(_create_topics_op)
    delete_topics = _awaited(_delete_topics_op)
    create_partitions = _awaited(_create_partitions_op)
    describe_cluster = _awaited(_describe_cluster_op)
    metadata = _awaited(_metadata_op)
    describe_configs = _awaited(_describe_configs_op)
    incremental_alter_configs = _awaited(_incremental_alter_configs_op)
    elect_leaders = _awaited(_elect_leaders_op)
    list_partition_reassignments = _awaited(_list_partition_reassignments_op)
    alter_partition_reassignments = _awaited(_alter_partition_reassignments_op)

    # --- running a call -----------------------------------------------------------------------

    async def _perform(self, op: _Op[T]) -> T:
        steps = self._calling(op.rpc, op.request, op.response_type, op.write, op.timeout_s)
        answer: Any = None
        failure: BaseException | None = None
        while True:
            try:
                step = steps.send(answer) if failure is None else steps.throw(failure)
            except StopIteration as done:
                return op.parse(done.value)
            answer, failure = None, None
            if isinstance(step, _Pause):
                await asyncio.sleep(step.seconds)
                continue
            try:
                answer = await self._attempt(step)
            except (_Unreachable, ReplogError) as exc:
                failure = exc

    async def _attempt(self, ask: _Ask) -> Any:
        """One RPC to one address; a failure to get an answer is `_Unreachable`. A cancelled
        call cancels the RPC, so the server stops waiting on our behalf."""
        dial, method = self._dialled(ask, grpc_channel)
        unavailable = False
        try:
            response = await method(ask.request, timeout=ask.timeout_ms / 1000)
        except grpc.aio.AioRpcError as exc:
            unavailable = exc.code() == grpc.StatusCode.UNAVAILABLE
            raise _classify(ask.address, ask.rpc, exc, ask.timeout_ms) from None
        finally:
            if self._ended(ask.address, dial, unavailable):
                await dial.channel.close()
        return _checked(ask, response)


def _checked(ask: _Ask, response: Any) -> Any:
    """`response` if it is the answer `ask` expects (an answer of another type is a bug)."""
    if not isinstance(response, ask.response_type):
        raise UnknownServerError(
            f"{ask.address}: {ask.rpc} answered with a {type(response).__name__}"
        )
    return response


def _is_not_controller(response: _Response) -> bool:
    """NOT_CONTROLLER for the whole request, or for every one of its items."""
    if response.error.code == NotControllerError.code:
        return True
    codes = [
        item.error.code
        for descriptor, value in response.ListFields()
        if descriptor.is_repeated
        and descriptor.message_type is not None
        and "error" in descriptor.message_type.fields_by_name
        for item in value
    ]
    return bool(codes) and all(code == NotControllerError.code for code in codes)


def _classify(address: str, rpc: str, exc: grpc.RpcError, timeout_ms: int) -> Exception:
    """A gRPC failure as `_Unreachable` (retry elsewhere) or the typed error it stands for."""
    code = exc.code()
    details = exc.details() or ""
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return _Unreachable(f"no answer within {timeout_ms / 1000:g} s", timed_out=True)
    if code == grpc.StatusCode.UNAVAILABLE:
        lowered = details.lower()
        if "refused" in lowered:
            return _Unreachable(_REFUSED)
        if "failed to connect" in lowered:
            # gRPC's polling engine reports a refused reconnection as "FD Shutdown (connect()
            # timed out)" at once: what is known is that nothing could be reached there.
            return _Unreachable(_CANNOT_CONNECT)
        return _Unreachable(f"unavailable: {details}")
    if code == grpc.StatusCode.CANCELLED:
        return _Unreachable(f"cancelled: {details}")  # e.g. the node shutting down
    if code == grpc.StatusCode.UNIMPLEMENTED:
        return _Unreachable("does not serve the Controller service", permanent=True)
    if code == grpc.StatusCode.INVALID_ARGUMENT:
        return InvalidRequestError(f"{address}: {rpc}: {details}")
    return UnknownServerError(f"{address}: {rpc} failed: {code.name}: {details}")


def _no_answer(rpc: str, budget_s: float, said: Mapping[str, str], answered: set[str]) -> str:
    """The deadline passed. When no address answered at all, the message names the addresses
    tried, usually the caller's bootstrap list (a typo, a stopped cluster), not an active
    controller the caller never named; what each said follows (one address is not named
    twice)."""
    if not said or answered:
        return (
            f"{rpc}: no answer from the active controller within {budget_s:g} s: {_summary(said)}"
        )
    what = next(iter(said.values())) if len(said) == 1 else _summary(said)
    return f"{rpc}: no answer from {', '.join(said)} within {budget_s:g} s: {what}"


def _summary(said: Mapping[str, str]) -> str:
    if not said:
        return "no address left to ask"
    return "; ".join(f"{address}: {what}" for address, what in said.items())
