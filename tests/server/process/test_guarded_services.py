"""Every gRPC service a node serves answers bytes that are not a request of the method's type
with INVALID_ARGUMENT naming the method and the message type, as the Broker service does
(`tolerant_service`), never gRPC's UNKNOWN "Unexpected <class DecodeError>" with a traceback
in the node's log."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest

from replog.pb import broker_pb2, controller_pb2, raft_pb2, replica_fetch_pb2
from replog.server.process.node import Node
from tests.server.process.test_node_failed_start import combined_node

GARBAGE = b"\xff" * 64  # a varint that never ends: no message of any type


def every_method() -> list[tuple[str, str, str]]:
    """(service, method, request type) of every service in the node's protos."""
    found = []
    for module in (broker_pb2, controller_pb2, raft_pb2, replica_fetch_pb2):
        for service in module.DESCRIPTOR.services_by_name.values():
            for method in service.methods:
                found.append((service.full_name, method.name, method.input_type.full_name))
    return found


@pytest.mark.asyncio
async def test_garbage_is_an_invalid_argument_on_every_service(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    node = Node(combined_node(tmp_path))
    await node._start_listening()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{node.listener_port}") as channel:
            methods = every_method()
            assert {s for s, _, _ in methods} >= {
                "replog.pb.Controller",
                "replog.pb.RaftQuorum",
                "replog.pb.MetadataLog",
            }
            for service, method, request_type in methods:
                descriptor = broker_pb2.DESCRIPTOR.pool.FindServiceByName(service)
                streaming = descriptor.methods_by_name[method].client_streaming
                path = f"/{service}/{method}"
                with pytest.raises(grpc.aio.AioRpcError) as refused:
                    if streaming:
                        call = channel.stream_stream(path)()
                        await call.write(GARBAGE)
                        await call.read()
                    else:
                        await channel.unary_unary(path)(GARBAGE, timeout=5)
                details = refused.value.details() or ""
                assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT, (path, details)
                assert f"{method}: the 64 request bytes are not a {request_type}" in details
    finally:
        await node._close_unstarted()
    assert "Traceback" not in caplog.text
