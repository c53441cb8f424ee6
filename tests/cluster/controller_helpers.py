"""Talking to the controller quorum of a loopback cluster as clients and brokers do.

`ControllerClient` sends Controller RPCs to a chosen node, or to the active controller,
following `controller_id` on NOT_CONTROLLER and moving on when a node does not answer.
`FakeBrokers` registers brokers from the test and keeps them alive with heartbeats, as the
broker lifecycle would, so the controller has unfenced brokers to place replicas on.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import grpc
from cluster_helpers import CHANNEL_OPTIONS, Background, wait_for

from replog.pb import controller_pb2 as pb
from replog.pb import controller_pb2_grpc

CALL_TIMEOUT_S = 2.0
METADATA_VERSION = pb.SupportedFeature(
    name="metadata.version", min_supported_version=1, max_supported_version=12
)
TRANSACTION_VERSION = pb.SupportedFeature(
    name="transaction.version", min_supported_version=0, max_supported_version=2
)
NOT_CONTROLLER = "NOT_CONTROLLER"
M = TypeVar("M")


class ControllerClient:
    """Controller stubs for every node of a cluster, by node id."""

    def __init__(self, addresses: dict[int, str]) -> None:
        self._channels = {
            i: grpc.insecure_channel(a, options=CHANNEL_OPTIONS) for i, a in addresses.items()
        }
        self._stubs = {
            i: controller_pb2_grpc.ControllerStub(c)  # type: ignore[no-untyped-call]
            for i, c in self._channels.items()
        }
        self.node_ids = sorted(addresses)
        self._lock = threading.Lock()
        self._active: int | None = None

    def close(self) -> None:
        for channel in self._channels.values():
            channel.close()

    def call(
        self, node_id: int, method: str, request: Any, timeout_s: float = CALL_TIMEOUT_S
    ) -> Any:
        """One RPC to one node; raises grpc.RpcError when the node does not answer."""
        return getattr(self._stubs[node_id], method)(request, timeout=timeout_s)

    def active_id(self, timeout_s: float = 15) -> int:
        """The active controller as the nodes report it, once one is known."""
        found: list[int] = []

        def known() -> bool:
            for node_id in self.node_ids:
                try:
                    answer = self.call(node_id, "DescribeCluster", pb.DescribeClusterRequest(), 0.5)
                except grpc.RpcError:
                    continue
                if answer.controller_id in self._stubs:
                    found.append(answer.controller_id)
                    return True
            return False

        wait_for(known, timeout_s, "an active controller")
        return found[-1]

    def write(self, method: str, request: Any, timeout_s: float = 20) -> Any:
        """Send `request` to the active controller until one answers with anything but
        NOT_CONTROLLER (or the node is unreachable); return that answer."""
        deadline = time.monotonic() + timeout_s
        while True:
            with self._lock:
                target = self._active
            if target is None:
                target = self.active_id(max(0.1, deadline - time.monotonic()))
            try:
                answer = self.call(target, method, request)
            except grpc.RpcError:
                answer = None
            if answer is not None and answer.error.error_name != NOT_CONTROLLER:
                with self._lock:
                    self._active = target
                return answer
            with self._lock:
                named = None if answer is None else answer.controller_id
                self._active = named if named in self._stubs and named != target else None
            if time.monotonic() > deadline:
                raise AssertionError(f"{method}: no active controller answered in {timeout_s} s")
            time.sleep(0.05)


@dataclass
class FakeBrokers(Background):
    """Brokers that exist only as registrations and heartbeats sent from the test."""

    client: ControllerClient
    cluster_id: str
    broker_ids: tuple[int, ...]
    interval_s: float = 0.5
    epochs: dict[int, int] = field(default_factory=dict)
    fenced: dict[int, bool] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    def __enter__(self) -> FakeBrokers:
        for broker_id in self.broker_ids:
            answer = self.client.write(
                "BrokerRegistration",
                pb.BrokerRegistrationRequest(
                    broker_id=broker_id,
                    cluster_id=self.cluster_id,
                    incarnation_id=uuid.uuid4().bytes,
                    listeners=[
                        pb.Listener(name="PLAINTEXT", host="127.0.0.1", port=40000 + broker_id)
                    ],
                    features=[METADATA_VERSION, TRANSACTION_VERSION],
                ),
            )
            assert not answer.HasField("error"), answer
            self.epochs[broker_id] = answer.broker_epoch
        super().__enter__()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            for broker_id, epoch in self.epochs.items():
                try:
                    answer = self.client.write(
                        "BrokerHeartbeat",
                        pb.BrokerHeartbeatRequest(
                            broker_id=broker_id,
                            broker_epoch=epoch,
                            # The broker epoch is its registration's offset: caught up to it.
                            current_metadata_offset=epoch,
                            want_fence=False,
                        ),
                        timeout_s=5,
                    )
                except AssertionError as error:
                    self.errors.append(str(error))
                    continue
                if answer.HasField("error"):
                    self.errors.append(f"broker {broker_id}: {answer.error}")
                else:
                    self.fenced[broker_id] = answer.is_fenced
            self._stop.wait(self.interval_s)

    def wait_unfenced(self, timeout_s: float = 15) -> None:
        def unfenced() -> bool:
            return len(self.fenced) == len(self.epochs) and not any(self.fenced.values())

        wait_for(unfenced, timeout_s, f"brokers {self.broker_ids} to be unfenced")


def eventually(
    probe: Callable[[], M], check: Callable[[M], bool], timeout_s: float, what: str
) -> M:
    """Probe until `check` holds; return the value that passed."""
    seen: list[M] = []

    def passes() -> bool:
        seen.append(probe())
        return check(seen[-1])

    wait_for(passes, timeout_s, what)
    return seen[-1]
