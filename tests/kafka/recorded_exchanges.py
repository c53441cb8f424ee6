"""Exchanges with a real Apache Kafka broker: the file format shared by the recording proxy
(tests/kafka/recording_proxy.py) and the replay server (tests/kafka/replay_server.py).

A recording is one JSON file per scenario (tests/kafka/recorded/<scenario>.json):

    {"scenario": "produce-consume", "kafka": "4.4.0", "client": "kafka-python 3.0.12",
     "brokers": ["127.0.0.1:48092", ...],          # the addresses Kafka advertised
     "exchanges": [{"seq": 0, "connection": 0, "broker": "127.0.0.1:48092",
                    "api": "Metadata", "key": 3, "version": 12, "correlation_id": 1,
                    "request": "<hex>", "response": "<hex>" | null}, ...]}

Frames are stored without their size prefix, exactly as they crossed the wire: the request as
the client sent it, the response as Kafka sent it (before the proxy rewrote addresses in it);
`response` is null for a request Kafka did not answer (Produce with acks=0, or a connection
closed first). `seq` orders the exchanges of all connections by the time their requests
arrived; `connection` numbers the client's connections in the order they opened.

Rules: both sides rewrite broker addresses in responses with `rewrite_addresses` (any struct
with `host` and `port` fields whose address the mapping names: Metadata's and DescribeCluster's
brokers, FindCoordinator's coordinators, Produce's and Fetch's new leaders), so that a client
that bootstrapped from the proxy or the replay server stays on it. Nothing else in a response
is changed.
"""

from __future__ import annotations

import asyncio
import json
import struct
import threading
from collections.abc import Callable, Coroutine, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from replog.kafka.protocol import framing
from replog.kafka.protocol.codec import Message, Struct

T = TypeVar("T")

RECORDED = Path(__file__).resolve().parent / "recorded"
_CORRELATION = struct.Struct(">i")
MAX_FRAME_BYTES = 100 * 1024 * 1024  # Kafka's socket.request.max.bytes
Address = tuple[str, int]


@dataclass
class Exchange:
    """One request and Kafka's response to it (module docstring)."""

    seq: int
    connection: int
    broker: str
    key: int
    version: int
    correlation_id: int
    request: bytes
    response: bytes | None

    @property
    def api(self) -> str:
        return framing.request_class(self.key).NAME.removesuffix("Request")

    def to_json(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "connection": self.connection,
            "broker": self.broker,
            "api": self.api,
            "key": self.key,
            "version": self.version,
            "correlation_id": self.correlation_id,
            "request": self.request.hex(),
            "response": None if self.response is None else self.response.hex(),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Exchange:
        response = data["response"]
        return cls(
            seq=int(data["seq"]),
            connection=int(data["connection"]),
            broker=str(data["broker"]),
            key=int(data["key"]),
            version=int(data["version"]),
            correlation_id=int(data["correlation_id"]),
            request=bytes.fromhex(data["request"]),
            response=None if response is None else bytes.fromhex(response),
        )


@dataclass
class Recording:
    scenario: str
    kafka: str
    client: str
    brokers: list[str]
    exchanges: list[Exchange] = field(default_factory=list)

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        data = {
            "scenario": self.scenario,
            "kafka": self.kafka,
            "client": self.client,
            "brokers": self.brokers,
            "exchanges": [e.to_json() for e in sorted(self.exchanges, key=lambda e: e.seq)],
        }
        path.write_text(json.dumps(data, indent=1) + "\n")

    @classmethod
    def load(cls, path: Path) -> Recording:
        data = json.loads(path.read_text())
        return cls(
            scenario=data["scenario"],
            kafka=data["kafka"],
            client=data["client"],
            brokers=list(data["brokers"]),
            exchanges=[Exchange.from_json(e) for e in data["exchanges"]],
        )


def parse_address(address: str) -> Address:
    host, _, port = address.rpartition(":")
    return host.strip("[]"), int(port)


def format_address(address: Address) -> str:
    host, port = address
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def correlation_id_of(frame: bytes) -> int:
    """The correlation id a response frame (no size prefix) starts with, in every header
    version."""
    value: int = _CORRELATION.unpack_from(frame, 0)[0]
    return value


def with_correlation_id(frame: bytes, correlation_id: int) -> bytes:
    return _CORRELATION.pack(correlation_id) + frame[4:]


def addresses_in(struct_: Struct) -> list[Address]:
    """Every (host, port) of a decoded message's structs, depth first."""
    found: list[Address] = []
    _walk(struct_, lambda s: found.append((s.host, s.port)))
    return found


def rewrite_addresses(
    key: int, version: int, frame: bytes, mapping: Mapping[Address, Address]
) -> bytes:
    """The response `frame` (no size prefix) with every broker address `mapping` names replaced
    (module docstring); the same bytes when it names none of them."""
    if key not in ADDRESS_KEYS:
        return frame
    header, body = framing.decode_response(frame, key, version)
    changed = False

    def replace(s: Any) -> None:
        nonlocal changed
        new = mapping.get((s.host, s.port))
        if new is not None:
            s.host, s.port = new
            changed = True

    _walk(body, replace)
    if not changed:
        return frame
    return framing.encode_response(key, version, header.correlation_id, body, framed=False)


# The responses that name brokers clients dial: Metadata, FindCoordinator, DescribeCluster,
# and Produce and Fetch (a new leader's address with NOT_LEADER_OR_FOLLOWER, KIP-951).
ADDRESS_KEYS = frozenset({0, 1, 3, 10, 60})


def _walk(value: Any, visit: Callable[[Any], None]) -> None:
    if isinstance(value, list | tuple):
        for item in value:
            _walk(item, visit)
        return
    if not isinstance(value, Struct):
        return
    names = type(value).__slots__
    if "host" in names and "port" in names:
        visit(value)
    for name in names:
        _walk(getattr(value, name), visit)


def decoded_request(frame: bytes) -> Message:
    return framing.decode_request(frame)[1]


class LoopThread:
    """An asyncio event loop in a daemon thread, for servers that blocking clients (kafka-python,
    confluent-kafka, replog's blocking classes) talk to from the test's thread."""

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, T], timeout_s: float = 30) -> T:
        future: Future[T] = asyncio.run_coroutine_threadsafe(coro, self.loop)
        return future.result(timeout_s)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()


async def read_frame(reader: asyncio.StreamReader) -> bytes | None:
    """One frame without its size prefix; None at the end of the stream, or where the peer
    does not speak Kafka's protocol (a size no Kafka frame has: an HTTP/2 preface reads as
    1.3 GB)."""
    try:
        prefix = await reader.readexactly(4)
    except asyncio.IncompleteReadError:
        return None
    size = framing.frame_size(prefix)
    if not 0 <= size <= MAX_FRAME_BYTES:
        return None
    try:
        return await reader.readexactly(size)
    except asyncio.IncompleteReadError:
        return None


def framed(frame: bytes) -> bytes:
    return struct.pack(">i", len(frame)) + frame
