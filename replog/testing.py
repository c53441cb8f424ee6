"""Test doubles for replog's own tests and for the tests of applications that use replog.

- `ManualClock`: a millisecond clock the test moves (`advance`), or that moves `tick_ms` at
  every read. Pass it wherever replog takes a `clock`: the clients (`Producer(...,
  clock=clock)`, `Consumer`, `Admin`, blocking or asyncio), the storage and the server's
  shells. The clients' waits on the network stay real; their deadlines, backoffs and ages
  follow the clock.
- `FakeKafkaBroker` (and `running_fake_kafka_broker()`): an in-process Kafka listener on
  127.0.0.1 (a free port) that answers what the test scripts, messages or raw body bytes
  (`answer(api, first, *later)`), for the clients, which speak Kafka's protocol; a request
  with nothing scripted closes its connection. `calls` and `requests` say what it was asked.
- `LoopTasks`: what starts the background tasks of a node's part built alone, outside a node
  (`tasks=LoopTasks()` where the node hands its group, `replog.server.runtime.node_tasks`): plain
  tasks of the running loop, which the part cancels or awaits itself; a failure is not the node's.
- `local_cluster(directory, nodes=1)`: real node processes (`replog cluster start`) for the
  length of a `with` block, which yields the bootstrap address (the brokers' Kafka
  listeners, 200 above the nodes' ports); the nodes are stopped after it,
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
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from uuid import UUID

from replog.errors import ReplogError
from replog.kafka.messages import REQUESTS
from replog.kafka.messages.api_versions_request import ApiVersionsRequest
from replog.kafka.messages.api_versions_response import ApiVersion, ApiVersionsResponse
from replog.kafka.messages.metadata_response import (
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from replog.kafka.messages.produce_request import ProduceRequest
from replog.kafka.messages.response_header import ResponseHeader
from replog.kafka.protocol.codec import Message
from replog.kafka.protocol.framing import (
    decode_request,
    encode_response,
    response_header_version,
)
from replog.wire.server_close import close_server

__all__ = [
    "GARBAGE",
    "FakeKafkaBroker",
    "LoopTasks",
    "ManualClock",
    "free_base_port",
    "local_cluster",
    "running_fake_kafka_broker",
]

# Bytes that no protobuf message parses: field 1 with wire type 7 (there is none).
GARBAGE = b"\x0f\xff\xff\xff\xff"
# Where a local cluster's node serves its metrics, above its listener (the layout of
# `replog cluster`, replog/cli/local_cluster.py; tests/test_testing.py holds them equal).
METRICS_PORT_OFFSET = 100
# Where a local cluster's Kafka listeners are, above its first gRPC port, and their controllers'
# Kafka listeners (`replog cluster start --kafka-base-port`: controllers 100 above it).
LOCAL_KAFKA_PORT_OFFSETS = (200, 300)
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
    `replog.server.runtime.node_tasks.Spawner` for a part built without a node."""

    def spawn(self, work: Coroutine[Any, Any, None], *, name: str) -> asyncio.Task[None]:
        return asyncio.get_running_loop().create_task(work, name=name)


KafkaAnswer = Message | bytes | Callable[[Message, int], "Message | bytes"]


