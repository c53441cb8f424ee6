"""Test doubles for replog's own tests and for the tests of applications that use replog.

- `ManualClock`: a millisecond clock the test moves (`advance`), or that moves `tick_ms` at
  every read. Pass it wherever replog takes a `clock`: the clients (`Producer(...,
  clock=clock)`, `Consumer`, `Admin`, blocking or asyncio), the storage and the server's
  shells. The clients' waits on the network stay real; their deadlines, backoffs and ages
  follow the clock.
- `FakeBroker` (and `running_fake_broker()`): an in-process server of the Broker gRPC service
  on 127.0.0.1 (a free port) that answers what the test scripts, message or raw bytes
  (`answer(rpc, first, *later)`); an RPC with no answer aborts with UNIMPLEMENTED. `calls` and
  `streams` count what it was asked. A stream RPC (`FetchStream`, `ProduceStream`) answers each
  message of the stream as a call of its own.
- `LoopTasks`: what starts the background tasks of a node's part built alone, outside a node
  (`tasks=LoopTasks()` where the node hands its group, `replog.server.node_tasks`): plain tasks
  of the running loop, which the part cancels or awaits itself; a failure is not the node's.
- `local_cluster(directory, nodes=1)`: real node processes (`replog cluster start`) for the
  length of a `with` block, which yields the bootstrap address; the nodes are stopped after it,
  killed if they do not stop. A pytest fixture is three lines::

      @pytest.fixture(scope="module")
      def bootstrap(tmp_path_factory):
          with local_cluster(tmp_path_factory.mktemp("cluster")) as servers:
              yield servers
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import socket
import subprocess
import sys
import threading
from collections import Counter, deque
from collections.abc import Coroutine, Iterator
from concurrent import futures
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import grpc

from replog.errors import ReplogError
from replog.pb import broker_pb2 as pb
from replog.pb import controller_pb2

__all__ = [
    "GARBAGE",
    "FakeBroker",
    "LoopTasks",
    "ManualClock",
    "free_base_port",
    "local_cluster",
    "running_fake_broker",
]

SERVICE = pb.DESCRIPTOR.services_by_name["Broker"]
RPCS = [method.name for method in SERVICE.methods if not method.client_streaming]
STREAMS = [method.name for method in SERVICE.methods if method.client_streaming]

# Bytes that no protobuf message parses: field 1 with wire type 7 (there is none).
GARBAGE = b"\x0f\xff\xff\xff\xff"
# Where a local cluster's node serves its metrics, above its listener (the layout of
# `replog cluster`, replog/cli/local_cluster.py; tests/test_testing.py holds them equal).
METRICS_PORT_OFFSET = 100
# The ports of `free_base_port`'s latest answers in this process: free when given, and maybe
# not bound yet by the caller.
_LATEST_HANDED_OUT: deque[frozenset[int]] = deque(maxlen=16)


class ManualClock:
    """A millisecond clock under the test's control (module docstring): `clock()` is the time,
    `advance(ms)` moves it; with `tick_ms`, every read moves it that much first (time passes
    between any two reads, deterministically)."""

    def __init__(self, now_ms: int = 1_000_000, *, tick_ms: int = 0) -> None:
        self.now_ms = now_ms
        self.tick_ms = tick_ms
        self._lock = threading.Lock()  # a blocking client reads it from two threads

    def __call__(self) -> int:
        with self._lock:
            self.now_ms += self.tick_ms
            return self.now_ms

    def advance(self, ms: int) -> int:
        """Move the clock `ms` forward; the new time."""
        if ms < 0:
            raise ValueError(f"ManualClock.advance: a clock does not go back ({ms} ms)")
        with self._lock:
            self.now_ms += ms
            return self.now_ms


class LoopTasks:
    """Starts a part's background tasks on the running loop (module docstring): a
    `replog.server.node_tasks.Spawner` for a part built without a node."""

    def spawn(self, work: Coroutine[Any, Any, None], *, name: str) -> asyncio.Task[None]:
        return asyncio.get_running_loop().create_task(work, name=name)


class FakeBroker:
    """An in-process server of the Broker gRPC service that answers whatever bytes a test
    scripts (module docstring)."""

    def __init__(self) -> None:
        self._answers: dict[str, list[bytes]] = {}
        self.calls: Counter[str] = Counter()  # per RPC, the calls it got
        self.streams: Counter[str] = Counter()  # per stream RPC, the calls opened
        self._lock = threading.Lock()
        # Owned here: gRPC's server does not shut down the pool it is given, and a fake per
        # test would otherwise leave its threads behind.
        self._executor = futures.ThreadPoolExecutor(max_workers=4)
        self._server = grpc.server(self._executor)
        handlers = {
            rpc: grpc.unary_unary_rpc_method_handler(
                self._handler(rpc),
                request_deserializer=None,  # raw bytes in
                response_serializer=None,  # raw bytes out
            )
            for rpc in RPCS
        }
        for rpc in STREAMS:
            handlers[rpc] = grpc.stream_stream_rpc_method_handler(
                self._stream_handler(rpc), request_deserializer=None, response_serializer=None
            )
        self._server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler(SERVICE.full_name, handlers),)
        )
        self.port = self._server.add_insecure_port("127.0.0.1:0")
        self._server.start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def metadata(self, topic: str, partitions: int = 1) -> controller_pb2.MetadataResponse:
        """A Metadata answer naming this fake as broker 0, the leader of every partition of
        `topic` (epoch 0)."""
        return controller_pb2.MetadataResponse(
            controller_id=-1,
            cluster_id="fake",
            brokers=[controller_pb2.BrokerEndpoint(broker_id=0, host="127.0.0.1", port=self.port)],
            topics=[
                controller_pb2.TopicMetadata(
                    name=topic,
                    topic_id=bytes(range(16)),
                    partitions=[
                        controller_pb2.PartitionMetadata(
                            partition_index=p, leader_id=0, replicas=[0], isr=[0]
                        )
                        for p in range(partitions)
                    ],
                )
            ],
        )

    def answer(self, rpc: str, answer: bytes | Any, *later: bytes | Any) -> None:
        """Answer the next `rpc` call with `answer` (raw bytes, or a message to serialize), the
        calls after it with the `later` ones in turn, and every call after those with the
        last one."""
        assert rpc in RPCS or rpc in STREAMS, rpc
        raw = [a if isinstance(a, bytes) else a.SerializeToString() for a in (answer, *later)]
        with self._lock:
            self._answers[rpc] = raw

    def _next_answer(self, rpc: str, context: grpc.ServicerContext) -> bytes:
        with self._lock:
            self.calls[rpc] += 1
            answers = self._answers.get(rpc)
            raw = None
            if answers:  # the last one answers every call after it
                raw = answers.pop(0) if len(answers) > 1 else answers[0]
        if raw is None:
            context.abort(grpc.StatusCode.UNIMPLEMENTED, f"no scripted answer to {rpc}")
        assert raw is not None  # abort raised
        return raw

    def _handler(self, rpc: str) -> Any:
        def handle(request: bytes, context: grpc.ServicerContext) -> bytes:
            return self._next_answer(rpc, context)

        return handle

    def _stream_handler(self, rpc: str) -> Any:
        """Each request of the stream answered as a call of `rpc` would be (and counted as
        one in `calls`)."""

        def handle(requests: Iterator[bytes], context: grpc.ServicerContext) -> Iterator[bytes]:
            with self._lock:
                self.streams[rpc] += 1
            for _request in requests:
                yield self._next_answer(rpc, context)

        return handle

    def stop(self) -> None:
        self._server.stop(None).wait()
        self._executor.shutdown(wait=True)


@contextmanager
def running_fake_broker() -> Iterator[FakeBroker]:
    """A `FakeBroker`, stopped at the end of the block."""
    broker = FakeBroker()
    try:
        yield broker
    finally:
        broker.stop()


@contextmanager
def local_cluster(
    directory: str | Path, nodes: int = 1, *, base_port: int | None = None, timeout_s: float = 60
) -> Iterator[str]:
    """A local cluster of `nodes` combined nodes in `directory` (module docstring), on
    `base_port` and the ports after it (free ports when None); yields its bootstrap address."""
    port = free_base_port(nodes) if base_port is None else base_port
    command = [sys.executable, "-m", "replog.cli.main", "cluster"]
    where = ["--data-dir", str(directory)]
    started = subprocess.run(
        [*command, "start", *where, "--nodes", str(nodes), "--base-port", str(port)],
        capture_output=True,
        text=True,
        timeout=timeout_s + 30,
        check=False,
    )
    try:
        if started.returncode != 0:
            raise ReplogError(
                f"local_cluster: `replog cluster start` in {directory} failed "
                f"(exit {started.returncode}): {started.stderr.strip() or started.stdout.strip()}"
            )
        yield ",".join(f"127.0.0.1:{port + i}" for i in range(nodes))
    finally:
        stopped = subprocess.run(
            [*command, "stop", *where], capture_output=True, text=True, timeout=120, check=False
        )
        if stopped.returncode != 0:
            subprocess.run([*command, "kill", *where], capture_output=True, timeout=60, check=False)


def free_base_port(
    count: int,
    *,
    offsets: tuple[int, ...] = (METRICS_PORT_OFFSET,),
    within: tuple[int, int] | None = None,
) -> int:
    """A port p such that p..p+count-1 are all free now, and so are the `count` ports at each
    of `offsets` above it (a local cluster's metrics ports: p+100...), all below the kernel's
    ephemeral range: inside it, the first nodes' outgoing connections may take a later node's
    port before that node binds it. `within` (low, high) narrows where p and its ports may
    lie (a test runner's worker its own stripe, so that two workers never pick the same).

    A port among this process's latest 16 answers is not handed out again: a caller that asks
    twice before it binds (a cluster's ports, then its proxies') would otherwise be given the
    same free ports twice."""
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        ephemeral_low = int(f.read().split()[0])
    low, high = within if within is not None else (10_000, ephemeral_low)
    high = min(high, ephemeral_low) - max((0, *offsets)) - count
    if high <= low:
        raise ReplogError(f"no room for {count} ports (and those at {offsets} above) in {within}")
    for _ in range(200):
        base = random.randrange(low, high)
        starts = (base, *(base + offset for offset in offsets))
        ports = frozenset(p for start in starts for p in range(start, start + count))
        if any(ports & given for given in _LATEST_HANDED_OUT):
            continue
        with contextlib.ExitStack() as held:
            try:
                for port in ports:
                    probe = held.enter_context(socket.socket())
                    probe.bind(("127.0.0.1", port))
            except OSError:
                continue
        _LATEST_HANDED_OUT.append(ports)
        return base
    raise ReplogError(f"no {count} free ports (and those at {offsets} above) in {low}..{high}")
