"""An in-process fake of the Broker gRPC service that answers whatever bytes a test gives it.

`FakeBroker()` serves every RPC of `broker.proto` on 127.0.0.1 (a free port), in a gRPC server
thread pool. Every method is registered with identity (de)serializers, so an answer can be
bytes that are no protobuf message at all (a peer that is not a replog broker, or a buggy or
newer one); `answer(rpc, message)` serializes a message for a well-formed answer with
impossible contents, and `answer(rpc, first, then)` scripts a sequence (a Fetch answered
with records once, then with none, as a broker's log would). An RPC without an answer
aborts with UNIMPLEMENTED. `calls` counts the calls of each RPC. A stream RPC (`FetchStream`,
`ProduceStream`) answers each message of the stream as a call of its own (scripted and counted
under its name); `streams` counts the stream calls opened.

Imported by module name (`import fake_broker`): pytest puts this folder on `sys.path` for the
tests in it.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from concurrent import futures
from contextlib import contextmanager
from typing import Any

import grpc
import pytest

from replog.pb import broker_pb2 as pb
from replog.pb import controller_pb2
from replog.wire.broker_client import BrokerClient

SERVICE = pb.DESCRIPTOR.services_by_name["Broker"]
RPCS = [method.name for method in SERVICE.methods if not method.client_streaming]
STREAMS = [method.name for method in SERVICE.methods if method.client_streaming]

# Bytes that no protobuf message parses: field 1 with wire type 7 (there is none).
GARBAGE = b"\x0f\xff\xff\xff\xff"


class FakeBroker:
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
def running() -> Iterator[FakeBroker]:
    broker = FakeBroker()
    try:
        yield broker
    finally:
        broker.stop()


def record_redials(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The addresses whose BrokerClient channel is dropped from now on, in order."""
    redialled: list[str] = []
    reconnect = BrokerClient.reconnect

    def recording(client: BrokerClient) -> None:
        redialled.append(client.address)
        reconnect(client)

    monkeypatch.setattr(BrokerClient, "reconnect", recording)
    return redialled