class FakeKafkaBroker:
    """An in-process Kafka listener on 127.0.0.1 (a free port) that answers what the test
    scripts (module docstring): `answer("Metadata", first, *later)` with response messages,
    raw body bytes (sent after a correct response header: a body that does not decode), or
    callables of (request, version). ApiVersions is answered with every API and version
    replog's codecs define; a request with no scripted answer closes its connection.
    `calls` counts the requests per API name, `requests` keeps (name, request, version),
    `connections` counts the connections accepted."""

    def __init__(self) -> None:
        self._answers: dict[str, list[KafkaAnswer]] = {}
        self.calls: Counter[str] = Counter()
        self.requests: list[tuple[str, Message, int]] = []
        self.connections = 0  # connections accepted
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        started = threading.Event()
        self._thread = threading.Thread(
            target=self._main, args=(started,), name="fake-kafka-broker", daemon=True
        )
        self._thread.start()
        started.wait()
        assert self._server is not None
        self.port: int = self._server.sockets[0].getsockname()[1]

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def metadata(self, topic: str, partitions: int = 1) -> MetadataResponse:
        """A Metadata answer naming this fake as broker 0, the leader of every partition of
        `topic` (epoch 0)."""
        return MetadataResponse(
            controller_id=-1,
            cluster_id="fake",
            brokers=[MetadataResponseBroker(node_id=0, host="127.0.0.1", port=self.port)],
            topics=[
                MetadataResponseTopic(
                    name=topic,
                    topic_id=UUID(bytes=bytes(range(16))),
                    partitions=[
                        MetadataResponsePartition(
                            partition_index=p, leader_id=0, replica_nodes=[0], isr_nodes=[0]
                        )
                        for p in range(partitions)
                    ],
                )
            ],
        )

    def answer(self, api: str, answer: KafkaAnswer, *later: KafkaAnswer) -> None:
        """Answer the next `api` request ("Metadata", "Produce", ...) with `answer`, the ones
        after it with the `later` ones in turn, and every one after those with the last."""
        assert any(api + "Request" == cls.NAME for cls in REQUESTS.values()), api
        with self._lock:
            self._answers[api] = [answer, *later]

    def _next_answer(self, api: str) -> KafkaAnswer | None:
        with self._lock:
            self.calls[api] += 1
            answers = self._answers.get(api)
            if not answers:
                return None
            return answers.pop(0) if len(answers) > 1 else answers[0]

    def _main(self, started: threading.Event) -> None:
        asyncio.set_event_loop(self._loop)

        async def serve() -> None:
            self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
            started.set()

        self._loop.run_until_complete(serve())
        self._loop.run_forever()
        self._loop.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        self.connections += 1
        try:
            while True:
                size = int.from_bytes(await reader.readexactly(4), "big")
                header, request = decode_request(await reader.readexactly(size))
                key, version = header.request_api_key, header.request_api_version
                api = REQUESTS[key].NAME.removesuffix("Request")
                with self._lock:
                    self.requests.append((api, request, version))
                if key == ApiVersionsRequest.API_KEY and api not in self._answers:
                    self.calls[api] += 1
                    answer: KafkaAnswer | None = ApiVersionsResponse(
                        api_keys=[
                            ApiVersion(
                                api_key=k, min_version=c.MIN_VERSION, max_version=c.MAX_VERSION
                            )
                            for k, c in sorted(REQUESTS.items())
                        ]
                    )
                else:
                    answer = self._next_answer(api)
                if callable(answer) and not isinstance(answer, Message):
                    answer = answer(request, version)
                if answer is None:
                    return  # nothing scripted: the connection closes
                if key == ProduceRequest.API_KEY and getattr(request, "acks", -1) == 0:
                    continue
                if isinstance(answer, bytes):
                    out = bytearray(b"\0\0\0\0")
                    ResponseHeader(correlation_id=header.correlation_id).write(
                        out, response_header_version(key, version)
                    )
                    out += answer
                    out[0:4] = (len(out) - 4).to_bytes(4, "big")
                    writer.write(bytes(out))
                else:
                    writer.write(encode_response(key, version, header.correlation_id, answer))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            return
        finally:
            # Its task ends only once the transport is gone: `stop` waits for every task.
            writer.close()
            with contextlib.suppress(OSError):  # how the connection ended: not the test's
                await writer.wait_closed()
            self._writers.discard(writer)

    def drop_connections(self) -> None:
        """Close every client connection now (a broker restart, as the client sees it)."""

        def drop() -> None:
            for writer in list(self._writers):
                writer.close()

        self._loop.call_soon_threadsafe(drop)

    def stop(self) -> None:
        """Stop listening and close every connection, waiting until each transport is gone:
        a connection accepted moments ago, whose handler has not run yet, included (the loop
        is closed next, and a transport it never closed would be left open)."""

        async def close() -> None:
            assert self._server is not None
            await close_server(self._server)
            # Each connection's `_serve` task ends once its transport is gone; one made as the
            # server closed shows its writer only once that task has run, so the writers are
            # looked at again until no task is left.
            me = asyncio.current_task()
            while others := asyncio.all_tasks() - {me}:
                for writer in list(self._writers):
                    writer.transport.abort()
                await asyncio.wait(others, timeout=0.01)

        asyncio.run_coroutine_threadsafe(close(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)


@contextmanager
def running_fake_kafka_broker() -> Iterator[FakeKafkaBroker]:
    """A `FakeKafkaBroker`, stopped at the end of the block."""
    broker = FakeKafkaBroker()
    try:
        yield broker
    finally:
        broker.stop()


@contextmanager
def local_cluster(
    directory: str | Path, nodes: int = 1, *, base_port: int | None = None, timeout_s: float = 60
) -> Iterator[str]:
    """A local cluster of `nodes` combined nodes in `directory` (module docstring), on
    `base_port` and the ports after it (free ports when None), its Kafka listeners 200 above
    them; yields the bootstrap address: the Kafka listeners, what clients connect to."""
    port = (
        free_base_port(nodes, offsets=(METRICS_PORT_OFFSET, *LOCAL_KAFKA_PORT_OFFSETS))
        if base_port is None
        else base_port
    )
    kafka_port = port + LOCAL_KAFKA_PORT_OFFSETS[0]
    command = [sys.executable, "-m", "replog.cli.main", "cluster"]
    where = ["--data-dir", str(directory)]
    ports = ["--base-port", str(port), "--kafka-base-port", str(kafka_port)]
    started = subprocess.run(
        [*command, "start", *where, "--nodes", str(nodes), *ports],
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
        yield ",".join(f"127.0.0.1:{kafka_port + i}" for i in range(nodes))
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
